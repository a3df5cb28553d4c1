//! The end of a recording: `--duration`, the traced command exiting, or a signal.
//!
//! ```text
//! --duration 2.5        StopWhen::Duration(2.5 s)   (decimal seconds parsed without floats)
//! -- make -j4           StopWhen::Command(argv)     SIGINT/SIGTERM/SIGHUP are forwarded to the
//!                                                   command; the third signal sends SIGKILL
//! (neither)             StopWhen::Signal            until Ctrl-C / SIGTERM
//! ```
//! While waiting, `/proc` is scanned about once a second for new tasks (system context).

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use stallscope_model::Tid;

use crate::context::ContextCollector;
use crate::signals::{self, SignalGuard};
use crate::RecordError;

/// When the recording ends (besides SIGINT / SIGTERM / SIGHUP, which always end it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopWhen {
    /// After this long.
    Duration(Duration),
    /// When this command (argv) exits.
    Command(Vec<String>),
    /// Only on a signal (Ctrl-C).
    Signal,
}

/// Parses decimal seconds (`2`, `0.25`, `1.5`) into nanoseconds without floating point.
pub fn parse_seconds(text: &str) -> Result<u64, String> {
    let bad = || format!("expected a positive number of seconds like 2 or 0.5, not {text:?}");
    let (whole, frac) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
    if (whole.is_empty() && frac.is_empty())
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 9
    {
        return Err(bad());
    }
    let secs: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().map_err(|_| bad())?
    };
    let ns = secs
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(frac_ns))
        .ok_or_else(bad)?;
    if ns == 0 {
        return Err(bad());
    }
    Ok(ns)
}

/// Result of waiting: the signal that ended it and the command's exit status.
pub type Waited = Result<(Option<&'static str>, Option<std::process::ExitStatus>), RecordError>;

/// Waits for the stop condition, or for `failed` (a reader could not write: the recording
/// stops at once; a traced command keeps running); scans /proc about once a second
/// meanwhile.
pub fn wait_for_stop(
    stop: &StopWhen,
    sig: &mut SignalGuard,
    collector: &mut ContextCollector,
    failed: &std::sync::atomic::AtomicBool,
) -> Waited {
    let started = Instant::now();
    let mut last_scan = Instant::now();
    let mut child: Option<Child> = None;
    if let StopWhen::Command(argv) = stop {
        let (prog, args) = argv
            .split_first()
            .ok_or_else(|| RecordError::Usage("empty command after --".into()))?;
        let c = Command::new(prog)
            .args(args)
            .spawn()
            .map_err(|e| RecordError::Spawn(prog.clone(), e))?;
        collector.add([c.id() as Tid]);
        child = Some(c);
    }
    let mut received = 0u32;
    let mut stopped_by = None;
    loop {
        if failed.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok((None, None));
        }
        if let Some(c) = child.as_mut() {
            if let Some((s, from_terminal)) = sig.take_new() {
                stopped_by = Some(signals::name(s));
                received += 1;
                // A third signal means "really stop": the command is killed. Terminal
                // signals (Ctrl-C) already reached the command, which shares our process group.
                let send = if received >= 3 {
                    Some(libc::SIGKILL)
                } else {
                    (!from_terminal).then_some(s)
                };
                if let Some(send) = send {
                    // SAFETY: plain kill(2) on our own child's pid.
                    unsafe { libc::kill(c.id() as libc::pid_t, send) };
                }
            }
            match c.try_wait() {
                Ok(Some(status)) => return Ok((stopped_by, Some(status))),
                Ok(None) => {
                    // The command was described right after the fork, before it set its
                    // affinity (`taskset`), nice or policy and exec'd: it is read again while it
                    // runs (often at first, then with each scan), so the last state it ran in is
                    // the one recorded.
                    if started.elapsed() < Duration::from_secs(1)
                        || last_scan.elapsed() >= Duration::from_secs(1)
                    {
                        collector.refresh(c.id() as Tid);
                    }
                }
                Err(e) => return Err(RecordError::Spawn("waiting for the command".into(), e)),
            }
        } else {
            if let Some(s) = signals::pending() {
                return Ok((Some(signals::name(s)), None));
            }
            if let StopWhen::Duration(d) = stop {
                if started.elapsed() >= *d {
                    return Ok((None, None));
                }
            }
        }
        if last_scan.elapsed() >= Duration::from_secs(1) {
            collector.scan();
            last_scan = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("2"), Ok(2_000_000_000));
        assert_eq!(parse_seconds("0.25"), Ok(250_000_000));
        assert_eq!(parse_seconds(".5"), Ok(500_000_000));
        assert_eq!(parse_seconds("1.000000001"), Ok(1_000_000_001));
        for bad in [
            "0",
            "",
            ".",
            "-1",
            "1e3",
            "1.0000000001",
            "x",
            "99999999999999999999",
        ] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }
}

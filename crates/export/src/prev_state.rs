//! Converts our normalized [`PrevState`] back into the raw `sched_switch.prev_state` number
//! the kernel of the input would have written, so that a consumer that decodes raw values
//! by kernel version (Perfetto's trace processor, keyed by `SystemInfo.utsname.release`)
//! shows the same letters we read.
//!
//! Tables (shared/reference/formats.md §6):
//!
//! ```text
//! kernel      S  D  T  t  X     Z     P     I     x   K    W    N     preempted (+)
//! >= 4.14     1  2  4  8  0x10  0x20  0x40  0x80  -   -    -    -     0x100
//! 4.2-4.13    1  2  4  8  32    16    512   D|N   64  128  256  1024  2048
//! <= 4.1      1  2  4  8  32    16    512   D     64  128  256  -     1024
//! ```
//!
//! Letters a table has no bit for (e.g. `K` on 6.x, or a vendor letter we read as `?`) are
//! dropped; [`RawPrevState::lossy`] says when that happened. `I` on pre-4.14 kernels was
//! `TASK_IDLE = TASK_UNINTERRUPTIBLE | TASK_NOLOAD`, reported as `D|N` (4.2+) or `D`.

use stallscope_model::PrevState;

/// Which raw encoding a kernel uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateEncoding {
    /// Linux ≥ 4.14: `TASK_REPORT` index bits, preempted = 0x100.
    Report414,
    /// Linux 4.2 – 4.13: task state bits with `N`, preempted = 2048. Also what Perfetto
    /// assumes when a trace does not name its kernel (it defaults to 4.4 semantics).
    State42,
    /// Linux ≤ 4.1: task state bits, preempted = 1024.
    State31,
}

impl StateEncoding {
    /// The encoding for a kernel release string (`6.18.44-fc-v769`, `4.4.0-21-generic`).
    /// `None` when the release does not start with `MAJOR.MINOR`.
    pub fn for_release(release: &str) -> Option<StateEncoding> {
        let mut parts = release.split(['.', '-']);
        let major: u32 = parts.next()?.parse().ok()?;
        let minor: u32 = parts
            .next()?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .ok()?;
        Some(if (major, minor) >= (4, 14) {
            StateEncoding::Report414
        } else if (major, minor) >= (4, 2) {
            StateEncoding::State42
        } else {
            StateEncoding::State31
        })
    }

    /// `(normalized bit, raw value)` pairs and the preempted bit.
    fn table(self) -> (&'static [(u16, i64)], i64) {
        const REPORT: &[(u16, i64)] = &[
            (PrevState::S, 0x01),
            (PrevState::D, 0x02),
            (PrevState::T, 0x04),
            (PrevState::TRACED, 0x08),
            (PrevState::X, 0x10),
            (PrevState::Z, 0x20),
            (PrevState::P, 0x40),
            (PrevState::I, 0x80),
        ];
        const STATE42: &[(u16, i64)] = &[
            (PrevState::S, 1),
            (PrevState::D, 2),
            (PrevState::T, 4),
            (PrevState::TRACED, 8),
            (PrevState::Z, 16),
            (PrevState::X, 32),
            (PrevState::XDEAD, 64),
            (PrevState::K, 128),
            (PrevState::W, 256),
            (PrevState::P, 512),
            (PrevState::N, 1024),
            (PrevState::I, 2 | 1024),
        ];
        const STATE31: &[(u16, i64)] = &[
            (PrevState::S, 1),
            (PrevState::D, 2),
            (PrevState::T, 4),
            (PrevState::TRACED, 8),
            (PrevState::Z, 16),
            (PrevState::X, 32),
            (PrevState::XDEAD, 64),
            (PrevState::K, 128),
            (PrevState::W, 256),
            (PrevState::P, 512),
            (PrevState::I, 2),
        ];
        match self {
            StateEncoding::Report414 => (REPORT, 0x100),
            StateEncoding::State42 => (STATE42, 2048),
            StateEncoding::State31 => (STATE31, 1024),
        }
    }

    /// The raw number for a normalized state.
    pub fn encode(self, state: PrevState) -> RawPrevState {
        let (table, preempted) = self.table();
        let mut raw = 0i64;
        let mut covered = 0u16;
        for &(bit, value) in table {
            if state.bits() & bit != 0 {
                raw |= value;
                covered |= bit;
            }
        }
        if state.is_preempted() {
            raw |= preempted;
            covered |= PrevState::PREEMPTED;
        }
        RawPrevState {
            raw,
            lossy: covered != state.bits(),
        }
    }
}

/// A raw `prev_state` and whether letters were dropped to make it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawPrevState {
    /// The kernel's number.
    pub raw: i64,
    /// True when the state had a letter this kernel's table cannot express.
    pub lossy: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(e: StateEncoding, s: &str) -> i64 {
        e.encode(PrevState::parse(s).unwrap_or_default()).raw
    }

    #[test]
    fn releases() {
        assert_eq!(
            StateEncoding::for_release("6.18.44-fc-v769"),
            Some(StateEncoding::Report414)
        );
        assert_eq!(
            StateEncoding::for_release("4.14.0"),
            Some(StateEncoding::Report414)
        );
        assert_eq!(
            StateEncoding::for_release("4.4.0-21-generic"),
            Some(StateEncoding::State42)
        );
        assert_eq!(
            StateEncoding::for_release("3.10.0-1160.el7.x86_64"),
            Some(StateEncoding::State31)
        );
        assert_eq!(StateEncoding::for_release("linux"), None);
    }

    #[test]
    fn tables_match_the_kernel_print_fmt() {
        // the 6.18 print fmt table (formats.md §6)
        let e = StateEncoding::Report414;
        for (s, raw) in [
            ("R", 0),
            ("R+", 0x100),
            ("S", 1),
            ("D", 2),
            ("T", 4),
            ("t", 8),
            ("X", 0x10),
            ("Z", 0x20),
            ("P", 0x40),
            ("I", 0x80),
        ] {
            assert_eq!(enc(e, s), raw, "{s}");
        }
        assert!(e.encode(PrevState::parse("D|K").unwrap_or_default()).lossy);
        let old = StateEncoding::State42;
        assert_eq!(enc(old, "D|K"), 130);
        assert_eq!(enc(old, "R+"), 2048);
        assert_eq!(enc(old, "Z"), 16);
        assert_eq!(enc(StateEncoding::State31, "R+"), 1024);
    }
}

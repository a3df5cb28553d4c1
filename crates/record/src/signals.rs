//! SIGINT / SIGTERM / SIGHUP handling: the handler only stores the signal number in an
//! atomic (async-signal-safe); the recording loop polls [`pending`] and stops cleanly, so the
//! instance guard's drop removes the tracefs instance. With `-- COMMAND` the loop forwards
//! signals to the child ([`SignalGuard::take_new`]) and waits for it — except signals the
//! kernel generated for the terminal's whole process group (Ctrl-C: `si_code == SI_KERNEL`),
//! which the child received itself; forwarding those would deliver Ctrl-C twice.
//!
//! Installed without `SA_RESTART`, so blocking calls return `EINTR` and loops re-check the
//! flag. The previous dispositions are restored when [`SignalGuard`] drops.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};

/// Last signal received (0 = none).
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// Number of signals received so far.
static RECEIVED: AtomicU32 = AtomicU32::new(0);
/// True when the last signal came from the kernel (terminal), not from kill(2).
static FROM_KERNEL: AtomicBool = AtomicBool::new(false);

const HANDLED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t (checked for null anyway).
    let from_kernel = !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL;
    FROM_KERNEL.store(from_kernel, Ordering::SeqCst);
    LAST_SIGNAL.store(sig, Ordering::SeqCst);
    RECEIVED.fetch_add(1, Ordering::SeqCst);
}

/// A handler with the SA_SIGINFO signature.
type InfoHandler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// Installed handlers; restores the old ones on drop.
pub struct SignalGuard {
    old: Vec<(libc::c_int, libc::sigaction)>,
    forwarded: u32,
}

impl SignalGuard {
    /// Installs the handlers.
    pub fn install() -> SignalGuard {
        let mut old = Vec::new();
        for sig in HANDLED {
            // SAFETY: sigaction structs are plain data; zeroed is a valid starting value.
            let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
            act.sa_sigaction = on_signal as InfoHandler as usize;
            act.sa_flags = libc::SA_SIGINFO; // no SA_RESTART: interrupted calls return EINTR
                                             // SAFETY: sa_mask is a valid sigset_t inside act.
            unsafe { libc::sigemptyset(&mut act.sa_mask) };
            // SAFETY: as above; prev is written by the kernel.
            let mut prev: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointers to initialized sigaction structs; the handler only
            // touches atomics.
            if unsafe { libc::sigaction(sig, &act, &mut prev) } == 0 {
                old.push((sig, prev));
            }
        }
        SignalGuard { old, forwarded: 0 }
    }

    /// Signals received since install that were not yet returned by this method: the last
    /// signal number and whether the kernel sent it to the whole terminal process group
    /// (`true` for Ctrl-C), when at least one new signal arrived.
    pub fn take_new(&mut self) -> Option<(libc::c_int, bool)> {
        let received = RECEIVED.load(Ordering::SeqCst);
        if received > self.forwarded {
            self.forwarded = received;
            Some((
                LAST_SIGNAL.load(Ordering::SeqCst),
                FROM_KERNEL.load(Ordering::SeqCst),
            ))
        } else {
            None
        }
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restoring a disposition previously returned by the kernel.
            unsafe { libc::sigaction(*sig, prev, std::ptr::null_mut()) };
        }
    }
}

/// The last signal received, if any.
pub fn pending() -> Option<libc::c_int> {
    match LAST_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Name of a handled signal.
pub fn name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

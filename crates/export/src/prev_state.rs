//! Converts our normalized [`PrevState`] back into the raw `sched_switch.prev_state` number
//! the kernel of the input would have written, so that a consumer that decodes raw values
//! by kernel version (Perfetto's trace processor, keyed by `SystemInfo.utsname.release`)
//! shows the same letters we read.
//!
//! Tables (the kernel's `sched_switch` `print fmt`, `include/trace/events/sched.h`, per kernel version):
//!
//! ```text
//! kernel      S  D  T  t  X     Z     P     I     x   K    W    N     preempted (+)
//! >= 4.14     1  2  4  8  0x10  0x20  0x40  0x80  -   -    -    -     0x100
//! 4.8-4.13    1  2  4  8  32    16    512   D|N   64  128  256  1024  4096
//! 4.2-4.7     1  2  4  8  32    16    512   D|N   64  128  256  1024  2048
//! <= 4.1      1  2  4  8  32    16    512   D     64  128  256  -     1024
//! ```
//!
//! Letters a table has no bit for (e.g. `K` on 6.x, or a vendor letter we read as `?`) are
//! dropped; [`RawPrevState::lossy`] says when that happened. `I` on pre-4.14 kernels was
//! `TASK_IDLE = TASK_UNINTERRUPTIBLE | TASK_NOLOAD`, reported as `D|N` (4.2+) or `D`.

use stallscope_model::{KernelStateEncoding, PrevState};

/// Which raw encoding a kernel uses (the model's per-generation tables).
pub use stallscope_model::KernelStateEncoding as StateEncoding;

/// Writes a normalized state as the raw number of a kernel generation.
pub trait EncodePrevState {
    /// The raw number for a normalized state.
    fn encode(self, state: PrevState) -> RawPrevState;
}

impl EncodePrevState for KernelStateEncoding {
    fn encode(self, state: PrevState) -> RawPrevState {
        let mut raw = 0i64;
        let mut covered = 0u16;
        for &(bit, value) in self.letters() {
            if state.bits() & bit != 0 {
                raw |= value as i64;
                covered |= bit;
            }
        }
        // `I` before 4.14 was TASK_IDLE = TASK_UNINTERRUPTIBLE | TASK_NOLOAD, reported as
        // `D|N` (4.2–4.13) or `D` (≤ 4.1).
        if state.bits() & PrevState::I != 0 && self != KernelStateEncoding::Report414 {
            raw |= match self {
                KernelStateEncoding::State42 | KernelStateEncoding::State48 => 2 | 1024,
                _ => 2,
            };
            covered |= PrevState::I;
        }
        if state.is_preempted() {
            raw |= self.preempted_bit() as i64;
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

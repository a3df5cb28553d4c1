//! [`PrevState`]: the state a task was in when it was switched out (`sched_switch.prev_state`),
//! normalized across kernel versions.
//!
//! The raw number means different things on different kernels (see
//! the kernel's `include/trace/events/sched.h`); readers translate it with the trace's own `print fmt`
//! table (or a per-kernel fallback) into these letter bits. Display follows the kernel's own
//! text: `R`, `R+` (preempted while runnable), `S`, `D`, `D|K`, `I`, …

use std::fmt;

/// Normalized switch-out state: a set of state letters plus the "preempted" marker.
/// No letter at all means `R` (runnable).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PrevState(u16);

impl PrevState {
    /// `S` interruptible sleep.
    pub const S: u16 = 1 << 0;
    /// `D` uninterruptible sleep.
    pub const D: u16 = 1 << 1;
    /// `T` stopped.
    pub const T: u16 = 1 << 2;
    /// `t` traced.
    pub const TRACED: u16 = 1 << 3;
    /// `X` dead.
    pub const X: u16 = 1 << 4;
    /// `Z` zombie.
    pub const Z: u16 = 1 << 5;
    /// `P` parked.
    pub const P: u16 = 1 << 6;
    /// `I` idle kernel thread (TASK_IDLE, ≥4.14).
    pub const I: u16 = 1 << 7;
    /// `K` wakekill (≤4.13).
    pub const K: u16 = 1 << 8;
    /// `W` waking (≤4.13).
    pub const W: u16 = 1 << 9;
    /// `N` noload (4.2–4.13).
    pub const N: u16 = 1 << 10;
    /// `x` EXIT_DEAD variant of old kernels.
    pub const XDEAD: u16 = 1 << 11;
    /// A letter this table does not know (vendor kernels).
    pub const UNKNOWN: u16 = 1 << 14;
    /// `+`: the task was preempted (kernel `TASK_REPORT_MAX` / `TASK_STATE_MAX` bit).
    pub const PREEMPTED: u16 = 1 << 15;

    const LETTERS: [(u16, char); 12] = [
        (Self::S, 'S'),
        (Self::D, 'D'),
        (Self::T, 'T'),
        (Self::TRACED, 't'),
        (Self::X, 'X'),
        (Self::Z, 'Z'),
        (Self::P, 'P'),
        (Self::I, 'I'),
        (Self::K, 'K'),
        (Self::W, 'W'),
        (Self::N, 'N'),
        (Self::XDEAD, 'x'),
    ];

    /// `R`: runnable, not marked preempted.
    pub const RUNNING: PrevState = PrevState(0);
    /// `R+`: preempted while runnable.
    pub const RUNNING_PREEMPTED: PrevState = PrevState(Self::PREEMPTED);

    /// From normalized bits.
    pub const fn from_bits(bits: u16) -> PrevState {
        PrevState(bits)
    }

    /// The normalized bits.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// The letter for one normalized bit, e.g. `'D'` for [`PrevState::D`].
    pub fn letter_bit(letter: char) -> Option<u16> {
        Self::LETTERS
            .iter()
            .find(|(_, l)| *l == letter)
            .map(|(b, _)| *b)
    }

    /// True when no sleep/stop/dead letter is set: the task was still runnable (`R` / `R+`).
    pub fn is_runnable(self) -> bool {
        self.0 & !Self::PREEMPTED == 0
    }

    /// True for `R+`.
    pub fn is_preempted(self) -> bool {
        self.0 & Self::PREEMPTED != 0
    }

    /// True for `D` (uninterruptible, perf's "iowait").
    pub fn is_uninterruptible(self) -> bool {
        self.0 & Self::D != 0
    }

    /// True for `X`/`Z`/`x`: the task is exiting.
    pub fn is_dead(self) -> bool {
        self.0 & (Self::X | Self::Z | Self::XDEAD) != 0
    }

    /// Parses the kernel's text form: `R`, `R+`, `S`, `D|K`, `I`, `S+` … Unknown letters set
    /// [`PrevState::UNKNOWN`]; returns `None` for text that is not a state at all.
    pub fn parse(text: &str) -> Option<PrevState> {
        let (body, plus) = match text.strip_suffix('+') {
            Some(b) => (b, true),
            None => (text, false),
        };
        if body.is_empty() {
            return None;
        }
        let mut bits = if plus { Self::PREEMPTED } else { 0 };
        if body != "R" {
            for part in body.split('|') {
                let mut chars = part.chars();
                let (Some(c), None) = (chars.next(), chars.next()) else {
                    return None;
                };
                if !c.is_ascii_alphabetic() {
                    return None;
                }
                bits |= Self::letter_bit(c).unwrap_or(Self::UNKNOWN);
            }
        }
        Some(PrevState(bits))
    }
}

impl fmt::Display for PrevState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(4);
        for (bit, l) in Self::LETTERS {
            if self.0 & bit != 0 {
                if !s.is_empty() {
                    s.push('|');
                }
                s.push(l);
            }
        }
        if self.0 & Self::UNKNOWN != 0 {
            if !s.is_empty() {
                s.push('|');
            }
            s.push('?');
        }
        if s.is_empty() {
            s.push('R');
        }
        if self.is_preempted() {
            s.push('+');
        }
        f.pad(&s)
    }
}

impl fmt::Debug for PrevState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrevState({self})")
    }
}

/// The letters (`S`, `R+`, `D|W`) in human-readable formats (JSON); the bits in binary ones
/// (an analysis' own spill).
impl serde::Serialize for PrevState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match s.is_human_readable() {
            true => s.collect_str(self),
            false => s.serialize_u16(self.0),
        }
    }
}

impl<'de> serde::Deserialize<'de> for PrevState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PrevState, D::Error> {
        if d.is_human_readable() {
            let s: std::borrow::Cow<'de, str> = serde::Deserialize::deserialize(d)?;
            return PrevState::parse(&s)
                .ok_or_else(|| serde::de::Error::custom(format!("not a task state: {s:?}")));
        }
        Ok(PrevState(serde::Deserialize::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_display_round_trip() {
        for t in [
            "R", "R+", "S", "D", "D|K", "I", "X", "Z", "T", "t", "P", "S+",
        ] {
            assert_eq!(
                PrevState::parse(t).map(|s| s.to_string()).as_deref(),
                Some(t),
                "{t}"
            );
        }
        assert!(PrevState::parse("R+").is_some_and(|s| s.is_runnable() && s.is_preempted()));
        assert!(PrevState::parse("R").is_some_and(|s| s.is_runnable() && !s.is_preempted()));
        assert!(PrevState::parse("D").is_some_and(|s| !s.is_runnable()));
        assert_eq!(PrevState::parse(""), None);
        assert_eq!(PrevState::parse("==>"), None);
        assert_eq!(
            PrevState::parse("r").map(|s| s.to_string()).as_deref(),
            Some("?")
        );
    }
}

/// The raw `sched_switch.prev_state` encodings of kernel generations
/// (the kernel's `sched_switch` `print fmt`). Readers use it to decode raw numbers when a trace's
/// `print fmt` gives no table; exporters use it to write the number the input's kernel
/// would have written.
///
/// ```text
/// kernel      S  D  T  t  X     Z     P     I     x   K    W    N     preempted (+)
/// >= 4.14     1  2  4  8  0x10  0x20  0x40  0x80  -   -    -    -     0x100 (4.14.0: 0x1000)
/// 4.8-4.13    1  2  4  8  32    16    512   -     64  128  256  1024  4096 (2048: TASK_NEW)
/// 4.2-4.7     1  2  4  8  32    16    512   -     64  128  256  1024  2048
/// <= 4.1      1  2  4  8  32    16    512   -     64  128  256  -     1024
/// ```
///
/// 4.14 itself wrote `TASK_STATE_MAX` (0x1000) for a preemption, and the index of the
/// state (1…8) instead of its bit, which its print fmt shows with the bit letters
/// (`t` for an idle kthread, `S|T` for a dead task) as every tool does; 4.15 wrote bits
/// and 0x100.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelStateEncoding {
    /// Linux ≥ 4.14: `TASK_REPORT` index bits, preempted = 0x100.
    Report414,
    /// Linux 4.8 – 4.13: task state bits with `N`, preempted = 4096 (`TASK_NEW` = 2048).
    State48,
    /// Linux 4.2 – 4.7: task state bits with `N`, preempted = 2048.
    State42,
    /// Linux ≤ 4.1: task state bits, preempted = 1024.
    State31,
}

impl KernelStateEncoding {
    /// The encoding for a kernel release string (`6.18.44-fc-v769`, `4.4.0-21-generic`);
    /// `None` when the release does not start with `MAJOR.MINOR`.
    pub fn for_release(release: &str) -> Option<KernelStateEncoding> {
        let mut parts = release.split(['.', '-']);
        let major: u32 = parts.next()?.parse().ok()?;
        let minor_text: String = parts
            .next()?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let minor: u32 = minor_text.parse().ok()?;
        Some(if (major, minor) >= (4, 14) {
            KernelStateEncoding::Report414
        } else if (major, minor) >= (4, 8) {
            KernelStateEncoding::State48
        } else if (major, minor) >= (4, 2) {
            KernelStateEncoding::State42
        } else {
            KernelStateEncoding::State31
        })
    }

    /// `(normalized letter bit, raw value)` pairs of this encoding.
    pub fn letters(self) -> &'static [(u16, u64)] {
        const REPORT: &[(u16, u64)] = &[
            (PrevState::S, 0x01),
            (PrevState::D, 0x02),
            (PrevState::T, 0x04),
            (PrevState::TRACED, 0x08),
            (PrevState::X, 0x10),
            (PrevState::Z, 0x20),
            (PrevState::P, 0x40),
            (PrevState::I, 0x80),
        ];
        const STATE42: &[(u16, u64)] = &[
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
        ];
        match self {
            KernelStateEncoding::Report414 => REPORT,
            KernelStateEncoding::State42 | KernelStateEncoding::State48 => STATE42,
            // The same bits without N.
            KernelStateEncoding::State31 => &STATE42[..10],
        }
    }

    /// Mask of the state bits (`prev_state & mask` = the letters).
    pub fn state_mask(self) -> u64 {
        match self {
            KernelStateEncoding::Report414 => 0xff,
            KernelStateEncoding::State48 => 4095,
            KernelStateEncoding::State42 => 2047,
            KernelStateEncoding::State31 => 1023,
        }
    }

    /// The "preempted" (`+`) bit.
    pub fn preempted_bit(self) -> u64 {
        match self {
            KernelStateEncoding::Report414 => 0x100,
            KernelStateEncoding::State48 => 4096,
            KernelStateEncoding::State42 => 2048,
            KernelStateEncoding::State31 => 1024,
        }
    }
}

#[cfg(test)]
mod encoding_tests {
    use super::*;

    #[test]
    fn releases_pick_their_generation() {
        use KernelStateEncoding::*;
        assert_eq!(
            KernelStateEncoding::for_release("6.18.44-fc-v769"),
            Some(Report414)
        );
        assert_eq!(KernelStateEncoding::for_release("4.14.0"), Some(Report414));
        assert_eq!(
            KernelStateEncoding::for_release("4.9.0-8-amd64"),
            Some(State48)
        );
        assert_eq!(
            KernelStateEncoding::for_release("4.4.0-21-generic"),
            Some(State42)
        );
        assert_eq!(State48.preempted_bit(), 4096);
        assert_eq!(
            KernelStateEncoding::for_release("3.10.0-1160.el7"),
            Some(State31)
        );
        assert_eq!(KernelStateEncoding::for_release("linux"), None);
        assert_eq!(State31.letters().len(), 10);
        assert!(State31
            .letters()
            .iter()
            .all(|&(_, v)| v & !State31.state_mask() == 0));
        assert!(State42
            .letters()
            .iter()
            .all(|&(_, v)| v & !State42.state_mask() == 0));
    }
}

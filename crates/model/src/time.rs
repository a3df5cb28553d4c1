//! Timestamps and durations: integer nanoseconds in the trace's clock domain.
//!
//! Text formats print `secs.usecs` (µs resolution) or `secs.nsecs`; helpers here parse and
//! print those without ever going through floating point.

/// A point in time, nanoseconds in the trace's clock (usually `local_clock`, i.e. since boot).
pub type Ts = u64;
/// A duration in nanoseconds.
pub type Dur = u64;

/// `481.124195` (µs, truncated like perf's `%lu.%06lu` of ns/1000).
pub fn fmt_secs_usecs(ts: Ts) -> String {
    format!("{}.{:06}", ts / 1_000_000_000, (ts % 1_000_000_000) / 1000)
}

/// `481.124195282`.
pub fn fmt_secs_nsecs(ts: Ts) -> String {
    format!("{}.{:09}", ts / 1_000_000_000, ts % 1_000_000_000)
}

/// Parses `SECS.FRAC` where FRAC has 1 to 9 digits (µs or ns text) into nanoseconds.
/// Returns `None` for anything else (signs, exponents, empty parts, overflow).
pub fn parse_secs_frac(s: &[u8]) -> Option<Ts> {
    let dot = s.iter().position(|&b| b == b'.')?;
    let (int, frac) = (&s[..dot], &s[dot + 1..]);
    if int.is_empty() || frac.is_empty() || frac.len() > 9 {
        return None;
    }
    let secs = parse_u64(int)?;
    let mut f = parse_u64(frac)?;
    for _ in frac.len()..9 {
        f *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(f)
}

/// Parses an unsigned decimal integer; `None` on empty input, non-digits or overflow.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

/// Milliseconds with three decimals, rounded like C's `%.3f` on `ns / 1e6` (perf's tables).
pub fn fmt_msecs3(ns: Dur) -> String {
    // round half away from zero at the µs digit, integer only
    let us = (ns + 500) / 1000;
    format!("{}.{:03}", us / 1000, us % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_usecs_and_nsecs() {
        assert_eq!(parse_secs_frac(b"481.124195"), Some(481_124_195_000));
        assert_eq!(parse_secs_frac(b"481.124195282"), Some(481_124_195_282));
        assert_eq!(parse_secs_frac(b"0.5"), Some(500_000_000));
        assert_eq!(parse_secs_frac(b"481."), None);
        assert_eq!(parse_secs_frac(b".5"), None);
        assert_eq!(parse_secs_frac(b"1.1234567890"), None);
        assert_eq!(parse_secs_frac(b"1e3.0"), None);
    }

    #[test]
    fn formats_round_trip() {
        assert_eq!(fmt_secs_usecs(481_124_195_282), "481.124195");
        assert_eq!(fmt_secs_nsecs(481_124_195_282), "481.124195282");
        assert_eq!(fmt_msecs3(3_042_499), "3.042");
        assert_eq!(fmt_msecs3(3_042_500), "3.043");
        assert_eq!(fmt_msecs3(0), "0.000");
    }
}

//! Formatting of measured values in titles and hints (integer arithmetic only).

use stallscope_model::Dur;

/// `98.766 ms`, `412 µs`, `1.204 s`: three significant decimals, rounded half up.
pub fn dur(ns: Dur) -> String {
    if ns >= 1_000_000_000 {
        let ms = (ns + 500_000) / 1_000_000;
        format!("{}.{:03} s", ms / 1000, ms % 1000)
    } else if ns >= 1_000_000 {
        let us = (ns + 500) / 1000;
        format!("{}.{:03} ms", us / 1000, us % 1000)
    } else if ns >= 1000 {
        format!("{} µs", (ns + 500) / 1000)
    } else {
        format!("{ns} ns")
    }
}

/// `12.5%` from a permille value.
pub fn permille(p: u64) -> String {
    format!("{}.{}%", p / 10, p % 10)
}

/// `a * 1000 / b`, 0 when `b` is 0.
pub fn ratio_permille(a: u64, b: u64) -> u64 {
    a.saturating_mul(1000).checked_div(b).unwrap_or(0)
}

/// Saturating conversion for measures.
pub fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(dur(98_766_000), "98.766 ms");
        assert_eq!(dur(98_766_500), "98.767 ms");
        assert_eq!(dur(412_400), "412 µs");
        assert_eq!(dur(1_204_400_000), "1.204 s");
        assert_eq!(dur(7), "7 ns");
        assert_eq!(permille(125), "12.5%");
        assert_eq!(ratio_permille(1, 0), 0);
    }
}

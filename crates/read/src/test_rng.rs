//! [`XorShift`]: a small seeded pseudo-random generator (xorshift64) for the readers'
//! robustness and equivalence tests, unit and integration alike: a fixed seed, so every run
//! draws the same sequence. Not for anything but tests.

/// Marsaglia's xorshift64 (shifts 13, 7, 17) from a fixed seed.
#[doc(hidden)]
pub struct XorShift(u64);

impl Default for XorShift {
    fn default() -> Self {
        XorShift(0x2545_f491_4f6c_dd1d)
    }
}

impl XorShift {
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::XorShift;

    #[test]
    fn the_sequence_is_fixed_and_not_constant() {
        let (mut a, mut b) = (XorShift::default(), XorShift::default());
        let xs: Vec<u64> = (0..100).map(|_| a.next_u64()).collect();
        assert!(xs.iter().all(|&x| x == b.next_u64()));
        let distinct: std::collections::HashSet<_> = xs.iter().collect();
        assert_eq!(distinct.len(), 100);
    }
}

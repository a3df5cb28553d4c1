//! [`prefetch`]: a cache hint for data the reader will touch soon (the next records of a
//! mapped file, the next entries of a batch written by another core). A hint only: it never
//! faults, reads nothing architecturally, and is a no-op outside x86_64 or past the end of
//! the slice.

/// Asks the CPU to start loading the cache line holding `data[at]`.
#[inline(always)]
pub fn prefetch<T>(data: &[T], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = data.get(at) {
        // SAFETY: a prefetch hint never faults and reads nothing architecturally; the
        // address is inside `data`, and SSE is part of the x86_64 baseline.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (x as *const T).cast::<i8>(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, at);
}

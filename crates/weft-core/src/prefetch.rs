//! Software prefetch hints for memory-bound loops (graph builders and searches that read rows in
//! no useful order).

/// Hints the CPU to start loading the `bytes` bytes at `ptr` into the cache, one 64-byte line
/// at a time (a no-op off x86-64). Never faults, whatever the address.
#[inline(always)]
pub fn prefetch_bytes(ptr: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let mut off = 0;
        while off < bytes {
            // SAFETY: prefetch is a hint that never faults, even on an invalid address; SSE is
            // part of the x86_64 baseline. `wrapping_add` keeps the pointer arithmetic defined.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(ptr.wrapping_add(off).cast::<i8>()) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (ptr, bytes);
    }
}

/// Hints the CPU to start loading `v` into the cache ([`prefetch_bytes`] over its bytes).
#[inline(always)]
pub fn prefetch_slice<T>(v: &[T]) {
    prefetch_bytes(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v));
}

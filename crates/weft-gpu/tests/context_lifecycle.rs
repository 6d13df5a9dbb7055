//! Contexts made, dropped and made again on one device, from one thread and from several: the
//! lifecycles a Python session goes through (`gpu_info()`, a build, a search, each probing and
//! dropping its own context), which once failed with `CUDA_ERROR_INVALID_CONTEXT` at the first
//! search after a build. Each test skips itself visibly without a GPU and fails instead under
//! `WEFT_REQUIRE_GPU=1`.

use weft_core::rng::{hash3, mix64};
use weft_gpu::GpuContext;
use weft_gpu::context::PINNED_TRANSFER_THRESHOLD;
use weft_gpu::testing::{gpu_or_skip, rng_on_device};

/// Uses `ctx` the way a build or a search does: memory query, a small and a staged (pinned)
/// round trip, and a kernel launch (weft-gpu's own `testing_rng_u64`, checked against
/// weft-core's generators).
fn exercise(ctx: &GpuContext, seed: u64) {
    let (free, total) = ctx.memory().expect("cuMemGetInfo");
    assert!(free <= total);
    let small: Vec<u32> = (0..1000).map(|i| i ^ seed as u32).collect();
    let buf = ctx.upload(&small).expect("upload");
    assert_eq!(ctx.download(&buf, small.len()).expect("download"), small);
    // Over the pinned-transfer threshold: through the context's pinned staging buffers.
    let big: Vec<u8> = (0..PINNED_TRANSFER_THRESHOLD * 2 + 17)
        .map(|i| (i as u64 ^ seed) as u8)
        .collect();
    let buf = ctx.upload(&big).expect("staged upload");
    assert_eq!(ctx.download(&buf, big.len()).expect("staged download"), big);
    let got = rng_on_device(ctx, seed, 300, 1000).expect("a kernel launch");
    for i in 0..300u64 {
        assert_eq!(got[3 * i as usize], mix64(i ^ seed), "mix64 at {i}");
        assert_eq!(
            got[3 * i as usize + 1],
            hash3(seed, i, 7 * i + 3),
            "hash3 at {i}"
        );
    }
}

/// Every context of the device dropped, then a new one made: the device's primary context is
/// released to nothing and retained again, and the new context works on this thread.
#[test]
fn a_context_made_after_every_other_was_dropped_works() {
    for round in 0..4u64 {
        let Some(ctx) = gpu_or_skip("a_context_made_after_every_other_was_dropped_works") else {
            return;
        };
        exercise(&ctx, round);
        drop(ctx);
    }
}

/// Two contexts alive at once, dropped in either order, with a third made after each drop.
#[test]
fn overlapping_contexts_work_in_any_order() {
    let Some(a) = gpu_or_skip("overlapping_contexts_work_in_any_order") else {
        return;
    };
    let b = weft_gpu::probe().expect("a second context");
    exercise(&a, 1);
    exercise(&b, 2);
    drop(a);
    exercise(&b, 3);
    let c = weft_gpu::probe().expect("a third context");
    drop(b);
    exercise(&c, 4);
    drop(c);
    let d = weft_gpu::probe().expect("a context after all were dropped");
    exercise(&d, 5);
}

/// A thread that used a context, all of whose contexts were then dropped, uses a new context:
/// the thread's binding to the released context must not be taken for a binding to the new one.
#[test]
fn a_thread_bound_to_a_released_context_uses_a_new_one() {
    let Some(first) = gpu_or_skip("a_thread_bound_to_a_released_context_uses_a_new_one") else {
        return;
    };
    let worker = std::thread::spawn(move || {
        exercise(&first, 10);
        drop(first);
        let again = weft_gpu::probe().expect("a context on the worker");
        exercise(&again, 11);
        again
    });
    let from_worker = worker.join().expect("worker");
    // Used from this thread, made on another.
    exercise(&from_worker, 12);
    drop(from_worker);
    let here = weft_gpu::probe().expect("a context here");
    exercise(&here, 13);
    // And a context made here, used on a new thread after this one's contexts were dropped.
    std::thread::spawn(move || exercise(&here, 14))
        .join()
        .expect("second worker");
}

/// Once every context of the device is dropped, the thread that used them can still call the
/// driver: weft keeps the device's primary context for the process. Without that hold, the
/// last drop destroyed it while this thread stayed bound to it, and the driver answered
/// `CUDA_ERROR_CONTEXT_IS_DESTROYED` (measured on an H200, driver 580). Run with
/// `--test-threads=1` (as the device pack's sanitizer passes do) for the case where no other
/// test holds a context meanwhile.
#[test]
fn the_primary_context_outlives_every_context() {
    let Some(ctx) = gpu_or_skip("the_primary_context_outlives_every_context") else {
        return;
    };
    exercise(&ctx, 20);
    drop(ctx);
    // This thread is still bound to the device's primary context: it must be alive.
    let info = cudarc::driver::result::mem_get_info();
    assert!(info.is_ok(), "after the last context was dropped: {info:?}");
}

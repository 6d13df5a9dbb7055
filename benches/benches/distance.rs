//! CPU distance kernels against the single-core FMA peak.
//!
//! Throughput is reported in FMA lanes per second ("elements"): the peak loop counts one per
//! vector lane per FMA; a distance kernel counts one per dimension (each dimension costs one FMA,
//! plus a subtraction for L2 that is not counted, so the ratio understates the kernel).
//! The distance inputs are 64 vector pairs that stay in L1, so memory does not bound them.
//! `cargo xtask bench --suite kernels` turns the criterion estimates into the ratio in
//! docs/benchmarks.md.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use half::f16;
use weft_benches::{data::random_rows, fma_peak};
use weft_core::{Element, Metric};

const PAIRS: usize = 64;

fn bench_peak(c: &mut Criterion) {
    let iters = 10_000u64;
    let mut g = c.benchmark_group("fma_peak");
    g.throughput(Throughput::Elements(
        iters * fma_peak::lanes_per_iteration(),
    ));
    g.bench_function(format!("width{}", fma_peak::width()), |b| {
        b.iter(|| fma_peak::run(black_box(iters)))
    });
    g.finish();
}

fn bench_metric<T: Element>(c: &mut Criterion, metric: Metric, dims: &[usize]) {
    let mut g = c.benchmark_group(format!("distance_{}_{}", metric.name(), T::DTYPE.name()));
    let f = metric.distance_fn::<T>();
    for &dim in dims {
        let a = random_rows::<T>(PAIRS, dim, 1);
        let b = random_rows::<T>(PAIRS, dim, 2);
        g.throughput(Throughput::Elements((PAIRS * dim) as u64));
        g.bench_function(format!("d{dim}"), |bench| {
            bench.iter(|| {
                let mut s = 0.0f32;
                for (x, y) in a.chunks_exact(dim).zip(b.chunks_exact(dim)) {
                    s += f.eval(black_box(x), black_box(y));
                }
                s
            })
        });
    }
    g.finish();
}

/// One query against 64 rows through [`weft_core::distance::DistanceFn::eval_rows`]: the
/// one-to-many form that searches and brute force use.
fn bench_many<T: Element>(c: &mut Criterion, metric: Metric, dims: &[usize]) {
    let mut g = c.benchmark_group(format!(
        "distance_many_{}_{}",
        metric.name(),
        T::DTYPE.name()
    ));
    let f = metric.distance_fn::<T>();
    for &dim in dims {
        let q = random_rows::<T>(1, dim, 1);
        let rows = random_rows::<T>(PAIRS, dim, 2);
        let view = weft_core::DatasetView::new(&rows, PAIRS, dim).expect("shape");
        let mut out = vec![0f32; PAIRS];
        g.throughput(Throughput::Elements((PAIRS * dim) as u64));
        g.bench_function(format!("d{dim}"), |bench| {
            bench.iter(|| {
                f.eval_rows(black_box(&q), black_box(view), &mut out);
                out[0]
            })
        });
    }
    g.finish();
}

fn bench_distances(c: &mut Criterion) {
    bench_many::<f32>(c, Metric::L2Squared, &[96, 128, 960]);
    bench_many::<f32>(c, Metric::InnerProduct, &[128]);
    let dims = [96, 128, 960];
    for metric in Metric::ALL {
        bench_metric::<f32>(c, metric, &dims);
    }
    bench_metric::<f16>(c, Metric::L2Squared, &dims);
    bench_metric::<u8>(c, Metric::L2Squared, &dims);
    bench_metric::<i8>(c, Metric::InnerProduct, &dims);
}

criterion_group!(benches, bench_peak, bench_distances);
criterion_main!(benches);

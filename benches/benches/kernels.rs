//! Hot-kernel micro-benchmarks beyond `distance.rs`:
//!
//! - `dist_rows/<metric>_<dtype>/d128`: one query against 256 rows
//!   ([`weft_core::distance::DistanceFn::eval_rows`]) for every metric x element type;
//!   throughput in dimensions (one multiply-add each);
//! - `topk_select/k<k>`: [`weft_exact::exact_search`] of one query against 65,536 rows of
//!   dimension 2, where the distances are nearly free and the bounded top-k selection dominates;
//!   throughput in candidates;
//! - `beam_step/one_hop` and `beam_search/l<L>`: [`weft_search::BeamSearch`] on a random
//!   32-regular graph over 50,000 x 128 f32 rows: one expansion (entry point plus one hop,
//!   `max_hops = 1`) and a whole query at beam width L; throughput in queries;
//! - `gpu_exact/…` (with a GPU only): [`weft::exact::ExactGpu::search_device`] on device-resident
//!   sets, timed with `iter_custom` and a device synchronisation after each call. Without a GPU
//!   the group prints `SKIPPED` and measures nothing.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use half::f16;
use weft_benches::data::random_rows;
use weft_core::{BuildCtx, DatasetView, Element, FixedDegreeGraph, Metric, Neighbors, Searcher};
use weft_search::{BeamSearch, BeamSearchParams, BeamSearchTuning};

fn dist_rows<T: Element>(c: &mut Criterion) {
    const ROWS: usize = 256;
    let dim = 128;
    let q = random_rows::<T>(1, dim, 1);
    let rows = random_rows::<T>(ROWS, dim, 2);
    let view = DatasetView::new(&rows, ROWS, dim).expect("shape");
    let mut out = vec![0f32; ROWS];
    for metric in Metric::ALL {
        let f = metric.distance_fn::<T>();
        let mut g = c.benchmark_group(format!("dist_rows/{}_{}", metric.name(), T::DTYPE.name()));
        g.throughput(Throughput::Elements((ROWS * dim) as u64));
        g.bench_function(format!("d{dim}"), |b| {
            b.iter(|| {
                f.eval_rows(black_box(&q), black_box(view), &mut out);
                out[0]
            })
        });
        g.finish();
    }
}

fn distances(c: &mut Criterion) {
    dist_rows::<f32>(c);
    dist_rows::<f16>(c);
    dist_rows::<u8>(c);
    dist_rows::<i8>(c);
}

fn topk(c: &mut Criterion) {
    const ROWS: usize = 65_536;
    let base = random_rows::<f32>(ROWS, 2, 3);
    let base = DatasetView::new(&base, ROWS, 2).expect("shape");
    let q = random_rows::<f32>(1, 2, 4);
    let q = DatasetView::new(&q, 1, 2).expect("shape");
    let ctx = BuildCtx::new(0).with_threads(Some(1));
    let mut g = c.benchmark_group("topk_select");
    g.throughput(Throughput::Elements(ROWS as u64));
    for k in [10usize, 100] {
        g.bench_function(format!("k{k}"), |b| {
            b.iter(|| {
                ctx.install(|| {
                    weft_exact::exact_search(base, q, Metric::L2Squared, k, &ctx).expect("search")
                })
                .expect("pool")
            })
        });
    }
    g.finish();
}

fn beam(c: &mut Criterion) {
    const N: usize = 50_000;
    const DEG: usize = 32;
    let dim = 128;
    let data = random_rows::<f32>(N, dim, 5);
    let data = DatasetView::new(&data, N, dim).expect("shape");
    let mut r = weft_core::rng::SplitMix64::new(9);
    let ids: Vec<u32> = (0..N * DEG)
        .map(|_| (r.next_u64() % N as u64) as u32)
        .collect();
    let graph = FixedDegreeGraph::new(N, DEG, ids).expect("graph");
    let queries = random_rows::<f32>(64, dim, 6);
    let queries = DatasetView::new(&queries, 64, dim).expect("shape");
    let ctx = BuildCtx::new(0).with_threads(Some(1));
    let mut qi = 0usize;
    let mut run = |b: &mut criterion::Bencher<'_>, params: &BeamSearchParams, k: usize| {
        let mut out = Neighbors::new(1, k);
        b.iter(|| {
            qi = (qi + 1) % queries.rows();
            let q = queries.slice_rows(qi..qi + 1).expect("row");
            ctx.install(|| {
                BeamSearch
                    .search(&graph, data, q, Metric::L2Squared, params, out.as_mut())
                    .expect("search")
            })
            .expect("pool")
        })
    };
    let mut g = c.benchmark_group("beam_step");
    g.throughput(Throughput::Elements(1));
    let one_hop = BeamSearchParams {
        tuning: BeamSearchTuning {
            max_hops: Some(1),
            ..BeamSearchTuning::default()
        },
        ..BeamSearchParams::with_beam_width(32)
    };
    g.bench_function("one_hop", |b| run(b, &one_hop, 10));
    g.finish();
    let mut g = c.benchmark_group("beam_search");
    g.throughput(Throughput::Elements(1));
    for l in [32usize, 128] {
        g.bench_function(format!("l{l}"), |b| {
            run(b, &BeamSearchParams::with_beam_width(l), 10)
        });
    }
    g.finish();
}

#[cfg(feature = "cuda")]
fn gpu(c: &mut Criterion) {
    use weft::exact::ExactGpu;
    use weft::gpu::DeviceMatrix;
    let ctx = match weft::gpu::probe() {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("gpu_exact: SKIPPED, no GPU ({e})");
            return;
        }
    };
    let (n, nq, dim) = (100_000usize, 1_000usize, 128usize);
    let base = random_rows::<f32>(n, dim, 7);
    let queries = random_rows::<f32>(nq, dim, 8);
    let db = DeviceMatrix::upload(&ctx, DatasetView::new(&base, n, dim).expect("shape"))
        .expect("upload");
    let dq = DeviceMatrix::upload(&ctx, DatasetView::new(&queries, nq, dim).expect("shape"))
        .expect("upload");
    let exact = ExactGpu::new(&ctx);
    // Kernel compilation / loading happens here, outside the timing.
    exact
        .search_device(&db, &dq, Metric::L2Squared, 10)
        .expect("warm-up");
    let mut g = c.benchmark_group(format!("gpu_exact/{}", ctx.info().name.replace(' ', "_")));
    g.throughput(Throughput::Elements((n * nq) as u64));
    for k in [10usize, 100] {
        g.bench_function(format!("search_device_100k_x_1k_d128_k{k}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    ctx.synchronize().expect("sync");
                    let t = Instant::now();
                    let out = exact
                        .search_device(&db, &dq, Metric::L2Squared, k)
                        .expect("search");
                    ctx.synchronize().expect("sync");
                    total += t.elapsed();
                    black_box(out);
                }
                total
            })
        });
    }
    g.finish();
}

#[cfg(not(feature = "cuda"))]
fn gpu(_: &mut Criterion) {
    eprintln!("gpu_exact: SKIPPED, built without the `cuda` feature");
}

criterion_group!(benches, distances, topk, beam, gpu);
criterion_main!(benches);

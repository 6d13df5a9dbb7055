//! A search session: [`CagraSearchBuffers`] kept across calls of different batch sizes give the
//! same results as one-shot searches, and a steady state allocates no device memory.

#![cfg(feature = "cuda")]

use weft_cagra::gpu::CagraOptimizer;
use weft_core::{BuildCtx, Dataset, INVALID, Metric, Neighbors};
use weft_exact::ExactGpu;
use weft_gpu::testing::gpu_or_skip;
use weft_gpu::{DeviceKnnGraph, DeviceMatrix};
use weft_search::gpu::DeviceSearchInputs;
use weft_search::gpu::cagra::{
    CagraSearchBuffers, CagraSearchDevice, CagraSearchMode, CagraSearchParams, CagraSearchSession,
    CagraSearchTuning,
};

fn cfg(beam_width: usize, mode: CagraSearchMode) -> CagraSearchParams {
    CagraSearchParams {
        beam_width,
        tuning: CagraSearchTuning {
            mode,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// One call: batch, k, parameters, filter, entry points.
type Call<'a> = (
    usize,
    usize,
    &'a CagraSearchParams,
    Option<&'a [u32]>,
    &'a [u32],
);

#[test]
fn cagra_search_session_reuses_buffers() {
    let Some(ctx) = gpu_or_skip("cagra_search_session_reuses_buffers") else {
        return;
    };
    let (n, dim) = (4000, 24);
    let mut rng = weft_core::rng::SplitMix64::new(11);
    let mut vals = |rows: usize| {
        let v: Vec<f32> = (0..rows * dim)
            .map(|_| rng.next_gaussian() as f32)
            .collect();
        Dataset::from_vec(v, rows, dim).unwrap()
    };
    let base = vals(n);
    let queries = vals(500);
    let exact = ExactGpu::new(&ctx);
    let knn = exact
        .knn_graph(base.view(), Metric::L2Squared, 32, &BuildCtx::new(1))
        .unwrap();
    let dknn = DeviceKnnGraph::upload(&ctx, &knn).unwrap();
    let graph = CagraOptimizer::new(&ctx)
        .optimize_device(&dknn, 16)
        .unwrap();
    let d = DeviceMatrix::upload(&ctx, base.view()).unwrap();
    let dev = CagraSearchDevice::new(&ctx);
    let mut filter = vec![0u32; n.div_ceil(32)];
    for i in (0..n).filter(|i| i % 3 != 0) {
        filter[i / 32] |= 1 << (i % 32);
    }

    // Single-CTA is deterministic and batch-independent: the ids must match exactly.
    let mut bufs = CagraSearchBuffers::new();
    let single = cfg(64, CagraSearchMode::SingleCta);
    let big = cfg(1024, CagraSearchMode::SingleCta); // with a filter: global per-block tables
    // The last two calls change the entry points to others of the same length and back: the
    // buffers keep the last ones copied and copy again only when they differ.
    let calls: [Call<'_>; 7] = [
        (300, 10, &single, None, &[0]),
        (70, 10, &single, None, &[]),
        (500, 16, &single, Some(&filter[..]), &[1, 2]),
        (40, 10, &big, Some(&filter[..]), &[]),
        (300, 10, &single, None, &[0]),
        (300, 10, &single, None, &[7]),
        (300, 10, &single, None, &[0]),
    ];
    let mut allocs_after = Vec::new();
    for (i, &(nq, k, c, f, entries)) in calls.iter().enumerate() {
        let qs = Dataset::from_vec(queries.as_slice()[..nq * dim].to_vec(), nq, dim).unwrap();
        let q = DeviceMatrix::upload(&ctx, qs.view()).unwrap();
        let c = &CagraSearchParams {
            filter: f.map(|f| f.to_vec()),
            ..c.clone()
        };
        let mut got = Neighbors::new(nq, k);
        let inputs = DeviceSearchInputs {
            data: &d,
            graph: &graph,
            entries,
            queries: &q,
        };
        let stats = dev
            .search_device_with(&mut bufs, inputs, Metric::L2Squared, c, got.as_mut())
            .unwrap();
        let (want, want_stats) = dev.search_device(inputs, Metric::L2Squared, k, c).unwrap();
        assert_eq!(
            got.ids, want.ids,
            "call {i}: ids differ from a one-shot search"
        );
        assert_eq!(got.dists, want.dists, "call {i}");
        assert_eq!(stats, want_stats, "call {i}: counters are reset per call");
        if let Some(f) = f {
            for &x in &got.ids {
                assert!(x == INVALID || f[x as usize / 32] >> (x % 32) & 1 == 1);
            }
        }
        allocs_after.push(bufs.allocations());
        println!(
            "call {i}: batch {nq}, k {k}: {} allocations, {} bytes held",
            bufs.allocations(),
            bufs.bytes()
        );
    }
    // The last call repeats the first: nothing new to allocate.
    assert_eq!(allocs_after[4], allocs_after[3]);
    // A smaller unfiltered call after a larger one allocates nothing either.
    assert!(allocs_after[0] > 0);
    assert_eq!(allocs_after[1], allocs_after[0]);

    // Multi-CTA (timing-dependent): valid, sorted results of good recall at two batch sizes.
    let multi = cfg(64, CagraSearchMode::MultiCta);
    let truth = exact
        .search(base.view(), queries.view(), Metric::L2Squared, 10)
        .unwrap();
    let mut mbufs = CagraSearchBuffers::new();
    for (round, nq) in [(0, 16usize), (1, 5), (2, 16)] {
        let qs = Dataset::from_vec(queries.as_slice()[..nq * dim].to_vec(), nq, dim).unwrap();
        let q = DeviceMatrix::upload(&ctx, qs.view()).unwrap();
        let before = mbufs.allocations();
        let mut got = Neighbors::new(nq, 10);
        let inputs = DeviceSearchInputs {
            data: &d,
            graph: &graph,
            entries: &[],
            queries: &q,
        };
        dev.search_device_with(&mut mbufs, inputs, Metric::L2Squared, &multi, got.as_mut())
            .unwrap();
        if round > 0 {
            assert_eq!(
                mbufs.allocations(),
                before,
                "batch {nq}: a steady state allocates"
            );
        }
        let mut hits = 0;
        for r in 0..nq {
            let ids = got.row_ids(r);
            assert!(ids.iter().all(|&x| x != INVALID && (x as usize) < n));
            assert!(got.row_dists(r).windows(2).all(|w| w[0] <= w[1]));
            hits += ids.iter().filter(|x| truth.row_ids(r).contains(x)).count();
        }
        let recall = hits as f64 / (nq * 10) as f64;
        assert!(recall >= 0.9, "multi-CTA batch {nq}: recall {recall}");
    }
}

#[test]
fn cagra_search_session_is_send() {
    fn send<T: Send>() {}
    send::<CagraSearchSession<f32>>();
    send::<CagraSearchBuffers>();
}

#[test]
fn cagra_search_session_host_queries_match_one_shot() {
    let Some(ctx) = gpu_or_skip("cagra_search_session_host_queries_match_one_shot") else {
        return;
    };
    let (n, dim) = (3000, 16);
    let mut rng = weft_core::rng::SplitMix64::new(5);
    let mut vals = |rows: usize| {
        let v: Vec<f32> = (0..rows * dim)
            .map(|_| rng.next_gaussian() as f32)
            .collect();
        Dataset::from_vec(v, rows, dim).unwrap()
    };
    let base = vals(n);
    let queries = vals(400);
    let knn = ExactGpu::new(&ctx)
        .knn_graph(base.view(), Metric::L2Squared, 24, &BuildCtx::new(1))
        .unwrap();
    let graph = CagraOptimizer::new(&ctx)
        .optimize_device(&DeviceKnnGraph::upload(&ctx, &knn).unwrap(), 16)
        .unwrap()
        .download(&ctx)
        .unwrap();
    let one_shot = |qs: &Dataset<f32>| {
        CagraSearchDevice::new(&ctx)
            .search(
                base.view(),
                &graph,
                qs.view(),
                Metric::L2Squared,
                10,
                &cfg(32, CagraSearchMode::SingleCta),
            )
            .unwrap()
    };
    let session_ctx = weft_gpu::probe().unwrap();
    let mut session = CagraSearchSession::new(session_ctx, base.view(), &graph).unwrap();
    let mut allocs = Vec::new();
    for nq in [250usize, 60, 400, 1, 400] {
        let qs = Dataset::from_vec(queries.as_slice()[..nq * dim].to_vec(), nq, dim).unwrap();
        let (got, _) = session
            .search(
                qs.view(),
                Metric::L2Squared,
                10,
                &cfg(32, CagraSearchMode::SingleCta),
            )
            .unwrap();
        let (want, _) = one_shot(&qs);
        assert_eq!(got.ids, want.ids, "batch {nq}");
        allocs.push(session.buffers().allocations());
    }
    assert_eq!(allocs[1], allocs[0], "a smaller batch allocates nothing");
    assert_eq!(allocs[4], allocs[2], "a repeated batch allocates nothing");
    // Errors are typed and leave the session usable.
    let bad = Dataset::from_vec(vec![0.0f32; 3 * (dim + 1)], 3, dim + 1).unwrap();
    assert!(
        session
            .search(
                bad.view(),
                Metric::L2Squared,
                10,
                &cfg(32, CagraSearchMode::Auto),
            )
            .is_err()
    );
}

//! `ShardedIndex`: contiguous shards with graphs of their own, every query searched in every
//! shard, the answers merged exactly with global ids. Exact searches through the shards equal
//! the exact search of the whole set (ids, distances and tie order); graph searches find the
//! neighbours on clustered data; a filter over the global ids reaches every shard; bad shard
//! counts, shards that disagree and devices named twice are typed errors. On a GPU machine
//! (`WEFT_REQUIRE_GPU=1` there) the shards build and search on device 0, and the result equals
//! the shards searched one after another.

use weft::io::Preset;
use weft::{Algorithm, Backend, Dataset, Error, Filter, Index, Metric, SearchParams, ShardedIndex};

fn clustered(n: usize, q: usize, seed: u64) -> (Dataset<f32>, Dataset<f32>) {
    let g = Preset::Clustered.generator(seed).unwrap();
    (g.base(n).unwrap(), g.queries(q).unwrap())
}

fn cpu_builder(algorithm: Algorithm) -> weft::IndexBuilder {
    Index::builder(algorithm).backend(Backend::Cpu).seed(5)
}

/// Recall@k of `found` against `truth` (ids only).
fn recall(found: &weft::Neighbors, truth: &weft::Neighbors, k: usize) -> f64 {
    let mut hits = 0;
    for q in 0..found.rows() {
        let want = &truth.row_ids(q)[..k];
        hits += found.row_ids(q).iter().filter(|i| want.contains(i)).count();
    }
    hits as f64 / (found.rows() * k) as f64
}

#[test]
fn exact_search_through_shards_equals_the_whole_set() {
    let (base, queries) = clustered(2_003, 40, 1);
    let whole = cpu_builder(Algorithm::RnnDescent(Default::default()))
        .build(base.clone())
        .unwrap();
    let truth = whole
        .search(
            queries.view(),
            15,
            &SearchParams::exact().with_backend(Backend::Cpu),
        )
        .unwrap();
    for shards in [1, 3, 7] {
        let index = ShardedIndex::build(
            &cpu_builder(Algorithm::RnnDescent(Default::default())),
            base.clone(),
            shards,
            &[],
        )
        .unwrap();
        assert_eq!(index.len(), 2_003);
        assert_eq!(index.shards().len(), shards);
        // Contiguous, as even as possible.
        assert_eq!(index.shard_ids(0).start, 0);
        assert_eq!(index.shard_ids(shards - 1).end, 2_003);
        let found = index
            .search(
                queries.view(),
                15,
                &SearchParams::exact().with_backend(Backend::Cpu),
            )
            .unwrap();
        assert_eq!(found.neighbors.ids, truth.neighbors.ids, "{shards} shards");
        assert_eq!(
            found.neighbors.dists, truth.neighbors.dists,
            "{shards} shards"
        );
        assert_eq!(found.stats.queries, 40 * shards as u64);
    }
}

#[test]
fn graph_search_through_shards_finds_the_neighbours_on_clustered_data() {
    let (base, queries) = clustered(6_000, 60, 2);
    let index = ShardedIndex::build(
        &cpu_builder(Algorithm::RnnDescent(Default::default())),
        base.clone(),
        4,
        &[],
    )
    .unwrap();
    let params = SearchParams::with_beam_width(48).with_backend(Backend::Cpu);
    let found = index.search(queries.view(), 10, &params).unwrap();
    let exact = SearchParams::exact().with_backend(Backend::Cpu);
    let truth = index.search(queries.view(), 10, &exact).unwrap();
    let r = recall(&found.neighbors, &truth.neighbors, 10);
    assert!(r >= 0.95, "recall@10 {r}");
    assert_eq!(found.backend, "cpu");
    // k above a shard's size but within the whole set: every row full.
    let small = ShardedIndex::build(
        &cpu_builder(Algorithm::exact(4)),
        base.view().slice_rows(0..40).unwrap(),
        4,
        &[],
    )
    .unwrap();
    let wide = small.search(queries.view(), 25, &exact).unwrap();
    assert!(wide.neighbors.ids.iter().all(|&i| (i as usize) < 40));
    assert!(matches!(
        small.search(queries.view(), 41, &exact),
        Err(Error::InvalidParams { name, .. }) if name == "k"
    ));
}

#[test]
fn a_filter_over_global_ids_reaches_every_shard() {
    let (base, queries) = clustered(3_000, 30, 3);
    let index = ShardedIndex::build(
        &cpu_builder(Algorithm::RnnDescent(Default::default())),
        base.clone(),
        3,
        &[],
    )
    .unwrap();
    // Every 7th id, in every shard.
    let filter = Filter::from_predicate(3_000, |i| i % 7 == 3);
    let mut params = SearchParams::exact().with_backend(Backend::Cpu);
    params.filter = Some(filter.clone());
    let found = index.search(queries.view(), 10, &params).unwrap();
    let whole = Index::builder(Algorithm::exact(4))
        .backend(Backend::Cpu)
        .build(base.clone())
        .unwrap();
    let truth = whole.search(queries.view(), 10, &params).unwrap();
    assert_eq!(found.neighbors.ids, truth.neighbors.ids);
    assert!(found.neighbors.ids.iter().all(|&i| i % 7 == 3));
    let shards_hit: std::collections::BTreeSet<usize> = found
        .neighbors
        .ids
        .iter()
        .map(|&i| i as usize / 1_000)
        .collect();
    assert_eq!(shards_hit.len(), 3, "{shards_hit:?}");
    params.filter = Some(Filter::all(2_999));
    assert!(matches!(
        index.search(queries.view(), 10, &params),
        Err(Error::InvalidParams { name, .. }) if name == "filter"
    ));
}

#[test]
fn bad_shard_counts_mismatched_shards_and_repeated_devices_are_typed_errors() {
    let (base, queries) = clustered(300, 5, 4);
    let builder = cpu_builder(Algorithm::exact(4));
    for shards in [0, 301] {
        assert!(matches!(
            ShardedIndex::build(&builder, base.clone(), shards, &[]),
            Err(Error::InvalidParams { name, .. }) if name == "shards"
        ));
    }
    assert!(matches!(
        ShardedIndex::build(&builder, base.clone(), 2, &[0, 0]),
        Err(Error::InvalidParams { name, .. }) if name == "devices"
    ));
    assert!(matches!(
        ShardedIndex::from_shards(Vec::new()),
        Err(Error::InvalidParams { name, .. }) if name == "shards"
    ));
    let l2 = builder.build(base.clone()).unwrap();
    let ip = cpu_builder(Algorithm::exact(4))
        .metric(Metric::InnerProduct)
        .build(base.clone())
        .unwrap();
    assert!(matches!(
        ShardedIndex::from_shards(vec![l2, ip]),
        Err(Error::InvalidInput(_))
    ));
    let index = ShardedIndex::build(&builder, base, 2, &[]).unwrap();
    let mut params = SearchParams::exact();
    params.devices = vec![3, 3];
    assert!(matches!(
        index.search(queries.view(), 3, &params),
        Err(Error::InvalidParams { name, .. }) if name == "devices"
    ));
}

/// On a GPU machine: three CAGRA shards built on device 0 (the devices' thread path), searched
/// there, equal the shards searched one after another with the same parameters; a device that
/// cannot be used is named.
#[test]
fn shards_build_and_search_on_device_zero_where_there_is_a_gpu() {
    if !weft::registry::GpuStatus::probe_device(0).is_available() {
        #[cfg(feature = "cuda")]
        assert!(
            !weft::gpu::testing::gpu_required(),
            "WEFT_REQUIRE_GPU is set but GPU 0 cannot be used"
        );
        eprintln!(
            "shards_build_and_search_on_device_zero_where_there_is_a_gpu: SKIPPED (no GPU 0)"
        );
        return;
    }
    let (base, queries) = clustered(9_000, 200, 5);
    let builder = Index::builder(Algorithm::Cagra(weft::CagraParams::default())).seed(5);
    let index = ShardedIndex::build(&builder, base.clone(), 3, &[0]).unwrap();
    assert!(index.shards().iter().all(|s| s.device() == Some(0)));
    let mut params = SearchParams::with_beam_width(64).with_backend(Backend::Gpu);
    params.cagra.mode = weft::search::CagraSearchMode::SingleCta;
    let mut on_zero = params.clone();
    on_zero.devices = vec![0];
    let found = index.search(queries.view(), 10, &on_zero).unwrap();
    assert_eq!(found.backend, "gpu");
    let one_by_one = index.search(queries.view(), 10, &params).unwrap();
    assert_eq!(found.neighbors.ids, one_by_one.neighbors.ids);
    let exact = SearchParams::exact().with_backend(Backend::Cpu);
    let truth = index.search(queries.view(), 10, &exact).unwrap();
    let r = recall(&found.neighbors, &truth.neighbors, 10);
    assert!(r >= 0.95, "recall@10 {r}");
    on_zero.devices = vec![0, 999];
    assert!(matches!(
        index.search(queries.view(), 10, &on_zero),
        Err(Error::Unsupported(m)) if m.contains("device 999")
    ));
}

#[test]
fn save_and_load_keep_the_shards_and_refuse_what_is_not_a_sharded_index() {
    let (base, queries) = clustered(1_200, 20, 6);
    let builder = cpu_builder(Algorithm::RnnDescent(Default::default()));
    let index = ShardedIndex::build(&builder, base.clone(), 3, &[]).unwrap();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("sharded");
    index.save(&dir).unwrap();
    let loaded = ShardedIndex::load(&dir).unwrap();
    assert_eq!(loaded.len(), 1_200);
    assert_eq!(loaded.shards().len(), 3);
    let params = SearchParams::with_beam_width(32).with_backend(Backend::Cpu);
    let (a, b) = (
        index.search(queries.view(), 10, &params).unwrap(),
        loaded.search(queries.view(), 10, &params).unwrap(),
    );
    assert_eq!(a.neighbors.ids, b.neighbors.ids);
    // Saved again over itself with fewer shards: the folder is replaced whole.
    let two = ShardedIndex::build(&builder, base.clone(), 2, &[]).unwrap();
    two.save(&dir).unwrap();
    assert_eq!(ShardedIndex::load(&dir).unwrap().shards().len(), 2);
    assert!(!dir.join("shard-00002").exists());
    // A folder of other files is refused, and keeps them.
    let other = root.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    assert!(matches!(index.save(&other), Err(Error::InvalidInput(_))));
    assert!(other.join("notes.txt").exists());
    // A manifest that lies about a shard, or is no manifest, is a format error naming it.
    let manifest = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("\"rows\": 600", "\"rows\": 601")).unwrap();
    assert!(matches!(
        ShardedIndex::load(&dir),
        Err(Error::Format { .. })
    ));
    std::fs::write(&manifest, "{\"format\": \"something else\"}").unwrap();
    assert!(matches!(
        ShardedIndex::load(&dir),
        Err(Error::Format { .. })
    ));
    std::fs::write(&manifest, "not json").unwrap();
    assert!(matches!(
        ShardedIndex::load(&dir),
        Err(Error::Format { .. })
    ));
}

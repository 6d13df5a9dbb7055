//! The graph file format: round trips, corruption, truncation, crafted headers, atomic writes.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use weft_core::rng::SplitMix64;
use weft_core::{DType, Error, FixedDegreeGraph, GraphView, INVALID, KnnGraph, Metric, NodeId};
use weft_graph::hier::{HierGraph, HierLayer};
use weft_graph::storage::{
    self, FormatIssue, GraphKind, GraphMeta, LoadOptions, StoredGraph, load, read_header,
    save_fixed, save_hier, save_knn,
};

// ---------------------------------------------------------------------------------------------
// Random graphs
// ---------------------------------------------------------------------------------------------

/// Up to `max` distinct ids in `0..n`, none equal to `not`.
fn random_row(rng: &mut SplitMix64, n: usize, max: usize, not: Option<usize>) -> Vec<NodeId> {
    let avail = n - usize::from(not.is_some_and(|v| v < n));
    let len = rng.below(max.min(avail) as u64 + 1) as usize;
    let mut row = Vec::with_capacity(len);
    while row.len() < len {
        let u = rng.below(n as u64) as usize;
        if Some(u) != not && !row.contains(&(u as NodeId)) {
            row.push(u as NodeId);
        }
    }
    row
}

fn random_knn(n: usize, k: usize, seed: u64) -> KnnGraph {
    let mut rng = SplitMix64::new(seed);
    let mut ids = vec![INVALID; n * k];
    let mut dists = vec![f32::INFINITY; n * k];
    for v in 0..n {
        let row = random_row(&mut rng, n, k, Some(v));
        let mut d: Vec<f32> = row.iter().map(|_| rng.next_f32() * 10.0 - 2.0).collect();
        d.sort_by(f32::total_cmp);
        ids[v * k..v * k + row.len()].copy_from_slice(&row);
        dists[v * k..v * k + row.len()].copy_from_slice(&d);
    }
    let g = KnnGraph::from_parts(n, k, ids, dists).unwrap();
    g.validate().unwrap();
    g
}

fn random_fixed(n: usize, degree: usize, seed: u64) -> FixedDegreeGraph {
    let mut rng = SplitMix64::new(seed);
    let lists: Vec<Vec<NodeId>> = (0..n)
        .map(|v| random_row(&mut rng, n, degree, Some(v)))
        .collect();
    let entry = if n == 0 {
        Vec::new()
    } else {
        random_row(&mut rng, n, 3, None)
    };
    let g = FixedDegreeGraph::from_lists(&lists, degree)
        .unwrap()
        .with_entry_points(entry);
    g.validate().unwrap();
    g
}

/// A random nested hierarchy of `layers` layers over `n >= 1` points.
fn random_hier(n: usize, layers: usize, seed: u64) -> HierGraph {
    let mut rng = SplitMix64::new(seed ^ 0xabcdef);
    let degree = 1 + rng.below(4) as usize;
    let base = random_fixed(n, degree, seed);
    let mut upper = Vec::new();
    let mut below: Vec<NodeId> = (0..n as NodeId).collect();
    for _ in 1..layers {
        // A random non-empty subset of the layer below, in random order.
        let m = 1 + rng.below(below.len() as u64) as usize;
        let picks = random_row(&mut rng, below.len(), below.len(), None);
        let mut globals: Vec<NodeId> = picks.iter().map(|&i| below[i as usize]).collect();
        if globals.len() < m {
            for &g in &below {
                if globals.len() == m {
                    break;
                }
                if !globals.contains(&g) {
                    globals.push(g);
                }
            }
        }
        globals.truncate(m);
        let d = 1 + rng.below(3) as usize;
        let graph = random_fixed(m, d, rng.next_u64()).with_entry_points(Vec::new());
        upper.push(HierLayer::new(graph, globals.clone()).unwrap());
        below = globals;
    }
    let entry = vec![below[0]];
    let h = HierGraph::new(base, upper, entry).unwrap();
    h.validate().unwrap();
    h
}

fn meta(seed: u64) -> GraphMeta {
    let mut rng = SplitMix64::new(seed);
    let metric = Metric::ALL[rng.below(3) as usize];
    let mut m = GraphMeta::new(metric)
        .with_params(
            "nndescent",
            &serde_json::json!({"k": rng.below(100), "rho": 0.5, "name": "ünïcode"}),
        )
        .unwrap();
    if rng.below(2) == 0 {
        m = m.with_data(
            DType::from_code(rng.below(4) as u8).unwrap(),
            1 + rng.below(999) as usize,
        );
    }
    m
}

// ---------------------------------------------------------------------------------------------
// Equality
// ---------------------------------------------------------------------------------------------

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn assert_same_knn(a: &KnnGraph, b: &KnnGraph) {
    assert_eq!((a.n(), a.k()), (b.n(), b.k()));
    assert_eq!(a.ids(), b.ids());
    assert_eq!(bits(a.dists()), bits(b.dists()));
}

fn assert_same_fixed(a: &FixedDegreeGraph, b: &FixedDegreeGraph) {
    assert_eq!((a.n(), a.degree()), (b.n(), b.degree()));
    assert_eq!(a.ids(), b.ids());
    assert_eq!(a.entry_points(), b.entry_points());
}

fn assert_same_hier(a: &HierGraph, b: &HierGraph) {
    assert_eq!(a.num_layers(), b.num_layers());
    assert_same_fixed(a.base(), b.base());
    assert_eq!(a.entry_points(), b.entry_points());
    for (x, y) in a.upper_layers().iter().zip(b.upper_layers()) {
        assert_same_fixed(x.graph(), y.graph());
        assert_eq!(x.global_ids(), y.global_ids());
    }
}

fn modes() -> [LoadOptions; 4] {
    [
        LoadOptions::default(),
        LoadOptions::mmap(),
        LoadOptions::fast(),
        LoadOptions::default()
            .verify_checksum(false)
            .validate(false),
    ]
}

// ---------------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn knn_round_trip(n in 0usize..40, k in 0usize..7, seed in any::<u64>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.wgraph");
        let g = random_knn(n, k, seed);
        let m = meta(seed);
        save_knn(&path, &g, &m).unwrap();
        for opts in modes() {
            let (loaded, lm) = load(&path, opts).unwrap();
            prop_assert_eq!(&lm, &m);
            prop_assert_eq!(loaded.kind(), GraphKind::Knn);
            assert_same_knn(&loaded.into_knn().unwrap(), &g);
        }
        let h = read_header(&path).unwrap();
        prop_assert_eq!((h.kind, h.n, h.degree, h.layers.len()), (GraphKind::Knn, n, k, 1));
        prop_assert_eq!(h.meta, m);
        prop_assert_eq!(h.file_len, std::fs::metadata(&path).unwrap().len());
    }

    #[test]
    fn fixed_round_trip(n in 0usize..40, degree in 0usize..7, seed in any::<u64>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.wgraph");
        let g = random_fixed(n, degree, seed);
        let m = meta(seed);
        save_fixed(&path, &g, &m).unwrap();
        for opts in modes() {
            let (loaded, lm) = load(&path, opts).unwrap();
            prop_assert_eq!(&lm, &m);
            assert_same_fixed(&loaded.into_fixed().unwrap(), &g);
        }
        let h = read_header(&path).unwrap();
        prop_assert_eq!(h.num_entry_points, g.entry_points().len());
    }

    #[test]
    fn hier_round_trip(n in 1usize..40, layers in 1usize..5, seed in any::<u64>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.wgraph");
        let g = random_hier(n, layers, seed);
        let m = meta(seed);
        save_hier(&path, &g, &m).unwrap();
        for opts in modes() {
            let (loaded, lm) = load(&path, opts).unwrap();
            prop_assert_eq!(&lm, &m);
            let h = loaded.into_hier().unwrap();
            assert_same_hier(&h, &g);
            // Lookups work on the loaded layers.
            for l in 1..h.num_layers() {
                for (local, &glob) in h.layer(l).unwrap().global_ids().iter().enumerate() {
                    prop_assert_eq!(h.local_id(l, glob), Some(local as NodeId));
                }
            }
        }
        let h = read_header(&path).unwrap();
        prop_assert_eq!(h.kind, GraphKind::Hier);
        prop_assert_eq!(h.layers.len(), layers);
        for l in 0..layers {
            prop_assert_eq!(h.layers[l].len, g.layer_len(l));
        }
    }
}

#[test]
fn mmap_loads_are_zero_copy_and_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.wgraph");
    let g = random_knn(500, 8, 1);
    save_knn(&path, &g, &GraphMeta::new(Metric::L2Squared)).unwrap();
    let (loaded, _) = load(&path, LoadOptions::mmap()).unwrap();
    let k = loaded.into_knn().unwrap();
    // Sections start on 64-byte boundaries of a page-aligned map.
    assert_eq!(k.ids().as_ptr() as usize % 64, 0);
    assert_eq!(k.dists().as_ptr() as usize % 64, 0);
    assert_same_knn(&k, &g);
    // Mutation copies, leaving the file alone.
    let mut k2 = k.clone();
    k2.parts_mut().0[0] = INVALID;
    let (again, _) = load(&path, LoadOptions::default()).unwrap();
    assert_same_knn(&again.into_knn().unwrap(), &g);
}

#[test]
fn stored_graph_helpers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.wgraph");
    let g = random_fixed(10, 3, 5);
    let m = GraphMeta::new(Metric::Cosine);
    storage::save(&path, &StoredGraph::Fixed(g.clone()), &m).unwrap();
    let (s, _) = load(&path, LoadOptions::default()).unwrap();
    assert_eq!(s.num_nodes(), 10);
    assert_eq!(s.max_degree(), 3);
    assert_eq!(GraphView::entry_points(&s), g.entry_points());
    assert_eq!(s.neighbors(4), g.neighbors(4));
    s.validate().unwrap();
    assert!(matches!(s.clone().into_knn(), Err(Error::InvalidInput(_))));
    assert!(matches!(s.into_hier(), Err(Error::InvalidInput(_))));
}

#[test]
fn meta_params() {
    let m = GraphMeta::new(Metric::InnerProduct)
        .with_params("cagra", &serde_json::json!({"degree": 32}))
        .unwrap();
    assert_eq!(m.algorithm().as_deref(), Some("cagra"));
    assert_eq!(m.params_json().unwrap()["params"]["degree"], 32);
    assert_eq!(GraphMeta::new(Metric::L2Squared).algorithm(), None);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.wgraph");
    let g = random_knn(4, 2, 3);
    let mut bad = GraphMeta::new(Metric::L2Squared);
    bad.params = "{not json".into();
    assert!(matches!(
        save_knn(&path, &g, &bad),
        Err(Error::InvalidInput(_))
    ));
    let mut bad = GraphMeta::new(Metric::L2Squared);
    bad.dim = Some(0);
    assert!(matches!(
        save_knn(&path, &g, &bad),
        Err(Error::InvalidParams { .. })
    ));
    assert!(!path.exists());
}

// ---------------------------------------------------------------------------------------------
// Corruption
// ---------------------------------------------------------------------------------------------

fn issue(e: Error) -> FormatIssue {
    FormatIssue::of(&e).unwrap_or_else(|| panic!("expected a graph format error, got {e:?}"))
}

fn sample_files(dir: &Path) -> Vec<PathBuf> {
    let knn = dir.join("knn.wgraph");
    save_knn(&knn, &random_knn(12, 3, 7), &meta(7)).unwrap();
    let hier = dir.join("hier.wgraph");
    save_hier(&hier, &random_hier(12, 3, 8), &meta(8)).unwrap();
    vec![knn, hier]
}

#[test]
fn every_flipped_byte_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    for original in sample_files(dir.path()) {
        let bytes = std::fs::read(&original).unwrap();
        let len = bytes.len();
        let victim = dir.path().join("victim.wgraph");
        for i in 0..len {
            let mut b = bytes.clone();
            b[i] ^= 0xA5;
            std::fs::write(&victim, &b).unwrap();
            let expected: &[FormatIssue] = match i {
                0..8 => &[FormatIssue::BadMagic],
                8..12 => &[FormatIssue::UnsupportedVersion],
                16..24 => &[FormatIssue::Truncated, FormatIssue::TrailingBytes],
                _ if i >= len - 4 => &[FormatIssue::BadTrailer],
                _ => &[FormatIssue::ChecksumMismatch],
            };
            for opts in [LoadOptions::default(), LoadOptions::mmap()] {
                let e = load(&victim, opts).unwrap_err();
                assert!(expected.contains(&issue(e)), "byte {i} ({opts:?})");
            }
            // Without verification nothing panics (the result may be anything).
            for opts in [
                LoadOptions::fast(),
                LoadOptions::fast().validate(true),
                LoadOptions::default().verify_checksum(false),
            ] {
                let _ = load(&victim, opts);
            }
            let _ = read_header(&victim);
        }
    }
}

#[test]
fn every_truncation_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    for original in sample_files(dir.path()) {
        let bytes = std::fs::read(&original).unwrap();
        let victim = dir.path().join("victim.wgraph");
        for cut in 0..bytes.len() {
            std::fs::write(&victim, &bytes[..cut]).unwrap();
            for opts in [
                LoadOptions::default(),
                LoadOptions::mmap(),
                LoadOptions::fast(),
            ] {
                let e = load(&victim, opts).unwrap_err();
                assert_eq!(issue(e), FormatIssue::Truncated, "cut at {cut}");
            }
            let e = read_header(&victim).unwrap_err();
            assert_eq!(issue(e), FormatIssue::Truncated, "cut at {cut}");
        }
        // One byte too many.
        let mut longer = bytes.clone();
        longer.push(0);
        std::fs::write(&victim, &longer).unwrap();
        let e = load(&victim, LoadOptions::default()).unwrap_err();
        assert!(e.to_string().contains("trailing bytes"), "{e}");
        assert_eq!(issue(e), FormatIssue::TrailingBytes);
    }
}

#[test]
fn other_files_have_bad_magic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.fvecs");
    std::fs::write(&path, vec![7u8; 4096]).unwrap();
    for opts in [LoadOptions::default(), LoadOptions::mmap()] {
        assert_eq!(issue(load(&path, opts).unwrap_err()), FormatIssue::BadMagic);
    }
    assert_eq!(
        issue(read_header(&path).unwrap_err()),
        FormatIssue::BadMagic
    );
    assert_eq!(FormatIssue::of(&Error::Cancelled), None);
    let missing = dir.path().join("missing.wgraph");
    assert!(matches!(
        load(&missing, LoadOptions::default()),
        Err(Error::Io { .. })
    ));
}

/// Overwrites `bytes[at..]` with `value` and recomputes the checksum, as a forger would.
fn patch(bytes: &mut [u8], at: usize, value: &[u8]) {
    bytes[at..at + value.len()].copy_from_slice(value);
    let body = bytes.len() - 8;
    let crc = crc32fast::hash(&bytes[..body]);
    bytes[body..body + 4].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn crafted_headers_are_rejected_without_huge_allocations() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("knn.wgraph");
    save_knn(&original, &random_knn(12, 3, 7), &meta(7)).unwrap();
    let bytes = std::fs::read(&original).unwrap();
    let victim = dir.path().join("victim.wgraph");
    // Section table of a k-NN file: params, entry, ids, dists at 64 + 32 * i; fields tag(0),
    // layer(4), offset(8), rows(16), cols(24).
    let ids_rows = 64 + 32 * 2 + 16;
    use FormatIssue::{ExceedsFile, Inconsistent, UnsupportedVersion};
    let cases: Vec<(usize, Vec<u8>, FormatIssue)> = vec![
        (8, 2u32.to_le_bytes().to_vec(), UnsupportedVersion),
        (ids_rows, (u64::MAX / 4).to_le_bytes().to_vec(), ExceedsFile),
        (ids_rows, (1u64 << 40).to_le_bytes().to_vec(), ExceedsFile),
        (
            64 + 32 * 3 + 24,
            (1u64 << 62).to_le_bytes().to_vec(),
            ExceedsFile,
        ),
        (32, 13u64.to_le_bytes().to_vec(), Inconsistent), // n
        (40, 4u64.to_le_bytes().to_vec(), Inconsistent),  // degree
        (24, [7u8].to_vec(), Inconsistent),               // kind
        (25, [9u8].to_vec(), Inconsistent),               // metric
        (26, [9u8].to_vec(), Inconsistent),               // dtype
        (28, 1000u32.to_le_bytes().to_vec(), Inconsistent), // num_sections
        (56, 2u32.to_le_bytes().to_vec(), Inconsistent),  // num_layers
        (64 + 32 * 2 + 8, 65u64.to_le_bytes().to_vec(), Inconsistent), // misaligned
        (64 + 32 * 2, 9u32.to_le_bytes().to_vec(), Inconsistent), // unknown tag
        (64 + 32 * 2, 2u32.to_le_bytes().to_vec(), Inconsistent), // duplicate entry
        (64 + 32 + 16, 1u64.to_le_bytes().to_vec(), Inconsistent), // knn entry points
    ];
    for (at, value, want) in cases {
        let mut b = bytes.clone();
        patch(&mut b, at, &value);
        std::fs::write(&victim, &b).unwrap();
        for opts in [
            LoadOptions::default(),
            LoadOptions::mmap(),
            LoadOptions::fast(),
        ] {
            let e = load(&victim, opts).unwrap_err();
            assert_eq!(issue(e), want, "patch at {at}");
        }
        assert_eq!(
            issue(read_header(&victim).unwrap_err()),
            want,
            "patch at {at}"
        );
    }

    // An out-of-range id with a valid checksum is a graph error (validation on), and loads when
    // validation is off.
    let ids_offset =
        u64::from_le_bytes(bytes[64 + 32 * 2 + 8..64 + 32 * 2 + 16].try_into().unwrap());
    let mut b = bytes.clone();
    patch(&mut b, ids_offset as usize, &100u32.to_le_bytes());
    std::fs::write(&victim, &b).unwrap();
    assert!(matches!(
        load(&victim, LoadOptions::default()),
        Err(Error::InvalidGraph(_))
    ));
    assert!(load(&victim, LoadOptions::fast()).is_ok());
}

// ---------------------------------------------------------------------------------------------
// Atomic writes
// ---------------------------------------------------------------------------------------------

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn writes_are_atomic_and_leave_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.wgraph");
    let m = GraphMeta::new(Metric::L2Squared);
    save_knn(&path, &random_knn(20, 4, 1), &m).unwrap();
    let first = std::fs::read(&path).unwrap();

    // Overwrite with another graph.
    let g2 = random_knn(30, 2, 2);
    save_knn(&path, &g2, &m).unwrap();
    assert_same_knn(
        &load(&path, LoadOptions::default())
            .unwrap()
            .0
            .into_knn()
            .unwrap(),
        &g2,
    );
    assert_eq!(listing(dir.path()), vec!["g.wgraph"]);
    save_knn(&path, &random_knn(20, 4, 1), &m).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), first);

    // A failed save (invalid graph) leaves the old file as it was.
    let bad = KnnGraph::from_parts(2, 1, vec![0, 0], vec![0.0, 0.0]).unwrap();
    assert!(matches!(
        save_knn(&path, &bad, &m),
        Err(Error::InvalidGraph(_))
    ));
    assert_eq!(std::fs::read(&path).unwrap(), first);

    // A failure at the rename (the target is a directory) removes the temporary file.
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("keep"), b"x").unwrap();
    assert!(matches!(
        save_knn(&sub, &random_knn(5, 2, 3), &m),
        Err(Error::Io { .. })
    ));
    assert_eq!(listing(dir.path()), vec!["g.wgraph", "sub"]);
    assert_eq!(listing(&sub), vec!["keep"]);

    // A missing directory is an I/O error.
    assert!(matches!(
        save_knn(dir.path().join("nope/g.wgraph"), &random_knn(5, 2, 3), &m),
        Err(Error::Io { .. })
    ));
}

#[test]
fn header_for_info() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.wgraph");
    let g = random_fixed(100, 8, 9);
    let m = GraphMeta::new(Metric::Cosine)
        .with_data(DType::F16, 96)
        .with_params("rnndescent", &serde_json::json!({"s": 20}))
        .unwrap();
    save_fixed(&path, &g, &m).unwrap();
    let h = read_header(&path).unwrap();
    assert_eq!(h.version, storage::VERSION);
    assert_eq!((h.kind, h.n, h.degree), (GraphKind::Fixed, 100, 8));
    assert_eq!(h.num_entry_points, g.entry_points().len());
    assert_eq!(h.meta, m);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(h.checksum, crc32fast::hash(&bytes[..bytes.len() - 8]));
    assert!(h.sections.iter().all(|s| s.offset % storage::ALIGN == 0));
    let names: Vec<&str> = h.sections.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["params", "entry points", "ids"]);
    assert_eq!(h.sections[2].byte_len(), 100 * 8 * 4);
    assert_eq!(&bytes[..8], &storage::MAGIC);
    let json = serde_json::to_value(&h).unwrap();
    assert_eq!(json["kind"], "fixed");
    assert_eq!(json["meta"]["metric"], "cosine");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Forged files (random header and table bytes, then a valid checksum) never panic a load.
    #[test]
    fn forged_headers_never_panic(
        which in 0usize..2,
        edits in proptest::collection::vec((0usize..400, any::<u8>()), 1..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let files = sample_files(dir.path());
        let bytes = std::fs::read(&files[which]).unwrap();
        let header_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        let mut b = bytes.clone();
        for (at, v) in edits {
            // Leave magic, version and length alone: those fail before anything is parsed.
            let at = 24 + at % (header_len - 24);
            b[at] = v;
        }
        patch(&mut b, 0, &bytes[..8]);
        let victim = dir.path().join("victim.wgraph");
        std::fs::write(&victim, &b).unwrap();
        for opts in modes() {
            if let Err(e) = load(&victim, opts) {
                prop_assert!(
                    FormatIssue::of(&e).is_some() || matches!(e, Error::InvalidGraph(_)),
                    "{e:?}"
                );
            }
        }
        let _ = read_header(&victim);
    }
}

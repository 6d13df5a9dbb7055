//! Issue 19: a graph used with other data of the same n and d went undetected. Graphs built
//! through `Index` record the data's fingerprint and seed; `Index::from_parts` (so every load,
//! search and eval through it) refuses other data, and accepts files that record none.

use weft::graph::storage::{self, LoadOptions};
use weft::io::Preset;
use weft::{AnyDataset, BuildCtx, Error, GraphMeta, Index, Metric};

fn data(seed: u64) -> AnyDataset {
    Preset::Sift
        .generator(seed)
        .unwrap()
        .base(300)
        .unwrap()
        .into()
}

#[test]
fn a_graph_is_refused_with_other_data_of_the_same_shape() {
    let index = Index::build(
        data(1),
        Metric::L2Squared,
        "rnndescent",
        &serde_json::json!({}),
        None,
        &BuildCtx::new(5).with_threads(Some(2)),
    )
    .unwrap();
    let meta = index.meta().clone();
    let fp = meta.data_fingerprint().expect("recorded");
    assert!(fp.starts_with("crc32:") && fp.len() == 14, "{fp}");
    assert_eq!(fp, weft::index::data_fingerprint(&data(1)));
    assert_eq!(meta.seed(), Some(5));
    // The algorithm's parameters sit one level down, not three.
    let params = meta.algorithm_params().unwrap();
    assert!(params.get("degree").is_some(), "{params}");
    assert_eq!(meta.field("backend").unwrap(), "cpu");

    // Through a file, as the CLI loads it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.wgraph");
    storage::save(&path, index.graph(), &meta).unwrap();
    let (graph, loaded) = storage::load(&path, LoadOptions::mmap()).unwrap();
    assert_eq!(loaded.data_fingerprint(), Some(fp.clone()));
    Index::from_parts(data(1), graph.clone(), loaded.clone()).unwrap();
    match Index::from_parts(data(2), graph.clone(), loaded) {
        Err(Error::InvalidInput(msg)) => {
            assert!(msg.contains("other data of the same shape"), "{msg}");
            assert!(msg.contains(&fp), "{msg}");
        }
        other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
    }

    // A file written before fingerprints were recorded (the old nested record) is accepted
    // with any data of the right shape, and its parameters still read.
    let mut old = GraphMeta::new(Metric::L2Squared)
        .with_data(weft::DType::F32, 128)
        .with_params(
            "rnndescent",
            &serde_json::json!({"backend": "cpu", "k": null, "params": {"degree": 32}}),
        )
        .unwrap();
    assert_eq!(old.data_fingerprint(), None);
    assert_eq!(old.seed(), None);
    assert_eq!(old.algorithm_params().unwrap()["degree"], 32);
    assert_eq!(old.field("backend").unwrap(), "cpu");
    old.params = old.params.clone();
    Index::from_parts(data(2), graph, old).unwrap();
}

//! The typed facade: `Index::builder` with an `Algorithm` and its typed parameters builds what
//! the JSON path builds, k lives in the k-NN variants, bad parameters are typed errors, and
//! `Backend::Auto` (the default) runs on the CPU where there is no GPU.

use weft::graph::storage::{self, StoredGraph};
use weft::io::Preset;
use weft::{
    Algorithm, Backend, BuildCtx, CagraParams, Dataset, Error, GgnnParams, GpuStatus, GrnndParams,
    Index, Metric, NnDescentParams, Produces, Registry, RnnDescentParams, SearchParams,
};

fn small(n: usize, q: usize) -> (Dataset<f32>, Dataset<f32>) {
    let g = Preset::Deep.generator(3).unwrap();
    (g.base(n).unwrap(), g.queries(q).unwrap())
}

fn no_gpu() -> GpuStatus {
    GpuStatus::Unavailable("the test asks for the CPU".into())
}

/// The graph file of `index` (graph and metadata), byte for byte.
fn graph_file(index: &Index) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.wgraph");
    storage::save(&path, index.graph(), index.meta()).unwrap();
    std::fs::read(&path).unwrap()
}

/// The build record of an index: `{"algorithm", "params", "backend", "k", "seed",
/// "data_fingerprint"}`.
fn record(index: &Index) -> serde_json::Value {
    index.meta().params_json().unwrap()
}

/// The graph file of `index` without its build record (which records the seed): the graph.
fn graph_only(index: &Index) -> Vec<u8> {
    let meta = weft::GraphMeta::new(index.metric());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.wgraph");
    storage::save(&path, index.graph(), &meta).unwrap();
    std::fs::read(&path).unwrap()
}

/// Every CPU algorithm, with parameters away from the defaults where that is cheap.
fn cpu_algorithms() -> Vec<Algorithm> {
    vec![
        Algorithm::exact(8),
        Algorithm::NnDescent {
            k: 12,
            params: NnDescentParams {
                max_iters: 6,
                ..NnDescentParams::default()
            },
        },
        Algorithm::RnnDescent(RnnDescentParams {
            degree: 16,
            ..RnnDescentParams::default()
        }),
        Algorithm::Cagra(CagraParams {
            graph_degree: 16,
            intermediate_degree: 24,
            ..CagraParams::default()
        }),
        Algorithm::Ggnn(GgnnParams::default()),
    ]
}

#[test]
fn typed_build_of_every_cpu_algorithm_equals_the_json_build() {
    let (base, _) = small(500, 1);
    let registry = Registry::with_gpu(no_gpu());
    for algorithm in cpu_algorithms() {
        let name = algorithm.name();
        let typed = Index::builder(algorithm.clone())
            .metric(Metric::L2Squared)
            .backend(Backend::Cpu)
            .threads(2)
            .seed(7)
            .build(base.clone())
            .unwrap();
        let params = algorithm.params_json().unwrap();
        let request = weft::BuildRequest {
            algorithm: name,
            backend: Some(Backend::Cpu),
            params: &params,
            k: algorithm.k(),
        };
        let json = Index::build_with(
            &registry,
            base.clone(),
            Metric::L2Squared,
            request,
            &BuildCtx::new(7).with_threads(Some(2)),
        )
        .unwrap();
        assert_eq!(typed.meta(), json.meta(), "{name}");
        assert_eq!(
            graph_file(&typed),
            graph_file(&json),
            "{name}: the same graph"
        );
        // The seed reaches the build: another gives another graph (the exact one has none).
        if name != "exact" {
            let other = Index::builder(algorithm.clone())
                .backend(Backend::Cpu)
                .threads(2)
                .seed(8)
                .build(base.clone())
                .unwrap();
            assert_ne!(
                graph_only(&other),
                graph_only(&typed),
                "{name}: seed 8 vs 7"
            );
            assert_eq!(record(&other)["seed"], 8, "{name}");
        }
        // The parameters are recorded as given: validated, never changed.
        assert_eq!(record(&typed)["params"], params, "{name}");
        assert_eq!(record(&typed)["backend"], "cpu", "{name}");
        assert_eq!(record(&typed)["seed"], 7, "{name}");
        assert_eq!(
            record(&typed)["data_fingerprint"],
            weft::index::data_fingerprint(&base.clone().into()),
            "{name}"
        );
        // The JSON description reads back as the same typed algorithm.
        assert_eq!(
            Algorithm::from_json(name, &params, algorithm.k()).unwrap(),
            algorithm
        );
        // Every typed algorithm is one the registry knows.
        assert!(registry.list().iter().any(|i| i.name == name), "{name}");
    }
}

#[test]
fn knn_variants_carry_k_and_search_graph_variants_have_none() {
    let (base, _) = small(300, 1);
    for (algorithm, k) in [(Algorithm::exact(7), 7), (Algorithm::nndescent(9), 9)] {
        assert_eq!(algorithm.k(), Some(k));
        assert_eq!(algorithm.produces(), Produces::KnnGraph);
        let index = Index::builder(algorithm.clone())
            .gpu(no_gpu())
            .build(base.clone())
            .unwrap();
        match index.graph() {
            StoredGraph::Knn(g) => assert_eq!(g.k(), k, "{}", algorithm.name()),
            _ => panic!("{}: a k-NN graph expected", algorithm.name()),
        }
        assert_eq!(record(&index)["k"], k);
    }
    for algorithm in [
        Algorithm::RnnDescent(RnnDescentParams::default()),
        Algorithm::Grnnd(GrnndParams::default()),
        Algorithm::Cagra(CagraParams::default()),
        Algorithm::Ggnn(GgnnParams::default()),
    ] {
        assert_eq!(algorithm.k(), None, "{}", algorithm.name());
        assert_eq!(algorithm.produces(), Produces::SearchGraph);
    }
    // The JSON form: k required by k-NN builders, refused by the others.
    let null = serde_json::Value::Null;
    for (name, k) in [("nndescent", None), ("exact", None), ("cagra", Some(4))] {
        match Algorithm::from_json(name, &null, k) {
            Err(Error::InvalidParams { name: p, .. }) => assert_eq!(p, "k", "{name}"),
            other => panic!("{name} with k {k:?}: {other:?}"),
        }
    }
    assert_eq!(
        Algorithm::from_json("nndescent", &null, Some(5)).unwrap(),
        Algorithm::nndescent(5)
    );
}

#[test]
fn invalid_typed_parameters_are_typed_errors() {
    let (base, _) = small(200, 1);
    let build = |algorithm: Algorithm| {
        Index::builder(algorithm)
            .gpu(no_gpu())
            .build(base.clone())
            .map(|_| ())
    };
    let param_of = |r: weft::Result<()>| match r {
        Err(Error::InvalidParams { name, .. }) => name,
        other => panic!("an invalid parameter expected, got {other:?}"),
    };
    // Checked against the data, never adjusted.
    assert_eq!(
        param_of(build(Algorithm::Cagra(CagraParams {
            graph_degree: 32,
            intermediate_degree: 16,
            ..CagraParams::default()
        }))),
        "intermediate_degree"
    );
    assert_eq!(
        param_of(build(Algorithm::Cagra(CagraParams {
            intermediate_degree: 200,
            ..CagraParams::default()
        }))),
        "intermediate_degree"
    );
    assert_eq!(param_of(build(Algorithm::exact(0))), "k");
    assert_eq!(param_of(build(Algorithm::nndescent(0))), "k");
    assert!(matches!(
        build(Algorithm::nndescent(200)),
        Err(Error::InvalidParams { .. })
    ));
    // A value with no faithful JSON form is refused, not rounded.
    assert!(matches!(
        build(Algorithm::NnDescent {
            k: 8,
            params: NnDescentParams {
                rho: f32::NAN,
                ..NnDescentParams::default()
            },
        }),
        Err(Error::InvalidParams { .. })
    ));
    // Unknown JSON keys and algorithms.
    assert!(matches!(
        Algorithm::from_json("cagra", &serde_json::json!({ "no_such_knob": 1 }), None),
        Err(Error::InvalidParams { .. })
    ));
    assert_eq!(
        param_of(Algorithm::from_json("hnsw", &serde_json::Value::Null, None).map(|_| ())),
        "algorithm"
    );
    // Zero threads.
    assert_eq!(
        param_of(
            Index::builder(Algorithm::exact(4))
                .threads(0)
                .build(base.clone())
                .map(|_| ())
        ),
        "threads"
    );
}

#[test]
fn auto_backend_runs_on_the_cpu_without_a_gpu() {
    assert_eq!(Backend::default(), Backend::Auto);
    assert_eq!(SearchParams::default().backend, Backend::Auto);
    assert_eq!(SearchParams::with_beam_width(32).backend, Backend::Auto);
    let (base, queries) = small(600, 20);
    let algorithm = Algorithm::Cagra(CagraParams {
        graph_degree: 16,
        intermediate_degree: 24,
        ..CagraParams::default()
    });
    let auto = Index::builder(algorithm.clone())
        .gpu(no_gpu())
        .seed(1)
        .build(base.clone())
        .unwrap();
    assert_eq!(record(&auto)["backend"], "cpu");
    let cpu = Index::builder(algorithm.clone())
        .backend(Backend::Cpu)
        .seed(1)
        .build(base.clone())
        .unwrap();
    assert_eq!(graph_file(&auto), graph_file(&cpu));
    // The GPU as a requirement, or a GPU-only algorithm, without a GPU: Unsupported.
    assert!(matches!(
        Index::builder(algorithm.clone())
            .backend(Backend::Gpu)
            .gpu(no_gpu())
            .build(base.clone()),
        Err(Error::Unsupported(_))
    ));
    match Index::builder(Algorithm::Grnnd(GrnndParams::default()))
        .gpu(no_gpu())
        .build(base.clone())
    {
        Err(Error::Unsupported(m)) => assert!(m.contains("only on the GPU"), "{m}"),
        other => panic!("grnnd without a GPU: {:?}", other.map(|_| ())),
    }

    // On this machine as it is (the default probe): where no GPU is usable, the defaults build
    // and search on the CPU.
    if GpuStatus::probe().is_available() {
        println!("a GPU is usable here: the CPU fallback is checked with a GPU status of none");
        return;
    }
    let index = Index::builder(algorithm).seed(1).build(base).unwrap();
    assert_eq!(record(&index)["backend"], "cpu");
    let found = index
        .search(queries.view(), 10, &SearchParams::default())
        .unwrap();
    assert_eq!(found.backend, "cpu");
}

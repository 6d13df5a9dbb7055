//! Writes the seed corpora of the fuzz targets into `OUT` (`fuzz/run.sh` calls it): small
//! graphs and indexes built and saved by the library itself, every graph kind and every
//! element type, a few KiB each.
//!
//! - `OUT/graph/*.wgraph`: graph files (`graph_file`, `graph_file_crc`);
//! - `OUT/index/*.bin`: index inputs (`index_load`): a little-endian `u32` length, the graph
//!   file (`graph.wgraph` of `Index::save`), the vector file (`data.*`);
//! - `OUT/vectors/*`: the vector files alone (`read_vectors`).
//!
//! Usage: `cargo run --release -p weft-fuzz-seedgen -- OUT` (from `fuzz/`).

use std::path::{Path, PathBuf};

use weft::graph::hier::{HierGraph, HierLayer};
use weft::{
    Algorithm, AnyDataset, CagraParams, DType, Dataset, Element, FixedDegreeGraph, GgnnParams,
    GraphMeta, Index, KnnGraph, Metric, RnnDescentParams, StoredGraph,
};
use weft_core::rng::SplitMix64;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// `rows x dim` small integers (so that every element type holds them exactly), seeded.
fn values(rows: usize, dim: usize, seed: u64, signed: bool) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    (0..rows * dim)
        .map(|_| {
            let x = rng.below(100) as f32;
            if signed { x - 50.0 } else { x }
        })
        .collect()
}

fn dataset(dtype: DType, rows: usize, dim: usize, seed: u64) -> Result<AnyDataset> {
    fn typed<T: Element>(v: &[f32], rows: usize, dim: usize) -> Result<AnyDataset> {
        let data = v.iter().map(|&x| T::from_f32(x)).collect();
        Ok(AnyDataset::from_typed(Dataset::<T>::from_vec(
            data, rows, dim,
        )?))
    }
    let v = values(rows, dim, seed, dtype == DType::I8);
    match dtype {
        DType::F32 => typed::<f32>(&v, rows, dim),
        DType::F16 => typed::<half::f16>(&v, rows, dim),
        DType::U8 => typed::<u8>(&v, rows, dim),
        DType::I8 => typed::<i8>(&v, rows, dim),
    }
}

/// Builds an index with `algorithm` and saves it under `dir/name`.
fn build(
    dir: &Path,
    name: &str,
    algorithm: Algorithm,
    metric: Metric,
    data: AnyDataset,
) -> Result<PathBuf> {
    let index = Index::builder(algorithm)
        .metric(metric)
        .seed(7)
        .threads(1)
        .build(data)?;
    let out = dir.join(name);
    index.save(&out)?;
    Ok(out)
}

/// A three-layer hierarchy put together by hand (the builders' small graphs have fewer layers).
fn hand_made_hier(dir: &Path) -> Result<PathBuf> {
    let n = 12usize;
    let base = FixedDegreeGraph::new(
        n,
        2,
        (0..n as u32)
            .flat_map(|v| [(v + 1) % 12, (v + 11) % 12])
            .collect::<Vec<_>>(),
    )?;
    let l1 = HierLayer::new(
        FixedDegreeGraph::new(4, 2, vec![1, 3, 2, 0, 3, 1, 0, 2])?,
        vec![0, 3, 6, 9],
    )?;
    let l2 = HierLayer::new(FixedDegreeGraph::new(2, 1, vec![1, 0])?, vec![3, 9])?;
    let graph = HierGraph::new(base, vec![l1, l2], vec![3, 9])?;
    graph.validate()?;
    let data = dataset(DType::F32, n, 3, 11)?;
    let meta = GraphMeta::new(Metric::L2Squared)
        .with_data(DType::F32, 3)
        .with_params("hand-made", &serde_json::json!({}))?;
    let index = Index::from_parts(data, StoredGraph::Hier(graph), meta)?;
    let out = dir.join("hier-hand-3-layers");
    index.save(&out)?;
    Ok(out)
}

/// A two-point k-NN graph (the storage module's doc example).
fn tiny_knn(dir: &Path) -> Result<PathBuf> {
    let graph = KnnGraph::from_parts(2, 1, vec![1, 0], vec![0.5, 0.5])?;
    let meta = GraphMeta::new(Metric::L2Squared)
        .with_data(DType::F32, 1)
        .with_params("exact", &serde_json::json!({}))?;
    let data = AnyDataset::from_typed(Dataset::<f32>::from_vec(vec![0.0, 0.7], 2, 1)?);
    let index = Index::from_parts(data, StoredGraph::Knn(graph), meta)?;
    let out = dir.join("knn-tiny");
    index.save(&out)?;
    Ok(out)
}

fn main() -> Result<()> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: weft-fuzz-seedgen OUT")?,
    );
    let work = out.join("indexes");
    std::fs::create_dir_all(&work)?;
    let rnn = RnnDescentParams {
        degree: 4,
        ..RnnDescentParams::default()
    };
    let cagra = CagraParams {
        graph_degree: 4,
        intermediate_degree: 8,
        entry_points: 4,
        ..CagraParams::default()
    };
    let ggnn = GgnnParams {
        k_build: 4,
        segment_size: 32,
        layers: 3,
        entry_points: 4,
        ..GgnnParams::default()
    };
    let mut indexes = vec![tiny_knn(&work)?, hand_made_hier(&work)?];
    for (i, dtype) in [DType::F32, DType::F16, DType::U8, DType::I8]
        .into_iter()
        .enumerate()
    {
        let seed = 100 + i as u64;
        let metric = [Metric::L2Squared, Metric::Cosine, Metric::InnerProduct][i % 3];
        let t = dtype.to_string();
        indexes.push(build(
            &work,
            &format!("knn-exact-{t}"),
            Algorithm::exact(4),
            metric,
            dataset(dtype, 24, 4, seed)?,
        )?);
        indexes.push(build(
            &work,
            &format!("fixed-rnndescent-{t}"),
            Algorithm::RnnDescent(rnn.clone()),
            metric,
            dataset(dtype, 24, 4, seed)?,
        )?);
        if dtype == DType::F32 {
            indexes.push(build(
                &work,
                "knn-nndescent-f32",
                Algorithm::nndescent(3),
                metric,
                dataset(dtype, 24, 4, seed)?,
            )?);
            indexes.push(build(
                &work,
                "fixed-cagra-f32",
                Algorithm::Cagra(cagra.clone()),
                metric,
                dataset(dtype, 24, 4, seed)?,
            )?);
            indexes.push(build(
                &work,
                "hier-ggnn-f32",
                Algorithm::Ggnn(ggnn.clone()),
                metric,
                dataset(dtype, 80, 4, seed)?,
            )?);
        }
    }
    let (graphs, inputs, vector_files) =
        (out.join("graph"), out.join("index"), out.join("vectors"));
    for d in [&graphs, &inputs, &vector_files] {
        std::fs::create_dir_all(d)?;
    }
    for dir in &indexes {
        let name = dir
            .file_name()
            .and_then(|s| s.to_str())
            .ok_or("index folder name")?;
        let graph = std::fs::read(dir.join("graph.wgraph"))?;
        let data_file = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.file_stem().is_some_and(|s| s == "data"))
            .ok_or("no data file")?;
        let vectors = std::fs::read(&data_file)?;
        std::fs::write(graphs.join(format!("{name}.wgraph")), &graph)?;
        let mut input = (graph.len() as u32).to_le_bytes().to_vec();
        input.extend_from_slice(&graph);
        input.extend_from_slice(&vectors);
        std::fs::write(inputs.join(format!("{name}.bin")), &input)?;
        let ext = data_file
            .extension()
            .and_then(|s| s.to_str())
            .unwrap_or("bin");
        std::fs::write(vector_files.join(format!("{name}.{ext}")), &vectors)?;
        println!(
            "{name}: graph {} B, {} {} B",
            graph.len(),
            data_file
                .file_name()
                .and_then(|s| s.to_str())
                .unwrap_or("?"),
            vectors.len()
        );
    }
    std::fs::remove_dir_all(&work)?;
    Ok(())
}

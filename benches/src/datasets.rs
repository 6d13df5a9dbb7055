//! Benchmark datasets: conversion of the downloaded sources into one prepared folder per
//! dataset (`base.*`, `queries.*`, `gt.ibin`, `meta.json`), which the runner and the peers
//! script read alike (identical data, identical ground truth).
//!
//! Sources: the synthetic presets of weft-io, any vector file (with ground truth when given),
//! GloVe from a `.npy` (Fortran order is read as such by weft-io; a seeded random hold-out
//! becomes the queries), Fashion-MNIST from IDX files.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};
use weft::{AnyDataset, BuildCtx, Dataset, Element, Metric, Registry};
use weft_core::rng::SplitMix64;
use weft_io::{Format, IdMatrix};

/// Neighbours per query kept in a prepared ground truth (recall@100 needs 100).
pub const GT_K: usize = 100;

/// `meta.json` of a prepared dataset folder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// Dataset name.
    pub name: String,
    /// Where it came from.
    pub source: String,
    /// Metric name (`l2`, `ip`, `cosine`).
    pub metric: String,
    /// Element type name.
    pub dtype: String,
    /// Base rows.
    pub n: usize,
    /// Query rows.
    pub nq: usize,
    /// Dimension.
    pub dim: usize,
    /// Base vectors file, relative to the folder.
    pub base: String,
    /// Queries file, relative to the folder.
    pub queries: String,
    /// Ground-truth ids (`nq x gt_k`, ibin), relative to the folder.
    pub gt: String,
    /// Neighbours per query in the ground truth.
    pub gt_k: usize,
    /// How the ground truth was obtained (`weft exact (gpu)`, `given`, ...).
    pub gt_source: String,
}

/// A prepared dataset, loaded.
pub struct Prepared {
    /// Its description.
    pub meta: Meta,
    /// The metric.
    pub metric: Metric,
    /// Base vectors.
    pub base: AnyDataset,
    /// Queries.
    pub queries: AnyDataset,
    /// Ground-truth ids.
    pub gt: IdMatrix,
}

impl Prepared {
    /// Loads the folder written by [`write_prepared`].
    pub fn load(dir: &Path) -> Result<Self> {
        let meta: Meta = serde_json::from_slice(
            &std::fs::read(dir.join("meta.json"))
                .with_context(|| format!("{} is not a prepared dataset", dir.display()))?,
        )?;
        let metric = Metric::from_name(&meta.metric).context("unknown metric in meta.json")?;
        let opts = weft_io::ReadOptions::new();
        let base = weft_io::read_any(dir.join(&meta.base), &opts)?;
        let queries = weft_io::read_any(dir.join(&meta.queries), &opts)?;
        let gt = weft_io::read_ids(dir.join(&meta.gt), None)?;
        ensure!(
            gt.rows() == queries.rows(),
            "ground truth has {} rows for {} queries",
            gt.rows(),
            queries.rows()
        );
        Ok(Prepared {
            meta,
            metric,
            base,
            queries,
            gt,
        })
    }
}

/// The file extension weft-io writes `dtype` data with (`fbin`, `u8bin`, ...).
fn extension(data: &AnyDataset) -> &'static str {
    match data {
        AnyDataset::F32(_) => "fbin",
        AnyDataset::U8(_) => "u8bin",
        AnyDataset::I8(_) => "i8bin",
        AnyDataset::F16(_) => "npy",
    }
}

/// A set to prepare: its name and where it came from, the metric, the vectors and, when the
/// source has it, the ground truth.
pub struct SetToPrepare<'a> {
    /// The set's name (`meta.json`'s `name`).
    pub name: &'a str,
    /// Where the vectors came from, in words.
    pub source: &'a str,
    /// The metric the ground truth is computed under.
    pub metric: Metric,
    /// The base vectors.
    pub base: &'a AnyDataset,
    /// The query vectors (same dimension and element type as the base).
    pub queries: &'a AnyDataset,
    /// The source's ground truth, if it has one.
    pub gt: Option<IdMatrix>,
}

/// Writes `set` as a prepared folder `dir`: the vectors, the ground truth (the set's, or
/// computed by weft's exact search, on the GPU when `registry` has one) and `meta.json`.
/// Returns the metadata.
pub fn write_prepared(dir: &Path, set: SetToPrepare<'_>, registry: &Registry) -> Result<Meta> {
    let SetToPrepare {
        name,
        source,
        metric,
        base,
        queries,
        gt,
    } = set;
    ensure!(
        base.dim() == queries.dim(),
        "base and queries differ in dimension"
    );
    ensure!(
        base.dtype() == queries.dtype(),
        "base and queries differ in element type"
    );
    std::fs::create_dir_all(dir)?;
    let ext = extension(base);
    let (base_file, query_file) = (format!("base.{ext}"), format!("queries.{ext}"));
    weft_io::write_any(dir.join(&base_file), base, None)?;
    weft_io::write_any(dir.join(&query_file), queries, None)?;
    let (gt, gt_source) = match gt {
        Some(g) => {
            ensure!(
                g.rows() == queries.rows(),
                "given ground truth has {} rows for {} queries",
                g.rows(),
                queries.rows()
            );
            (g, "given".to_string())
        }
        None => {
            let k = GT_K.min(base.rows());
            let start = std::time::Instant::now();
            let (nb, backend) =
                registry.exact_search(base, queries, metric, k, None, &BuildCtx::new(0))?;
            let ids: Vec<u32> = (0..nb.rows())
                .flat_map(|q| nb.row_ids(q).to_vec())
                .collect();
            eprintln!(
                "ground truth of {name}: {} queries x {k} by weft exact ({}) in {:.1} s",
                queries.rows(),
                backend.name(),
                start.elapsed().as_secs_f64()
            );
            (
                IdMatrix::new(ids, nb.rows(), k)?,
                format!("weft exact ({})", backend.name()),
            )
        }
    };
    weft_io::write_ids(dir.join("gt.ibin"), &gt, Some(Format::Ibin))?;
    let meta = Meta {
        name: name.into(),
        source: source.into(),
        metric: metric.name().into(),
        dtype: base.dtype().name().into(),
        n: base.rows(),
        nq: queries.rows(),
        dim: base.dim(),
        base: base_file,
        queries: query_file,
        gt: "gt.ibin".into(),
        gt_k: gt.cols(),
        gt_source,
    };
    // meta.json last: its presence marks a complete folder.
    std::fs::write(dir.join("meta.json"), serde_json::to_vec_pretty(&meta)?)?;
    Ok(meta)
}

/// Whether `dir` holds a complete prepared dataset.
pub fn is_prepared(dir: &Path) -> bool {
    dir.join("meta.json").exists()
}

/// An IDX array (the MNIST file format): dimensions and unsigned-byte payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Idx {
    /// Dimension sizes, outermost first.
    pub dims: Vec<usize>,
    /// Row-major payload.
    pub data: Vec<u8>,
}

/// Parses an uncompressed IDX file of unsigned bytes (type code 0x08): magic `0 0 8 ndim`,
/// `ndim` big-endian u32 sizes, then the payload.
pub fn parse_idx(bytes: &[u8]) -> Result<Idx> {
    ensure!(bytes.len() >= 4, "IDX: file shorter than its magic number");
    ensure!(
        bytes[0] == 0 && bytes[1] == 0,
        "IDX: bad magic {:02x}{:02x} (a gzip file? decompress it first)",
        bytes[0],
        bytes[1]
    );
    if bytes[2] != 0x08 {
        bail!(
            "IDX: element type 0x{:02x} is not unsigned byte (0x08)",
            bytes[2]
        );
    }
    let ndim = bytes[3] as usize;
    ensure!(ndim >= 1, "IDX: zero dimensions");
    let header = 4 + 4 * ndim;
    ensure!(bytes.len() >= header, "IDX: truncated header");
    let dims: Vec<usize> = (0..ndim)
        .map(|i| {
            let o = 4 + 4 * i;
            u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
        })
        .collect();
    let len = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .context("IDX: size overflows")?;
    ensure!(
        bytes.len() - header == len,
        "IDX: payload is {} bytes, dimensions {:?} need {len}",
        bytes.len() - header,
        dims
    );
    Ok(Idx {
        dims,
        data: bytes[header..].to_vec(),
    })
}

/// IDX images (`n x rows x cols`, or any `n x ...`) as `n` flattened u8 vectors.
pub fn idx_to_dataset(idx: Idx) -> Result<Dataset<u8>> {
    ensure!(
        idx.dims.len() >= 2,
        "IDX: vectors need at least 2 dimensions"
    );
    let n = idx.dims[0];
    let dim: usize = idx.dims[1..].iter().product();
    Ok(Dataset::from_vec(idx.data, n, dim)?)
}

/// Reads an IDX image file into vectors.
pub fn read_idx_images(path: &Path) -> Result<Dataset<u8>> {
    let bytes = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    idx_to_dataset(parse_idx(&bytes).with_context(|| path.display().to_string())?)
}

/// A seeded choice of `nq` distinct rows out of `n` (ascending), the queries of a hold-out split.
pub fn holdout_rows(n: usize, nq: usize, seed: u64) -> Result<Vec<usize>> {
    ensure!(nq < n, "cannot hold out {nq} of {n} rows");
    // Partial Fisher-Yates on an index vector.
    let mut idx: Vec<usize> = (0..n).collect();
    let mut rng = SplitMix64::new(seed);
    for i in 0..nq {
        let j = i + (rng.next_u64() % (n - i) as u64) as usize;
        idx.swap(i, j);
    }
    let mut q = idx[..nq].to_vec();
    q.sort_unstable();
    Ok(q)
}

/// Splits `data` into (base, queries): the `query_rows` (ascending, distinct) become the
/// queries, the rest the base, both in their original order.
pub fn split_rows<T: Element>(
    data: &Dataset<T>,
    query_rows: &[usize],
) -> Result<(Dataset<T>, Dataset<T>)> {
    let dim = data.dim();
    let mut is_query = vec![false; data.rows()];
    for &r in query_rows {
        ensure!(r < data.rows(), "query row {r} out of range");
        ensure!(!is_query[r], "query row {r} chosen twice");
        is_query[r] = true;
    }
    let mut base = Vec::with_capacity((data.rows() - query_rows.len()) * dim);
    let mut queries = Vec::with_capacity(query_rows.len() * dim);
    for (r, &q) in is_query.iter().enumerate() {
        if q {
            queries.extend_from_slice(data.row(r));
        } else {
            base.extend_from_slice(data.row(r));
        }
    }
    Ok((
        Dataset::from_vec(base, data.rows() - query_rows.len(), dim)?,
        Dataset::from_vec(queries, query_rows.len(), dim)?,
    ))
}

/// [`holdout_rows`] then [`split_rows`] on a dataset of any element type: (base, queries).
pub fn holdout_any(data: &AnyDataset, nq: usize, seed: u64) -> Result<(AnyDataset, AnyDataset)> {
    let q = holdout_rows(data.rows(), nq, seed)?;
    macro_rules! split {
        ($d:expr) => {{
            let (b, q) = split_rows($d, &q)?;
            (AnyDataset::from_typed(b), AnyDataset::from_typed(q))
        }};
    }
    Ok(match data {
        AnyDataset::F32(d) => split!(d),
        AnyDataset::F16(d) => split!(d),
        AnyDataset::U8(d) => split!(d),
        AnyDataset::I8(d) => split!(d),
    })
}

/// The first `rows` rows of `data` (all when it has fewer).
pub fn head<T: Element>(data: &Dataset<T>, rows: usize) -> Result<Dataset<T>> {
    let rows = rows.min(data.rows());
    Ok(Dataset::from_vec(
        data.as_slice()[..rows * data.dim()].to_vec(),
        rows,
        data.dim(),
    )?)
}

/// GloVe embeddings (`path`: a 2-D f32 `.npy`, any order) split into base and a seeded
/// hold-out of `nq` queries; `normalise` scales every row to unit norm (for angular search by
/// inner product); `max_base` keeps only the first base rows (a subset for quick runs).
pub fn glove_split(
    path: &Path,
    nq: usize,
    normalise: bool,
    max_base: Option<usize>,
    seed: u64,
) -> Result<(Dataset<f32>, Dataset<f32>)> {
    let mut all: Dataset<f32> = weft_io::read(path, &weft_io::ReadOptions::new().with_mmap(false))
        .with_context(|| format!("read {}", path.display()))?;
    if normalise {
        all.normalize_rows();
    }
    let q = holdout_rows(all.rows(), nq, seed)?;
    let (base, queries) = split_rows(&all, &q)?;
    let base = match max_base {
        Some(m) => head(&base, m)?,
        None => base,
    };
    Ok((base, queries))
}

/// Folder of the prepared dataset `name` under `cache`.
pub fn prepared_dir(cache: &Path, name: &str) -> PathBuf {
    cache.join("prepared").join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx_bytes(dims: &[u32], payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0, 0, 8, dims.len() as u8];
        for d in dims {
            b.extend_from_slice(&d.to_be_bytes());
        }
        b.extend_from_slice(payload);
        b
    }

    #[test]
    fn idx_images_parse_and_flatten() {
        let payload: Vec<u8> = (0..2 * 3 * 2).map(|i| i as u8).collect();
        let idx = parse_idx(&idx_bytes(&[2, 3, 2], &payload)).unwrap();
        assert_eq!(idx.dims, vec![2, 3, 2]);
        let d = idx_to_dataset(idx).unwrap();
        assert_eq!((d.rows(), d.dim()), (2, 6));
        assert_eq!(d.row(1), &[6, 7, 8, 9, 10, 11]);
    }

    #[test]
    fn bad_idx_is_refused_with_a_reason() {
        assert!(
            parse_idx(&[0x1f, 0x8b, 8, 0])
                .unwrap_err()
                .to_string()
                .contains("gzip")
        );
        let mut wrong_type = idx_bytes(&[1, 1], &[0]);
        wrong_type[2] = 0x0d;
        assert!(parse_idx(&wrong_type).is_err());
        assert!(parse_idx(&idx_bytes(&[2, 2], &[0; 3])).is_err()); // short payload
        assert!(parse_idx(&[0, 0, 8, 2, 0, 0]).is_err()); // truncated header
        // Labels (1-D) parse but are not vectors.
        let labels = parse_idx(&idx_bytes(&[3], &[1, 2, 3])).unwrap();
        assert!(idx_to_dataset(labels).is_err());
    }

    #[test]
    fn holdout_is_seeded_distinct_and_split_keeps_order() {
        let a = holdout_rows(100, 10, 7).unwrap();
        assert_eq!(a, holdout_rows(100, 10, 7).unwrap());
        assert_ne!(a, holdout_rows(100, 10, 8).unwrap());
        let mut d = a.clone();
        d.dedup();
        assert_eq!(d.len(), 10);
        assert!(holdout_rows(5, 5, 0).is_err());
        let data = Dataset::from_fn(6, 2, |r, c| (10 * r + c) as f32).unwrap();
        let (b, q) = split_rows(&data, &[1, 4]).unwrap();
        assert_eq!(q.as_slice(), &[10.0, 11.0, 40.0, 41.0]);
        assert_eq!(b.rows(), 4);
        assert_eq!(b.row(1), &[20.0, 21.0]);
        assert!(split_rows(&data, &[1, 1]).is_err());
    }

    #[test]
    fn glove_npy_in_fortran_order_is_converted() {
        // A 6 x 2 f32 array stored in Fortran (column-major) order, like the GloVe wheel's.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("emb.npy");
        let rows: Vec<[f32; 2]> = (0..6).map(|r| [r as f32 + 1.0, 2.0 * r as f32]).collect();
        let mut header = "{'descr': '<f4', 'fortran_order': True, 'shape': (6, 2), }".to_string();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        for c in 0..2 {
            for r in &rows {
                bytes.extend_from_slice(&r[c].to_le_bytes());
            }
        }
        std::fs::write(&path, bytes).unwrap();
        let (base, queries) = glove_split(&path, 2, false, None, 3).unwrap();
        assert_eq!((base.rows(), queries.rows(), base.dim()), (4, 2, 2));
        let held = holdout_rows(6, 2, 3).unwrap();
        assert_eq!(queries.row(0), &rows[held[0]]);
        let (nb, nq) = glove_split(&path, 2, true, Some(3), 3).unwrap();
        assert_eq!(nb.rows(), 3);
        for r in nb.view().iter().chain(nq.view().iter()) {
            let norm: f32 = r.iter().map(|x| x * x).sum();
            assert!((norm - 1.0).abs() < 1e-5);
        }
    }

    #[test]
    fn prepared_folder_round_trips_with_exact_ground_truth() {
        let dir = tempfile::tempdir().unwrap();
        let base = Dataset::from_fn(50, 3, |r, c| ((r * 7 + c * 3) % 11) as f32).unwrap();
        let queries = head(&base, 4).unwrap();
        let reg = Registry::with_gpu(weft::GpuStatus::Unavailable("test".into()));
        let (base_any, queries_any) = (
            AnyDataset::from_typed(base.clone()),
            AnyDataset::from_typed(queries),
        );
        let set = SetToPrepare {
            name: "tiny",
            source: "test",
            metric: Metric::L2Squared,
            base: &base_any,
            queries: &queries_any,
            gt: None,
        };
        let meta = write_prepared(dir.path(), set, &reg).unwrap();
        assert_eq!((meta.n, meta.nq, meta.gt_k), (50, 4, 50));
        assert!(is_prepared(dir.path()));
        let p = Prepared::load(dir.path()).unwrap();
        assert_eq!(p.gt.rows(), 4);
        // Query i is base row i: its own row is at distance 0, first (ties broken by id).
        for q in 0..4 {
            let d0 = Metric::L2Squared.distance(base.row(q), base.row(p.gt.row(q)[0] as usize));
            assert_eq!(d0, 0.0);
        }
    }
}

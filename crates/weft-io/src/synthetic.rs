//! Seeded synthetic datasets shaped like common ANN benchmarks.
//!
//! # The generative model
//!
//! Real embedding sets are neither uniform nor isotropic: they concentrate near a
//! low-dimensional, clustered subset of their space, which is what makes graph search work and
//! what makes recall curves bend the way they do. A [`SyntheticSpec`] describes such a set:
//!
//! 1. **Latent clusters.** `clusters` centres `mu_k` are drawn from `N(0, I)` in a latent space
//!    of `intrinsic_dim` (`m`) dimensions. Each cluster has a weight `w_k ∝ exp(0.5 g)` and a
//!    scale `s_k = cluster_spread * exp(scale_variation * g)` (`g ~ N(0, 1)` each), so clusters
//!    differ in size and in tightness.
//! 2. **A point** picks a cluster `k` with probability `w_k` and sets
//!    `z = mu_k + s_k * e`, `e ~ N(0, I_m)`.
//! 3. **Embedding.** A fixed random linear map `A` (`m x dim`) takes `z` to the full dimension:
//!    `x = A^T z`. Row `j` of `A` has entries `N(0, lambda_j / sum(lambda))` with a decaying
//!    spectrum `lambda_j = (j + 1)^-0.7`, so a few latent directions dominate (as the PCA
//!    spectrum of real data does) and each output coordinate has variance about
//!    `1 + cluster_spread^2`.
//! 4. **Noise.** Isotropic noise `noise * N(0, I_dim)` is added in the full dimension.
//! 5. **Shaping** ([`Shaping`]) maps values into the range of the imitated data: SIFT-like
//!    non-negative integers, GIST-like small non-negative values, or unit-norm rows
//!    (DEEP, GloVe).
//!
//! **Separated clusters** ([`SyntheticSpec::separation`], the `clustered` preset) change step 1:
//! the centres `c_k` are drawn from `N(0, I_dim)` in the full dimension and scaled so that the
//! two closest are `separation` cluster diameters apart, and a point is
//! `x = c_k + A^T (s_k e) + noise`. A cluster's diameter is twice the root-mean-square distance
//! of its points from its centre, `2 sqrt(s_k^2 |A|_F^2 + noise^2 dim)`, and the largest
//! cluster's diameter is the unit, so no two centres are closer than `separation` diameters.
//! Above 1 the clusters do not overlap (balls of one diameter around the centres are
//! disjoint); with the default 4 even a cluster's farthest points lie far nearer their own
//! centre than any other, and the exact k-NN graph falls apart into one component per cluster
//! (for clusters of more than `k` points): the case where a graph search that starts in the
//! wrong cluster cannot reach the right one.
//!
//! Base vectors and queries are independent draws from the same distribution (queries are not
//! base rows). Row `i` of split `s` is drawn from its own generator
//! `rng_for(hash3(seed, s, ..), i)` ([`weft_core::rng`]), so any row range can be generated on
//! its own and the output is identical byte for byte whatever the number of threads.
//!
//! # Presets
//!
//! | preset | dim | intrinsic dim | clusters | spread | noise | shaping | metric |
//! | --- | --- | --- | --- | --- | --- | --- | --- |
//! | `sift` | 128 | 16 | 64 | 0.55 | 0.3 | integers in `[0, 255]`, mean ~21, ~37% zeros | L2 |
//! | `deep` | 96 | 14 | 64 | 1.0 | 0.7 | unit norm | L2 |
//! | `gist` | 960 | 20 | 48 | 0.9 | 0.8 | non-negative, mostly below 0.5 | L2 |
//! | `glove` | 100 | 20 | 128 | 1.2 | 1.0 | unit norm | cosine (angular) |
//! | `minilm` | 384 | 32 | 256 | 1.0 | 0.8 | unit norm | L2 |
//! | `clustered` | 128 | 16 | 100, separation 4 | 1.0 | 0.3 | none | L2 |
//!
//! `clustered` is not shaped like a real set: it is the strongly clustered hard case (a Gaussian
//! mixture whose clusters lie `separation` diameters apart, see above). [`Preset::Clustered`] has
//! the default parameters; [`SyntheticSpec::clustered`] takes others.
//!
//! The noise and spread were tuned so that the ratio of the nearest to the median squared
//! distance (500 queries over 20,000 base vectors) falls in the order of the real sets:
//! about 0.13 for `sift` (the easiest), 0.24 for `deep`, 0.34 for `glove` and 0.39 for `gist`
//! (uniform noise in 128-d gives about 0.64).
//! `minilm` (added later, measured the same way on 5,000 vectors and 60 queries, where the
//! others give 0.16 / 0.27 / 0.38 / 0.47): 0.43, between GloVe and GIST.

use std::ops::Range;

use rand_core::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use weft_core::rng::{Xoshiro256PlusPlus, hash3, rng_for};
use weft_core::{Dataset, Element, Error, Metric, Result};

use crate::write::VectorWriter;

/// Rows generated per parallel task.
const ROWS_PER_TASK: usize = 256;

/// Bytes of `f32` values generated per batch when streaming to a writer.
const BYTES_PER_BATCH: usize = 32 << 20;

/// How generated values are mapped into the range of the imitated data (step 5 of the model).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shaping {
    /// Values are left as generated (roughly zero-mean, unit-variance coordinates).
    Identity,
    /// `clamp(round(scale * x + offset), 0, max)`: non-negative integer-valued floats (SIFT).
    Quantized {
        /// Multiplier.
        scale: f32,
        /// Added after scaling; with `scale` it sets the fraction of zeros.
        offset: f32,
        /// Largest value.
        max: f32,
    },
    /// `max(0, scale * x + offset)`: small non-negative values (GIST).
    NonNegative {
        /// Multiplier.
        scale: f32,
        /// Added after scaling.
        offset: f32,
    },
    /// Each row scaled to unit L2 norm (DEEP, GloVe).
    UnitNorm,
}

/// The parameters of a synthetic dataset (see the [module docs](self) for the model).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyntheticSpec {
    /// Elements per vector.
    pub dim: usize,
    /// Dimension of the latent space the clusters live in (typically 8 to 16).
    pub intrinsic_dim: usize,
    /// Number of Gaussian clusters.
    pub clusters: usize,
    /// Standard deviation of the isotropic noise added in the full dimension (the clean signal
    /// has about unit variance per coordinate).
    pub noise: f32,
    /// Average within-cluster standard deviation in the latent space (centres have unit
    /// variance).
    pub cluster_spread: f32,
    /// Standard deviation of the log of the per-cluster scale.
    pub scale_variation: f32,
    /// The final mapping of values.
    pub shaping: Shaping,
    /// The metric the set is meant to be searched with.
    pub metric: Metric,
    /// `Some(s)`: separated clusters (see the [module docs](self)): centres in the full
    /// dimension, the two closest `s` diameters of the largest cluster apart (`s > 1`: the
    /// clusters do not overlap), measured before shaping (keep [`Shaping::Identity`] for the
    /// distances to hold). `None` (the benchmark-shaped presets): latent centres drawn from
    /// `N(0, I)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub separation: Option<f32>,
}

impl SyntheticSpec {
    /// Clusters of the `clustered` preset.
    pub const CLUSTERED_CLUSTERS: usize = 100;
    /// Separation of the `clustered` preset (in cluster diameters).
    pub const CLUSTERED_SEPARATION: f32 = 4.0;
    /// The most clusters a spec with [`separation`](Self::separation) may have: placing the
    /// centres compares every pair of them.
    pub const MAX_SEPARATED_CLUSTERS: usize = 16_384;

    /// The strongly clustered set of the `clustered` preset with `clusters` clusters whose
    /// closest centres are `separation` cluster diameters apart: 128-d, 16 latent dimensions,
    /// unshaped, L2. [`validate`](Self::validate) checks the values (`clusters` from 1 to
    /// [`MAX_SEPARATED_CLUSTERS`](Self::MAX_SEPARATED_CLUSTERS), `separation` finite and
    /// positive).
    pub const fn clustered(clusters: usize, separation: f32) -> Self {
        SyntheticSpec {
            dim: 128,
            intrinsic_dim: 16,
            clusters,
            noise: 0.3,
            cluster_spread: 1.0,
            scale_variation: 0.25,
            shaping: Shaping::Identity,
            metric: Metric::L2Squared,
            separation: Some(separation),
        }
    }

    /// A generic spec: `dim`-dimensional vectors on `clusters` clusters in an
    /// `intrinsic_dim`-dimensional latent space, with isotropic `noise`, unshaped, for L2.
    pub fn new(dim: usize, intrinsic_dim: usize, clusters: usize, noise: f32) -> Self {
        SyntheticSpec {
            dim,
            intrinsic_dim,
            clusters,
            noise,
            cluster_spread: 0.5,
            scale_variation: 0.3,
            shaping: Shaping::Identity,
            metric: Metric::L2Squared,
            separation: None,
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        if self.dim == 0 {
            return Err(Error::invalid_param("dim", "must be at least 1"));
        }
        if self.intrinsic_dim == 0 {
            return Err(Error::invalid_param("intrinsic_dim", "must be at least 1"));
        }
        if self.clusters == 0 {
            return Err(Error::invalid_param("clusters", "must be at least 1"));
        }
        for (name, value) in [
            ("noise", self.noise),
            ("cluster_spread", self.cluster_spread),
            ("scale_variation", self.scale_variation),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(Error::invalid_param(
                    name,
                    format!("must be finite and non-negative, got {value}"),
                ));
            }
        }
        let shaping_ok = match self.shaping {
            Shaping::Identity | Shaping::UnitNorm => true,
            Shaping::Quantized { scale, offset, max } => {
                scale.is_finite() && offset.is_finite() && max.is_finite() && max >= 0.0
            }
            Shaping::NonNegative { scale, offset } => scale.is_finite() && offset.is_finite(),
        };
        if !shaping_ok {
            return Err(Error::invalid_param(
                "shaping",
                format!("parameters must be finite: {:?}", self.shaping),
            ));
        }
        if let Some(separation) = self.separation {
            if !(separation.is_finite() && separation > 0.0) {
                return Err(Error::invalid_param(
                    "separation",
                    format!("must be finite and positive, got {separation}"),
                ));
            }
            if self.clusters > Self::MAX_SEPARATED_CLUSTERS {
                return Err(Error::invalid_param(
                    "clusters",
                    format!(
                        "at most {} with separated clusters, got {}",
                        Self::MAX_SEPARATED_CLUSTERS,
                        self.clusters
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Draws the model (centres, weights, scales, embedding) for `seed`.
    pub fn generator(&self, seed: u64) -> Result<Generator> {
        Generator::new(*self, seed)
    }
}

/// Benchmark-shaped presets (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// SIFT-like: 128-d non-negative integer values in `[0, 255]`, L2.
    Sift,
    /// DEEP-like: 96-d unit-norm rows, L2.
    Deep,
    /// GIST-like: 960-d small non-negative values, L2.
    Gist,
    /// GloVe-like: 100-d unit-norm rows, cosine (angular).
    Glove,
    /// Sentence-embedding-like (all-MiniLM-L6-v2's shape): 384-d unit-norm rows, L2 (on unit
    /// vectors the same order as cosine).
    Minilm,
    /// Strongly clustered: 128-d, 100 Gaussian clusters 4 diameters apart, L2 (the defaults of
    /// [`SyntheticSpec::clustered`]).
    Clustered,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 6] = [
        Preset::Sift,
        Preset::Deep,
        Preset::Gist,
        Preset::Glove,
        Preset::Minilm,
        Preset::Clustered,
    ];

    /// The preset's name (`sift`, `deep`, `gist`, `glove`, `minilm`, `clustered`).
    pub const fn name(self) -> &'static str {
        match self {
            Preset::Sift => "sift",
            Preset::Deep => "deep",
            Preset::Gist => "gist",
            Preset::Glove => "glove",
            Preset::Minilm => "minilm",
            Preset::Clustered => "clustered",
        }
    }

    /// Parses a preset name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        let name = name.to_ascii_lowercase();
        Preset::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The metric the imitated benchmark is searched with.
    pub const fn metric(self) -> Metric {
        match self {
            Preset::Glove => Metric::Cosine,
            _ => Metric::L2Squared,
        }
    }

    /// Elements per vector.
    pub const fn dim(self) -> usize {
        self.spec().dim
    }

    /// The preset's parameters.
    pub const fn spec(self) -> SyntheticSpec {
        match self {
            Preset::Sift => SyntheticSpec {
                dim: 128,
                intrinsic_dim: 16,
                clusters: 64,
                noise: 0.3,
                cluster_spread: 0.55,
                scale_variation: 0.35,
                shaping: Shaping::Quantized {
                    scale: 28.0,
                    offset: 12.0,
                    max: 255.0,
                },
                metric: Metric::L2Squared,
                separation: None,
            },
            Preset::Deep => SyntheticSpec {
                dim: 96,
                intrinsic_dim: 14,
                clusters: 64,
                noise: 0.7,
                cluster_spread: 1.0,
                scale_variation: 0.3,
                shaping: Shaping::UnitNorm,
                metric: Metric::L2Squared,
                separation: None,
            },
            Preset::Gist => SyntheticSpec {
                dim: 960,
                intrinsic_dim: 20,
                clusters: 48,
                noise: 0.8,
                cluster_spread: 0.9,
                scale_variation: 0.3,
                shaping: Shaping::NonNegative {
                    scale: 0.06,
                    offset: 0.07,
                },
                metric: Metric::L2Squared,
                separation: None,
            },
            Preset::Glove => SyntheticSpec {
                dim: 100,
                intrinsic_dim: 20,
                clusters: 128,
                noise: 1.0,
                cluster_spread: 1.2,
                scale_variation: 0.4,
                shaping: Shaping::UnitNorm,
                metric: Metric::Cosine,
                separation: None,
            },
            Preset::Minilm => SyntheticSpec {
                dim: 384,
                intrinsic_dim: 32,
                clusters: 256,
                noise: 0.8,
                cluster_spread: 1.0,
                scale_variation: 0.3,
                shaping: Shaping::UnitNorm,
                metric: Metric::L2Squared,
                separation: None,
            },
            Preset::Clustered => SyntheticSpec::clustered(
                SyntheticSpec::CLUSTERED_CLUSTERS,
                SyntheticSpec::CLUSTERED_SEPARATION,
            ),
        }
    }

    /// The preset's generator for `seed`.
    pub fn generator(self, seed: u64) -> Result<Generator> {
        self.spec().generator(seed)
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Preset {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Preset::from_name(s).ok_or_else(|| {
            Error::invalid_param(
                "preset",
                format!("unknown preset `{s}` (use sift, deep, gist, glove, minilm or clustered)"),
            )
        })
    }
}

/// Which independent stream of draws rows come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Split {
    /// The base (indexed) vectors.
    Base,
    /// The queries: fresh draws from the same distribution.
    Queries,
}

impl Split {
    const fn code(self) -> u64 {
        match self {
            Split::Base => 1,
            Split::Queries => 2,
        }
    }
}

/// Stream tag for the model's own parameters.
const MODEL_STREAM: u64 = 0x6d6f_6465_6c00;
/// Stream tag for row draws.
const ROW_STREAM: u64 = 0x726f_7773_0000;

/// A drawn model: generates any rows of either split, deterministically.
#[derive(Clone)]
pub struct Generator {
    spec: SyntheticSpec,
    seed: u64,
    /// `clusters x intrinsic_dim` latent centres, or `clusters x dim` centres in the full
    /// dimension for separated clusters.
    centers: Vec<f32>,
    /// Per-cluster within-cluster standard deviation.
    scales: Vec<f32>,
    /// Cumulative cluster probabilities (last = 1).
    cumulative: Vec<f64>,
    /// `intrinsic_dim x dim` embedding, row-major (row j maps latent coordinate j).
    embedding: Vec<f32>,
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator")
            .field("spec", &self.spec)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl Generator {
    fn new(spec: SyntheticSpec, seed: u64) -> Result<Self> {
        spec.validate()?;
        let (m, d, k) = (spec.intrinsic_dim, spec.dim, spec.clusters);
        let mut rng = rng_for(seed, hash3(seed, MODEL_STREAM, 0));
        let mut gauss = GaussianSource::default();
        let centre_dim = if spec.separation.is_some() { d } else { m };
        let mut centers = vec![0f32; k * centre_dim];
        gauss.fill(&mut rng, &mut centers);
        let mut scales = Vec::with_capacity(k);
        let mut weights = Vec::with_capacity(k);
        for _ in 0..k {
            scales.push(spec.cluster_spread * (spec.scale_variation * gauss.next(&mut rng)).exp());
            weights.push((0.5 * gauss.next(&mut rng) as f64).exp());
        }
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let mut cumulative: Vec<f64> = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        if let Some(last) = cumulative.last_mut() {
            *last = 1.0;
        }
        let spectrum: Vec<f32> = (0..m).map(|j| ((j + 1) as f32).powf(-0.7)).collect();
        let spectrum_sum: f32 = spectrum.iter().sum();
        let mut embedding = vec![0f32; m * d];
        gauss.fill(&mut rng, &mut embedding);
        for (j, row) in embedding.chunks_exact_mut(d).enumerate() {
            let scale = (spectrum[j] / spectrum_sum).sqrt();
            row.iter_mut().for_each(|v| *v *= scale);
        }
        if let Some(separation) = spec.separation {
            separate(&mut centers, d, &scales, &embedding, spec.noise, separation)?;
        }
        Ok(Generator {
            spec,
            seed,
            centers,
            scales,
            cumulative,
            embedding,
        })
    }

    /// The parameters.
    pub fn spec(&self) -> &SyntheticSpec {
        &self.spec
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Fills `out` (a whole number of rows) with rows `first_row..` of `split`, in parallel.
    /// The values depend only on the seed, the split and the row numbers.
    pub fn fill_rows(&self, split: Split, first_row: u64, out: &mut [f32]) -> Result<()> {
        let d = self.spec.dim;
        if !out.len().is_multiple_of(d) {
            return Err(Error::InvalidInput(format!(
                "{} values are not a whole number of rows of dimension {d}",
                out.len()
            )));
        }
        let split_seed = hash3(self.seed, ROW_STREAM, split.code());
        out.par_chunks_mut(ROWS_PER_TASK * d)
            .enumerate()
            .for_each(|(task, chunk)| {
                let mut latent = vec![0f32; self.spec.intrinsic_dim];
                let task_first = first_row + (task * ROWS_PER_TASK) as u64;
                for (i, row) in chunk.chunks_exact_mut(d).enumerate() {
                    let mut rng = rng_for(split_seed, task_first + i as u64);
                    self.draw_row(&mut rng, &mut latent, row);
                }
            });
        Ok(())
    }

    /// The cluster of row `row` of `split`: the mixture component it was drawn from (for
    /// separated clusters, the label of its cluster).
    pub fn cluster_of(&self, split: Split, row: u64) -> usize {
        let split_seed = hash3(self.seed, ROW_STREAM, split.code());
        self.pick_cluster(&mut rng_for(split_seed, row))
    }

    /// The first draw of a row: its cluster.
    fn pick_cluster(&self, rng: &mut Xoshiro256PlusPlus) -> usize {
        // 53 random bits -> uniform in [0, 1).
        let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        self.cumulative
            .partition_point(|&c| c <= u)
            .min(self.spec.clusters - 1)
    }

    fn draw_row(&self, rng: &mut Xoshiro256PlusPlus, latent: &mut [f32], row: &mut [f32]) {
        let (m, d) = (self.spec.intrinsic_dim, self.spec.dim);
        let mut gauss = GaussianSource::default();
        let cluster = self.pick_cluster(rng);
        gauss.fill(rng, latent);
        let scale = self.scales[cluster];
        let separated = self.spec.separation.is_some();
        if separated {
            latent.iter_mut().for_each(|z| *z *= scale);
        } else {
            let center = &self.centers[cluster * m..(cluster + 1) * m];
            for (z, &c) in latent.iter_mut().zip(center) {
                *z = c + scale * *z;
            }
        }
        // Noise first, then x += z_j * A_j (axpy over the full dimension, vectorisable).
        gauss.fill(rng, row);
        let noise = self.spec.noise;
        row.iter_mut().for_each(|v| *v *= noise);
        for (&z, a) in latent
            .iter()
            .zip(self.embedding.chunks_exact(self.spec.dim))
        {
            for (v, &aj) in row.iter_mut().zip(a) {
                *v += z * aj;
            }
        }
        if separated {
            let center = &self.centers[cluster * d..(cluster + 1) * d];
            row.iter_mut().zip(center).for_each(|(v, &c)| *v += c);
        }
        match self.spec.shaping {
            Shaping::Identity => {}
            Shaping::Quantized { scale, offset, max } => row
                .iter_mut()
                .for_each(|v| *v = (scale * *v + offset).round().clamp(0.0, max)),
            Shaping::NonNegative { scale, offset } => row
                .iter_mut()
                .for_each(|v| *v = (scale * *v + offset).max(0.0)),
            Shaping::UnitNorm => {
                let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
                if norm > 0.0 {
                    row.iter_mut().for_each(|v| *v /= norm);
                }
            }
        }
    }

    /// Rows `rows` of `split` as `T` vectors (converted from `f32` with [`Element::from_f32`]:
    /// rounding and saturating for integer types).
    pub fn generate<T: Element>(&self, split: Split, rows: Range<u64>) -> Result<Dataset<T>> {
        let n = usize::try_from(rows.end.saturating_sub(rows.start))
            .map_err(|_| Error::invalid_param("rows", "too many rows for this machine"))?;
        let len = n
            .checked_mul(self.spec.dim)
            .ok_or_else(|| Error::invalid_param("rows", "rows x dim overflows"))?;
        let mut values = vec![0f32; len];
        self.fill_rows(split, rows.start, &mut values)?;
        // In place for f32 (same layout), a converting copy otherwise.
        let data: Vec<T> = values.into_iter().map(T::from_f32).collect();
        Dataset::from_vec(data, n, self.spec.dim)
    }

    /// The first `n` base vectors.
    pub fn base(&self, n: usize) -> Result<Dataset<f32>> {
        self.generate(Split::Base, 0..n as u64)
    }

    /// The first `n` queries (independent of the base vectors).
    pub fn queries(&self, n: usize) -> Result<Dataset<f32>> {
        self.generate(Split::Queries, 0..n as u64)
    }

    /// Streams the first `n` rows of `split` into `writer` in batches, so sets larger than
    /// memory can be generated. The writer's dimension must be the spec's.
    pub fn write_rows<T: Element>(
        &self,
        split: Split,
        n: u64,
        writer: &mut VectorWriter<T>,
    ) -> Result<()> {
        if writer.dim() != self.spec.dim {
            return Err(Error::dim_mismatch(
                "synthetic rows and the writer",
                self.spec.dim,
                writer.dim(),
            ));
        }
        let rows_per_batch = (BYTES_PER_BATCH / (4 * self.spec.dim)).max(1) as u64;
        let mut start = 0u64;
        while start < n {
            let end = (start + rows_per_batch).min(n);
            let batch = self.generate::<T>(split, start..end)?;
            writer.push_rows(batch.view())?;
            start = end;
        }
        Ok(())
    }
}

/// Scales the full-dimension `centers` (`scales.len()` rows of `d`) so that the two closest are
/// `separation` times the largest cluster diameter apart. A cluster's diameter is twice the
/// root-mean-square distance of its points from its centre: `2 sqrt(s_k^2 |A|_F^2 + noise^2 d)`
/// (the latent draw `s_k e` is isotropic, so `A^T s_k e` has expected squared norm
/// `s_k^2 |A|_F^2`). With one cluster the centre is scaled as if its draw were at the typical
/// distance `sqrt(2 d)` of two such draws.
fn separate(
    centers: &mut [f32],
    d: usize,
    scales: &[f32],
    embedding: &[f32],
    noise: f32,
    separation: f32,
) -> Result<()> {
    let frobenius2: f64 = embedding.iter().map(|&a| (a as f64) * (a as f64)).sum();
    let noise2 = (noise as f64) * (noise as f64) * d as f64;
    let diameter = scales
        .iter()
        .map(|&s| 2.0 * ((s as f64) * (s as f64) * frobenius2 + noise2).sqrt())
        .fold(0.0f64, f64::max);
    // The smallest squared distance between two centres; each pair in a fixed order, so the
    // result does not depend on the number of threads.
    let k = scales.len();
    let closest2 = (0..k)
        .into_par_iter()
        .map(|i| {
            let a = &centers[i * d..(i + 1) * d];
            centers[(i + 1) * d..]
                .chunks_exact(d)
                .map(|b| squared_distance(a, b))
                .fold(f32::INFINITY, f32::min)
        })
        .reduce(|| f32::INFINITY, f32::min);
    let closest = if k < 2 {
        (2.0 * d as f64).sqrt()
    } else {
        (closest2 as f64).sqrt()
    };
    if !(closest > 0.0 && diameter > 0.0) {
        return Err(Error::invalid_param(
            "separation",
            "the clusters have no extent (zero spread and noise) or two centres coincide",
        ));
    }
    let factor = (separation as f64 * diameter / closest) as f32;
    centers.iter_mut().for_each(|c| *c *= factor);
    Ok(())
}

/// Squared L2 distance in a fixed order of operations (eight lanes, then their sum), so the
/// same on every machine whatever its instruction set; the lanes let the compiler vectorise it.
fn squared_distance(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .map(|(x, y)| (x - y) * (x - y))
        .sum();
    for (x, y) in a8.zip(b8) {
        for l in 0..8 {
            let t = x[l] - y[l];
            lanes[l] += t * t;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Standard normal `f32` values by the Box-Muller transform, using both values of each pair.
#[derive(Default)]
struct GaussianSource {
    spare: Option<f32>,
}

impl GaussianSource {
    fn pair(rng: &mut Xoshiro256PlusPlus) -> (f32, f32) {
        let bits = rng.next_u64();
        // Two 24-bit uniforms; u1 is in (0, 1) so its logarithm is finite.
        let u1 = (((bits >> 40) as f32) + 0.5) * (1.0 / (1u32 << 24) as f32);
        let u2 = ((bits >> 8) & 0xff_ffff) as f32 * (1.0 / (1u32 << 24) as f32);
        let r = (-2.0 * u1.ln()).sqrt();
        let (s, c) = (std::f32::consts::TAU * u2).sin_cos();
        (r * c, r * s)
    }

    fn next(&mut self, rng: &mut Xoshiro256PlusPlus) -> f32 {
        if let Some(v) = self.spare.take() {
            return v;
        }
        let (a, b) = Self::pair(rng);
        self.spare = Some(b);
        a
    }

    fn fill(&mut self, rng: &mut Xoshiro256PlusPlus, out: &mut [f32]) {
        let mut i = 0;
        if let Some(v) = self.spare.take()
            && !out.is_empty()
        {
            out[0] = v;
            i = 1;
        }
        while i + 1 < out.len() {
            let (a, b) = Self::pair(rng);
            out[i] = a;
            out[i + 1] = b;
            i += 2;
        }
        if i < out.len() {
            out[i] = self.next(rng);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(f)
    }

    fn dist(a: &[f32], b: &[f32]) -> f32 {
        squared_distance(a, b).sqrt()
    }

    /// Facts about a separated set: (min distance between two centres, max distance of a point
    /// from its own centre, points nearer another centre than their own, k-NN edges between
    /// clusters from points of clusters with more than k points, such points).
    fn structure(g: &Generator, n: usize, k: usize) -> (f32, f32, usize, usize, usize) {
        let d = g.spec.dim;
        let c = g.spec.clusters;
        let data = g.base(n).unwrap();
        let rows: Vec<&[f32]> = data.view().iter().collect();
        let labels: Vec<usize> = (0..n as u64)
            .map(|i| g.cluster_of(Split::Base, i))
            .collect();
        let centre = |j: usize| &g.centers[j * d..(j + 1) * d];
        let mut min_centres = f32::INFINITY;
        for a in 0..c {
            for b in a + 1..c {
                min_centres = min_centres.min(dist(centre(a), centre(b)));
            }
        }
        let mut max_radius = 0f32;
        let mut misassigned = 0;
        for (x, &l) in rows.iter().zip(&labels) {
            let own = dist(x, centre(l));
            max_radius = max_radius.max(own);
            if (0..c).any(|j| j != l && dist(x, centre(j)) <= own) {
                misassigned += 1;
            }
        }
        let mut sizes = vec![0usize; c];
        labels.iter().for_each(|&l| sizes[l] += 1);
        let (mut cross, mut checked) = (0, 0);
        for (i, x) in rows.iter().enumerate() {
            if sizes[labels[i]] <= k {
                continue;
            }
            checked += 1;
            let mut by_distance: Vec<(f32, usize)> = rows
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(j, y)| (squared_distance(x, y), j))
                .collect();
            by_distance.sort_by(|a, b| a.0.total_cmp(&b.0));
            cross += by_distance[..k]
                .iter()
                .filter(|&&(_, j)| labels[j] != labels[i])
                .count();
        }
        (min_centres, max_radius, misassigned, cross, checked)
    }

    #[test]
    fn clustered_rows_do_not_depend_on_threads_or_chunks() {
        let g = Preset::Clustered.generator(7).unwrap();
        let d = g.spec().dim;
        let whole = with_threads(1, || g.base(1000).unwrap());
        let mut pieces = vec![0f32; 1000 * d];
        with_threads(3, || {
            let mut start = 0;
            for end in [1, 257, 700, 1000] {
                g.fill_rows(Split::Base, start as u64, &mut pieces[start * d..end * d])
                    .unwrap();
                start = end;
            }
        });
        assert_eq!(whole.as_slice(), &pieces[..]);
        let again = Preset::Clustered.generator(7).unwrap().base(1000).unwrap();
        assert_eq!(whole.as_slice(), again.as_slice());
        let other = Preset::Clustered.generator(8).unwrap().base(1000).unwrap();
        assert_ne!(whole.as_slice(), other.as_slice());
        // Queries: fresh draws of the same mixture, any range of them alike.
        let queries = g.queries(50).unwrap();
        let tail = g.generate::<f32>(Split::Queries, 20..50).unwrap();
        assert_eq!(tail.as_slice(), &queries.as_slice()[20 * d..]);
        for q in queries.view().iter() {
            assert!(whole.view().iter().all(|b| b != q));
        }
    }

    #[test]
    fn default_clustered_set_falls_apart_into_its_clusters() {
        let g = Preset::Clustered.generator(1).unwrap();
        assert_eq!(g.spec().clusters, 100);
        assert_eq!(g.spec().separation, Some(4.0));
        // The closest centres are 4 diameters of the largest cluster apart.
        let fro2: f64 = g.embedding.iter().map(|&a| (a as f64).powi(2)).sum();
        let noise2 = (g.spec.noise as f64).powi(2) * g.spec.dim as f64;
        let diameter = g
            .scales
            .iter()
            .map(|&s| 2.0 * ((s as f64).powi(2) * fro2 + noise2).sqrt())
            .fold(0.0, f64::max);
        let (min_centres, max_radius, misassigned, cross, checked) = structure(&g, 2000, 10);
        assert!(
            ((min_centres as f64) / (4.0 * diameter) - 1.0).abs() < 1e-4,
            "{min_centres} vs 4 x {diameter}"
        );
        // Even the farthest point of any cluster is far nearer its own centre than another.
        assert!(
            min_centres > 2.0 * max_radius,
            "centres {min_centres} apart, a point {max_radius} from its centre"
        );
        assert_eq!(misassigned, 0);
        // The exact 10-NN lists of every point of a cluster of more than 10 points stay in it.
        assert!(checked > 1500, "{checked}");
        assert_eq!(cross, 0, "10-NN edges between clusters");
        // Every cluster is drawn, none is negligible.
        let mut sizes = [0usize; 100];
        (0..20_000).for_each(|i| sizes[g.cluster_of(Split::Base, i)] += 1);
        assert!(sizes.iter().all(|&s| s >= 20), "{sizes:?}");
    }

    #[test]
    fn overlapping_clusters_share_neighbours() {
        // The same checks fail when the clusters overlap: they tell the cases apart.
        let g = SyntheticSpec::clustered(100, 0.25).generator(1).unwrap();
        let (min_centres, max_radius, misassigned, cross, checked) = structure(&g, 2000, 10);
        assert!(min_centres < max_radius);
        assert!(misassigned > 0);
        assert!(
            cross > checked,
            "{cross} of {checked} x 10 edges between clusters"
        );
    }

    #[test]
    fn clustered_parameters_are_validated() {
        for (clusters, separation) in [
            (0, 4.0),
            (SyntheticSpec::MAX_SEPARATED_CLUSTERS + 1, 4.0),
            (10, 0.0),
            (10, -1.0),
            (10, f32::NAN),
            (10, f32::INFINITY),
        ] {
            let spec = SyntheticSpec::clustered(clusters, separation);
            assert!(
                matches!(spec.generator(1), Err(Error::InvalidParams { .. })),
                "{clusters} {separation}"
            );
        }
        // One cluster, and overlapping clusters, are allowed.
        let one = SyntheticSpec::clustered(1, 4.0).generator(1).unwrap();
        assert!(
            one.base(10)
                .unwrap()
                .as_slice()
                .iter()
                .all(|v| v.is_finite())
        );
        SyntheticSpec::clustered(3, 0.5).generator(1).unwrap();
    }

    #[test]
    fn spec_serialisation_is_stable() {
        let sift = serde_json::to_value(Preset::Sift.spec()).unwrap();
        assert!(sift.get("separation").is_none());
        let back: SyntheticSpec = serde_json::from_value(sift).unwrap();
        assert_eq!(back, Preset::Sift.spec());
        let clustered = serde_json::to_value(Preset::Clustered.spec()).unwrap();
        assert_eq!(clustered["separation"], 4.0);
        assert_eq!(clustered["clusters"], 100);
        let back: SyntheticSpec = serde_json::from_value(clustered).unwrap();
        assert_eq!(back, Preset::Clustered.spec());
        assert_eq!(
            serde_json::to_value(Preset::Clustered).unwrap(),
            "clustered"
        );
        assert_eq!(Preset::from_name("Clustered"), Some(Preset::Clustered));
        assert_eq!(Preset::Clustered.dim(), 128);
        assert_eq!(Preset::Clustered.metric(), Metric::L2Squared);
    }
}

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
//!
//! The noise and spread were tuned so that the ratio of the nearest to the median squared
//! distance (500 queries over 20,000 base vectors) falls in the order of the real sets:
//! about 0.13 for `sift` (the easiest), 0.24 for `deep`, 0.34 for `glove` and 0.39 for `gist`
//! (uniform noise in 128-d gives about 0.64).

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
}

impl SyntheticSpec {
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
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 4] = [Preset::Sift, Preset::Deep, Preset::Gist, Preset::Glove];

    /// The preset's name (`sift`, `deep`, `gist`, `glove`).
    pub const fn name(self) -> &'static str {
        match self {
            Preset::Sift => "sift",
            Preset::Deep => "deep",
            Preset::Gist => "gist",
            Preset::Glove => "glove",
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
            },
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
                format!("unknown preset `{s}` (use sift, deep, gist or glove)"),
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
    /// `clusters x intrinsic_dim` latent centres.
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
        let mut centers = vec![0f32; k * m];
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

    fn draw_row(&self, rng: &mut Xoshiro256PlusPlus, latent: &mut [f32], row: &mut [f32]) {
        let m = self.spec.intrinsic_dim;
        let mut gauss = GaussianSource::default();
        // 53 random bits -> uniform in [0, 1).
        let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let cluster = self
            .cumulative
            .partition_point(|&c| c <= u)
            .min(self.spec.clusters - 1);
        gauss.fill(rng, latent);
        let center = &self.centers[cluster * m..(cluster + 1) * m];
        let scale = self.scales[cluster];
        for (z, &c) in latent.iter_mut().zip(center) {
            *z = c + scale * *z;
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

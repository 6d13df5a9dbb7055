//! # weft-ggnn
//!
//! GGNN hierarchical graph construction (Groh et al., CVPR 2022): a hierarchy of layers with
//! segment sizes from the sizing rule, weighted upward sampling, per-segment brute force at the
//! top, a top-down merge by hierarchical search, symmetric linking with slack `tau_b`, and
//! refinement passes. It produces a `weft_graph::hier::HierGraph`.
//!
//! **Status:** only [`GgnnParams`] exists. The builder (GPU with a CPU reference) is not
//! implemented yet, so `ggnn` is not in weft's registry: asking for it gives a clear "not
//! available yet" error. Defaults follow `shared/algorithms/ggnn.md` §4.1 (SIFT1M: k = 24,
//! s = 32, L = 4, tau_b = 0.5, r = 2).

use serde::{Deserialize, Serialize};
use weft_core::{Error, Params, Result};

/// Parameters of the GGNN construction (shared by its GPU back end and CPU reference).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GgnnParams {
    /// Out-degree `k_build` of every layer (the paper uses 20–96).
    pub k_build: usize,
    /// Segment size `s` (a multiple of 32, above `k_build / 2`; also the number of top-layer
    /// entry points).
    pub segment_size: usize,
    /// Layers `L` of the hierarchy (4 is "ideal for most datasets").
    pub layers: usize,
    /// Slack `tau_b` of the symmetric linking during the build.
    pub tau_build: f32,
    /// Refinement passes `r`.
    pub refinement_iterations: usize,
}

impl Default for GgnnParams {
    fn default() -> Self {
        GgnnParams {
            k_build: 24,
            segment_size: 32,
            layers: 4,
            tau_build: 0.5,
            refinement_iterations: 2,
        }
    }
}

impl Params for GgnnParams {
    fn validate(&self, rows: usize, _dim: usize) -> Result<()> {
        if !(2..=512).contains(&self.k_build) {
            return Err(Error::invalid_param(
                "k_build",
                format!("{} is outside 2..=512", self.k_build),
            ));
        }
        if rows > 0 && self.k_build >= rows {
            return Err(Error::invalid_param(
                "k_build",
                format!(
                    "{} must be below the number of vectors ({rows})",
                    self.k_build
                ),
            ));
        }
        if self.segment_size == 0
            || !self.segment_size.is_multiple_of(32)
            || self.segment_size <= self.k_build / 2
        {
            return Err(Error::invalid_param(
                "segment_size",
                format!(
                    "{} must be a positive multiple of 32 above k_build / 2 = {}",
                    self.segment_size,
                    self.k_build / 2
                ),
            ));
        }
        if self.layers == 0 {
            return Err(Error::invalid_param(
                "layers",
                "the hierarchy needs at least one layer",
            ));
        }
        if !(self.tau_build.is_finite() && self.tau_build >= 0.0) {
            return Err(Error::invalid_param(
                "tau_build",
                format!("{} is not a finite slack >= 0", self.tau_build),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_impossible_values_do_not() {
        GgnnParams::default().validate(1_000_000, 128).unwrap();
        let bad = [
            GgnnParams {
                k_build: 1,
                ..Default::default()
            },
            GgnnParams {
                segment_size: 48,
                ..Default::default()
            },
            GgnnParams {
                segment_size: 0,
                ..Default::default()
            },
            GgnnParams {
                layers: 0,
                ..Default::default()
            },
            GgnnParams {
                tau_build: f32::NAN,
                ..Default::default()
            },
            GgnnParams {
                tau_build: -1.0,
                ..Default::default()
            },
        ];
        for p in bad {
            assert!(
                matches!(p.validate(1_000_000, 128), Err(Error::InvalidParams { .. })),
                "{p:?}"
            );
        }
    }
}

//! # weft-cagra
//!
//! CAGRA graph optimisation (Ootomo et al., ICDE 2024): it turns a k-NN graph of intermediate
//! degree `d_init` into a search graph of fixed out-degree `d` by rank-based reordering
//! (detourable-route counting), reverse-graph construction with an in-degree cap, and a merge of
//! forward and reverse edges. The GPU search over the result lives in `weft-search`.
//!
//! **Status:** only [`CagraParams`] exists. The optimiser (CPU and GPU) is not implemented yet,
//! so `cagra` is not in weft's registry: asking for it gives a clear "not available yet" error.
//! Parameter choices follow `shared/algorithms/cagra.md` §3.

use serde::{Deserialize, Serialize};
use weft_core::{Error, Params, Result};

/// How the intermediate k-NN graph is built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KnnSource {
    /// NN-Descent (GNND on the GPU), the paper's choice.
    #[default]
    NnDescent,
    /// Exact brute force (small sets, tests).
    Exact,
}

/// Parameters of the CAGRA graph optimisation (shared by its CPU and GPU back ends).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CagraParams {
    /// Output out-degree `d` of the search graph (paper: 32–80; a multiple of 16 suits the GPU
    /// search).
    pub graph_degree: usize,
    /// Degree `d_init` of the k-NN graph that is optimised (2–3 x `graph_degree`).
    pub intermediate_degree: usize,
    /// How the k-NN graph is built.
    pub knn: KnnSource,
}

impl Default for CagraParams {
    fn default() -> Self {
        CagraParams {
            graph_degree: 64,
            intermediate_degree: 128,
            knn: KnnSource::NnDescent,
        }
    }
}

impl Params for CagraParams {
    fn validate(&self, rows: usize, _dim: usize) -> Result<()> {
        if self.graph_degree == 0 {
            return Err(Error::invalid_param("graph_degree", "must be at least 1"));
        }
        if self.intermediate_degree < self.graph_degree {
            return Err(Error::invalid_param(
                "intermediate_degree",
                format!(
                    "{} is below graph_degree {}: the optimiser prunes an intermediate graph down to the output degree",
                    self.intermediate_degree, self.graph_degree
                ),
            ));
        }
        if rows > 0 && self.intermediate_degree >= rows {
            return Err(Error::invalid_param(
                "intermediate_degree",
                format!(
                    "{} must be below the number of vectors ({rows})",
                    self.intermediate_degree
                ),
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
        CagraParams::default().validate(10_000, 128).unwrap();
        let bad = [
            CagraParams {
                graph_degree: 0,
                ..Default::default()
            },
            CagraParams {
                intermediate_degree: 32,
                ..Default::default()
            },
        ];
        for p in bad {
            assert!(matches!(
                p.validate(10_000, 128),
                Err(Error::InvalidParams { .. })
            ));
        }
        assert!(CagraParams::default().validate(100, 8).is_err());
    }
}

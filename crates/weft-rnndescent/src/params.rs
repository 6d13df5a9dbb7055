//! The parameters of RNN-Descent, shared with GRNND on the GPU.

use serde::{Deserialize, Serialize};
use weft_core::{Error, Params, Result};

/// In which order GRNND's update kernel visits the candidate pairs of a vertex (paper Fig. 7).
/// **GPU only**: the CPU builder always visits candidates in ascending distance, as the
/// reference RNN-Descent code does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdateOrder {
    /// A seeded random permutation of the pairs ("disordered" propagation; the paper's choice).
    #[default]
    Random,
    /// Ascending distance from the vertex.
    Ascending,
    /// Descending distance from the vertex.
    Descending,
}

/// Which `ceil(rho * k)` neighbours of a vertex GRNND's reverse-edge sampling uses (digest §7
/// A11). **GPU only**: the CPU builder adds every reverse edge under the in-degree cap `r`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReverseSampling {
    /// The closest ones (after sorting the pool).
    #[default]
    Closest,
    /// The first ones in pool order (effectively random).
    PoolOrder,
}

/// Parameters of RNN-Descent (Ono & Matsui, ACM MM 2023) and of its GPU version GRNND.
///
/// Defaults: `s = 20, r = 64, t1 = 3, t2 = 10, degree = 32`, strict pruning, truncation to `r`
/// inside updates, new/old flags on, no final reverse edges, rows filled up to 16 entries from
/// pruned candidates; GPU-only: `rho = 0.6`, random
/// update order, closest reverse sampling, every pair. The reference code uses `r = 96, t1 = 4,
/// t2 = 15` and no truncation. On a 100k x 128 SIFT-like set the defaults here give a graph that
/// needs about as few distance evaluations per query at recall@10 = 0.95 (~535 vs ~525 for
/// `r = 96`, no truncation, `t1 = 3, t2 = 8`; both measured before rows were filled, as with
/// `fill_fraction = 0`) for under half the build work (96 M vs 210 M distance evaluations):
/// truncation stops hub vertices, whose lists otherwise grow to over a thousand candidates, from
/// costing quadratic time.
///
/// The built graph keeps, for every vertex, the `degree` closest entries of its final
/// (distance-sorted, RNG-pruned) list, filled up to [`fill_len`](Self::fill_len) entries from
/// pruned candidates (on the CPU and in GRNND on the GPU): its out-degree is at most `degree`
/// (the reference code's search-time cap `K`), rows with fewer entries are padded with
/// `INVALID`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RnnDescentParams {
    /// `S`: random neighbours per vertex at the start (at least 1, at most `r`). A vertex of a
    /// set of `n` points gets `min(s, n - 1)` distinct ones.
    pub s: usize,
    /// `R`: the capacity of a neighbour list: the in-degree cap and the out-degree cap of the
    /// reverse-edge step (at least 1).
    pub r: usize,
    /// `T1`: outer iterations (at least 1); reverse edges are added between them.
    pub t1: usize,
    /// `T2`: neighbour-update rounds per outer iteration (at least 1).
    pub t2: usize,
    /// `K`: the out-degree of the exported search graph (`1 <= degree <= r`).
    pub degree: usize,
    /// Prune with the strict rule `d(n, n') < d(v, n)` (the reference code, digest §7 A1);
    /// `false` prunes on `<=`, which also removes one of two equidistant candidates.
    pub strict_prune: bool,
    /// Keep only the `r` closest candidates of a list before each update (GRNND Alg. 2 line 4,
    /// digest §7 A2; on by default); the reference code does not.
    pub truncate_updates: bool,
    /// Skip candidate pairs that are both "old" (already compared in an earlier round), the
    /// NN-Descent trick of the reference code (digest §7 A3). GRNND's paper-faithful GPU mode has
    /// them off.
    pub new_old_flags: bool,
    /// Add reverse edges once more after the last outer iteration (not in the reference code,
    /// whose last iteration ends with pruning): denser, better connected search graphs.
    pub final_reverse_edges: bool,
    /// A fraction in `[0, 1]` of `degree`. An exported row with fewer than
    /// [`fill_len`](Self::fill_len) ` = ceil(fill_fraction * degree)` RNG-kept entries is filled up
    /// to that many with the closest candidates that the updates of the last outer iteration pruned
    /// from its list (the kept entries are never displaced; the row is then ascending by distance).
    /// 0 exports the kept entries only (the reference code). Default 0.5 (16 of the default degree
    /// 32): the RNG rule keeps only 8-16 of a vertex's candidates on the quick suite's sets, and
    /// the filled rows reach the same recall@10 with fewer distance evaluations per query on each
    /// of them (docs/benchmarks.md, "RNN-Descent rows filled from pruned candidates"). It costs no
    /// distance evaluation: the pruned candidates and their distances are kept while the last outer
    /// iteration runs (at most `fill_len` per vertex, about 12 bytes each on the CPU). GRNND on the
    /// GPU applies the same rule with a device buffer of `fill_len` packed entries per vertex (8
    /// bytes each); how its pruned candidates differ from the CPU's is in docs/grnnd.md.
    pub fill_fraction: f32,
    /// **GPU only** (GRNND): the fraction `rho` in `(0, 1]` of each pool whose reverse edges are
    /// inserted between outer iterations. The paper's best trade-off is 0.6.
    pub rho: f32,
    /// **GPU only** (GRNND): the order in which candidate pairs are evaluated.
    pub update_order: UpdateOrder,
    /// **GPU only** (GRNND): which part of a pool reverse sampling uses.
    pub reverse_sampling: ReverseSampling,
    /// **GPU only** (GRNND): at most this many candidate pairs evaluated per vertex and round
    /// (digest §7 A4, a speed knob not in the paper; `None`: every pair).
    pub max_pairs: Option<usize>,
    /// Entry points stored with the graph, spread over the data by farthest-first traversal of
    /// a seeded sample ([`weft_graph::connect::spread_entry_points`]; the first is the sample's
    /// most central point). A search scores them all and starts from the best. Default 16: the
    /// RNG-pruned graph keeps long edges between clusters, so it navigates from anywhere; 1, 32
    /// and 256 entry points gave the same recall on the clustered preset while 256 cost 184 more
    /// distance evaluations per query than 1 (docs/benchmarks.md, "Strongly clustered data ...
    /// on the 2-core machine"). 0 only with `repair` off.
    pub entry_points: usize,
    /// Make every vertex reachable from the entry points before the graph leaves the builder
    /// ([`weft_graph::connect::repair_connectivity`]): nothing in RNN-Descent guarantees it.
    /// Default on.
    pub repair: bool,
}

impl Default for RnnDescentParams {
    fn default() -> Self {
        RnnDescentParams {
            s: 20,
            r: 64,
            t1: 3,
            t2: 10,
            degree: 32,
            strict_prune: true,
            truncate_updates: true,
            new_old_flags: true,
            final_reverse_edges: false,
            fill_fraction: 0.5,
            rho: 0.6,
            update_order: UpdateOrder::Random,
            reverse_sampling: ReverseSampling::Closest,
            max_pairs: None,
            entry_points: 16,
            repair: true,
        }
    }
}

impl RnnDescentParams {
    /// The row length up to which the builders (the CPU RNN-Descent and GRNND) fill rows from
    /// pruned candidates:
    /// `ceil(fill_fraction * degree)`, at most `degree` (0: no filling).
    pub fn fill_len(&self) -> usize {
        ((self.fill_fraction * self.degree as f32).ceil() as usize).min(self.degree)
    }
}

impl Params for RnnDescentParams {
    fn validate(&self, _rows: usize, _dim: usize) -> Result<()> {
        if self.r == 0 {
            return Err(Error::invalid_param(
                "r",
                "the list capacity R must be at least 1",
            ));
        }
        if self.s == 0 || self.s > self.r {
            return Err(Error::invalid_param(
                "s",
                format!(
                    "the initial neighbour count S = {} must be in 1..=R (R = {})",
                    self.s, self.r
                ),
            ));
        }
        if self.t1 == 0 {
            return Err(Error::invalid_param(
                "t1",
                "at least one outer iteration is needed",
            ));
        }
        if self.t2 == 0 {
            return Err(Error::invalid_param(
                "t2",
                "at least one update round is needed",
            ));
        }
        if self.degree == 0 || self.degree > self.r {
            return Err(Error::invalid_param(
                "degree",
                format!(
                    "the output degree K = {} must be in 1..=R (R = {})",
                    self.degree, self.r
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.fill_fraction) {
            return Err(Error::invalid_param(
                "fill_fraction",
                format!(
                    "the fraction of the output degree filled from pruned candidates must be in \
                     [0, 1], got {}",
                    self.fill_fraction
                ),
            ));
        }
        if !(self.rho > 0.0 && self.rho <= 1.0) {
            return Err(Error::invalid_param(
                "rho",
                format!("the reverse-edge ratio must be in (0, 1], got {}", self.rho),
            ));
        }
        if self.repair && self.entry_points == 0 {
            return Err(Error::invalid_param(
                "entry_points",
                "the connectivity repair makes every vertex reachable from the entry points, so \
                 it needs at least one (or turn `repair` off)",
            ));
        }
        if self.max_pairs == Some(0) {
            return Err(Error::invalid_param(
                "max_pairs",
                "must be at least 1 (leave it unset for every pair)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bad_values_do_not() {
        RnnDescentParams::default().validate(1000, 8).unwrap();
        let bad = [
            RnnDescentParams {
                r: 0,
                ..Default::default()
            },
            RnnDescentParams {
                s: 0,
                ..Default::default()
            },
            RnnDescentParams {
                s: 65,
                ..Default::default()
            },
            RnnDescentParams {
                t1: 0,
                ..Default::default()
            },
            RnnDescentParams {
                t2: 0,
                ..Default::default()
            },
            RnnDescentParams {
                degree: 0,
                ..Default::default()
            },
            RnnDescentParams {
                degree: 65,
                ..Default::default()
            },
            RnnDescentParams {
                rho: 0.0,
                ..Default::default()
            },
            RnnDescentParams {
                rho: f32::NAN,
                ..Default::default()
            },
            RnnDescentParams {
                max_pairs: Some(0),
                ..Default::default()
            },
            RnnDescentParams {
                fill_fraction: 1.5,
                ..Default::default()
            },
            RnnDescentParams {
                fill_fraction: -0.1,
                ..Default::default()
            },
            RnnDescentParams {
                fill_fraction: f32::NAN,
                ..Default::default()
            },
        ];
        assert_eq!(RnnDescentParams::default().fill_len(), 16);
        let fill = |fill_fraction, degree| {
            RnnDescentParams {
                fill_fraction,
                degree,
                ..Default::default()
            }
            .fill_len()
        };
        assert_eq!(
            [fill(0.0, 32), fill(1.0, 32), fill(0.5, 5), fill(0.01, 4)],
            [0, 32, 3, 1]
        );
        for p in bad {
            assert!(
                matches!(p.validate(1000, 8), Err(Error::InvalidParams { .. })),
                "{p:?}"
            );
        }
    }
}

//! [`NnDescentParams`]: the parameters shared by the CPU NN-Descent ([`crate::NnDescentCpu`]) and
//! the GPU back end (GNND).

use serde::{Deserialize, Serialize};
use weft_core::{Error, Params, Result};

use crate::partition::ShardSchedule;

/// The largest accepted `max_candidates` (the local join is quadratic in it).
pub const MAX_CANDIDATES_LIMIT: usize = 256;
/// The largest accepted `leaf_size` (a leaf join is quadratic in it).
pub const LEAF_SIZE_LIMIT: usize = 1024;
/// The largest accepted GNND sample count `gpu_sample` (the NEW and OLD sample lists of 2p
/// entries must fit the join kernel's 128 x 64 distance tile).
pub const GPU_SAMPLE_LIMIT: usize = 32;

/// Parameters of NN-Descent (Dong et al. 2011) on the CPU and of GNND on the GPU.
///
/// Fields marked "CPU" are ignored by the GPU back end and vice versa. Every field has a default
/// (`#[serde(default)]`), so a partial JSON/TOML object is valid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NnDescentParams {
    /// Sample rate ρ in (0, 1]: each vertex samples at most `ceil(rho * k)` NEW and as many OLD
    /// candidates per iteration (forward and reverse together), further capped by
    /// `max_candidates`. Default 1.0. CPU.
    pub rho: f32,
    /// Upper bound on the sampled NEW (and OLD) candidates per vertex per iteration
    /// (pynndescent's `max_candidates`), in `1..=256`. The sample size is
    /// `min(ceil(rho * k), max_candidates)`. Default 16. CPU.
    pub max_candidates: usize,
    /// Early-termination precision δ in [0, 1): stop when an iteration changes fewer than
    /// `delta * n * k` list entries. Default 0.001. CPU and GPU.
    pub delta: f32,
    /// The most NN-Descent iterations after the initialisation (0: return the initial graph).
    /// Default 12. CPU and GPU (GNND runs exactly this many unless `delta` stops it earlier).
    pub max_iters: usize,
    /// Random-projection trees used to initialise the graph (neighbours share a leaf), as
    /// pynndescent does; 0 gives the classic random initialisation. Default 8. CPU.
    pub n_trees: usize,
    /// Most points in an RP-tree leaf, in `2..=1024`; `None`: `max(10, k)`. Default `None`. CPU.
    pub leaf_size: Option<usize>,
    /// GNND's sample count p: the first p NEW and first p OLD entries of each sorted list are
    /// sampled and up to p reverse samples of each kind are appended (lists of at most 2p), in
    /// `1..=32`. Default 32. Used by the GPU back end only.
    pub gpu_sample: usize,
    /// Device memory budget of a GPU build, in bytes (`None`: the device's free memory less a
    /// margin). A build whose data, graph and work buffers do not fit is split into shards
    /// built separately and merged pairwise (GGM; see `docs/gnnd.md`); the budget must hold
    /// two shards of at least `k + 1` points. At least 1 MiB when set. Default `None`. GPU.
    pub gpu_mem_limit: Option<u64>,
    /// How an out-of-GPU-memory build cuts its shards and which pairs it merges (see
    /// [`ShardSchedule`] and `docs/gnnd.md`): `"all_pairs"` (contiguous shards, every pair
    /// merged, as the paper) or `{"nearest": m}` (locality-aware shards, each merged with its
    /// `m` nearest shards; `m` in `1..=4096`) or `"auto"` (the default: locality-aware shards
    /// with the smallest `m` that keeps 99% of the true neighbour pairs of 256 probe points,
    /// up to every pair on weakly clustered data; see `docs/gnnd.md`). GPU.
    pub shard_schedule: ShardSchedule,
}

/// The smallest accepted `gpu_mem_limit` (1 MiB).
pub const GPU_MEM_LIMIT_MIN: u64 = 1 << 20;

impl Default for NnDescentParams {
    fn default() -> Self {
        NnDescentParams {
            rho: 1.0,
            max_candidates: 16,
            delta: 0.001,
            max_iters: 12,
            n_trees: 8,
            leaf_size: None,
            gpu_sample: 32,
            gpu_mem_limit: None,
            shard_schedule: ShardSchedule::default(),
        }
    }
}

impl NnDescentParams {
    /// The number of NEW (and of OLD) candidates sampled per vertex and iteration for degree `k`:
    /// `min(ceil(rho * k), max_candidates)`, at least 1.
    pub fn sample_size(&self, k: usize) -> usize {
        let by_rho = (f64::from(self.rho) * k as f64).ceil() as usize;
        by_rho.min(self.max_candidates).max(1)
    }

    /// The RP-tree leaf size for degree `k`.
    pub fn leaf_size_for(&self, k: usize) -> usize {
        self.leaf_size
            .unwrap_or_else(|| k.clamp(10, LEAF_SIZE_LIMIT))
    }
}

impl Params for NnDescentParams {
    fn validate(&self, _rows: usize, dim: usize) -> Result<()> {
        if dim == 0 {
            return Err(Error::InvalidInput(
                "vector dimension must be at least 1".into(),
            ));
        }
        if !(self.rho.is_finite() && self.rho > 0.0 && self.rho <= 1.0) {
            return Err(Error::invalid_param(
                "rho",
                format!("the sample rate must be in (0, 1], got {}", self.rho),
            ));
        }
        if !(1..=MAX_CANDIDATES_LIMIT).contains(&self.max_candidates) {
            return Err(Error::invalid_param(
                "max_candidates",
                format!(
                    "must be in 1..={MAX_CANDIDATES_LIMIT}, got {}",
                    self.max_candidates
                ),
            ));
        }
        if !(self.delta.is_finite() && self.delta >= 0.0 && self.delta < 1.0) {
            return Err(Error::invalid_param(
                "delta",
                format!("must be in [0, 1), got {}", self.delta),
            ));
        }
        if self.max_iters > 10_000 {
            return Err(Error::invalid_param(
                "max_iters",
                format!("must be at most 10000, got {}", self.max_iters),
            ));
        }
        if self.n_trees > 1024 {
            return Err(Error::invalid_param(
                "n_trees",
                format!("must be at most 1024, got {}", self.n_trees),
            ));
        }
        if let Some(l) = self.leaf_size
            && !(2..=LEAF_SIZE_LIMIT).contains(&l)
        {
            return Err(Error::invalid_param(
                "leaf_size",
                format!("must be in 2..={LEAF_SIZE_LIMIT}, got {l}"),
            ));
        }
        if let Some(b) = self.gpu_mem_limit
            && b < GPU_MEM_LIMIT_MIN
        {
            return Err(Error::invalid_param(
                "gpu_mem_limit",
                format!("must be at least {GPU_MEM_LIMIT_MIN} bytes (1 MiB), got {b}"),
            ));
        }
        self.shard_schedule.validate()?;
        if !(1..=GPU_SAMPLE_LIMIT).contains(&self.gpu_sample) {
            return Err(Error::invalid_param(
                "gpu_sample",
                format!("must be in 1..={GPU_SAMPLE_LIMIT}, got {}", self.gpu_sample),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bad_values_are_rejected() {
        let p = NnDescentParams::default();
        p.validate(1000, 16).unwrap();
        assert_eq!(p.sample_size(32), 16);
        assert_eq!(p.sample_size(8), 8);
        let bad = [
            NnDescentParams {
                rho: 0.0,
                ..p.clone()
            },
            NnDescentParams {
                rho: f32::NAN,
                ..p.clone()
            },
            NnDescentParams {
                rho: 1.5,
                ..p.clone()
            },
            NnDescentParams {
                max_candidates: 0,
                ..p.clone()
            },
            NnDescentParams {
                max_candidates: 999,
                ..p.clone()
            },
            NnDescentParams {
                delta: -0.1,
                ..p.clone()
            },
            NnDescentParams {
                delta: 1.0,
                ..p.clone()
            },
            NnDescentParams {
                leaf_size: Some(1),
                ..p.clone()
            },
            NnDescentParams {
                gpu_sample: 0,
                ..p.clone()
            },
            NnDescentParams {
                gpu_sample: 33,
                ..p.clone()
            },
            NnDescentParams {
                max_iters: 20_000,
                ..p.clone()
            },
            NnDescentParams {
                gpu_mem_limit: Some(1000),
                ..p.clone()
            },
            NnDescentParams {
                shard_schedule: ShardSchedule::Nearest(0),
                ..p.clone()
            },
        ];
        for b in bad {
            assert!(
                matches!(b.validate(1000, 16), Err(Error::InvalidParams { .. })),
                "{b:?}"
            );
        }
        assert!(p.validate(1000, 0).is_err());
    }

    #[test]
    fn serde_round_trip_and_partial_objects() {
        let p = NnDescentParams {
            rho: 0.5,
            leaf_size: Some(40),
            ..Default::default()
        };
        let s = serde_json::to_string(&p).unwrap();
        let q: NnDescentParams = serde_json::from_str(&s).unwrap();
        assert_eq!(p, q);
        let r: NnDescentParams = serde_json::from_str(r#"{"max_iters": 3}"#).unwrap();
        assert_eq!(r.max_iters, 3);
        assert_eq!(r.rho, 1.0);
        assert!(serde_json::from_str::<NnDescentParams>(r#"{"bogus": 1}"#).is_err());
        let a: NnDescentParams =
            serde_json::from_str(r#"{"shard_schedule": "all_pairs"}"#).unwrap();
        assert_eq!(a.shard_schedule, ShardSchedule::AllPairs);
        let m: NnDescentParams =
            serde_json::from_str(r#"{"shard_schedule": {"nearest": 5}}"#).unwrap();
        assert_eq!(m.shard_schedule, ShardSchedule::Nearest(5));
        assert_eq!(r.shard_schedule, ShardSchedule::default());
        assert_eq!(ShardSchedule::default(), ShardSchedule::Auto);
        let auto: NnDescentParams = serde_json::from_str(r#"{"shard_schedule": "auto"}"#).unwrap();
        assert_eq!(auto.shard_schedule, ShardSchedule::Auto);
    }
}

//! A sharded index: the vectors cut into contiguous shards, each an [`Index`] with a graph of its
//! own, every query searched in every shard and the shards' answers merged exactly.
//!
//! Sharding is how a search reaches more vectors than one GPU holds: each GPU holds one shard
//! (or a few) and searches it, all GPUs at the same time ([`ShardedIndex::build`] and
//! [`ShardedIndex::search`] take the devices). On one GPU, or on the CPU, the shards are searched
//! one after another with the same results. Each shard's graph is built on its shard alone
//! (per-shard graphs need no graph exchange between GPUs, and every shard is connected on its own,
//! as every search graph weft builds is); a query's `k` nearest are then the `k` best of the
//! shards' `k` nearest, which is exact given the shards' answers. Searching `s` shards costs
//! about `s` searches of a graph `1/s` the size: replication (one graph,
//! [`SearchParams::devices`] of an [`Index`]) is faster where the index fits every GPU.

use std::ops::Range;
use std::path::Path;
use std::time::Instant;

use weft_core::{DatasetView, Element, Error, INVALID, Neighbors, NodeId, Result, SearchStats};
use weft_io::AnyDataset;

use crate::index::{check_devices, split_rows};
use crate::registry::with_view;
use crate::{Filter, Index, IndexBuilder, IndexData, SearchOutput, SearchParams, Vectors};

/// An index cut into contiguous shards (see the [module docs](self)): shard `i` holds the
/// vectors `starts[i]..starts[i + 1]` of the data it was built from, and ids are global.
#[derive(Debug)]
pub struct ShardedIndex {
    shards: Vec<Index>,
    /// The first global id of each shard, then the total count.
    starts: Vec<usize>,
}

impl ShardedIndex {
    /// Cuts `data` into `shards` contiguous parts of nearly equal size (the first `n % shards`
    /// one vector longer) and builds one [`Index`] per part with `builder`'s algorithm, metric,
    /// seed, backend and threads. `devices` empty: the shards are built one after another as
    /// `builder` says. Otherwise shard `i` is built on GPU `devices[i % devices.len()]` (a device
    /// given is used or the build fails, naming it), the devices at the same time, each its
    /// shards one after another; the shard's searches then default to that device.
    ///
    /// Errors: `shards` of 0, more shards than vectors, a device named twice (all
    /// [`Error::InvalidParams`]), and whatever a shard's build returns (the first, in shard
    /// order).
    pub fn build(
        builder: &IndexBuilder,
        data: impl IndexData,
        shards: usize,
        devices: &[usize],
    ) -> Result<ShardedIndex> {
        let data = data.into_any_dataset()?;
        let n = data.rows();
        if shards == 0 || shards > n {
            return Err(Error::invalid_param(
                "shards",
                format!("{shards} shards of {n} vectors: give 1 to {n}"),
            ));
        }
        check_devices(devices)?;
        let parts = split_rows(n, shards);
        let build_part = |builder: &IndexBuilder, part: &Range<usize>| -> Result<Index> {
            with_view!(&data, |view| builder.build(view.slice_rows(part.clone())?))
        };
        // One lane per device (none: the calling thread), each its shards in turn.
        let built = in_lanes(parts.len(), devices.len(), |lane, i| {
            match devices.get(lane) {
                Some(&device) => build_part(&builder.clone().on_device(device), &parts[i]),
                None => build_part(builder, &parts[i]),
            }
        });
        Self::from_shards(built.into_iter().collect::<Result<Vec<_>>>()?)
    }

    /// The sharded index over `shards`, in this order: shard `i`'s ids follow those of the
    /// shards before it. The shards must agree on the element type, the dimension and the
    /// metric (else [`Error::InvalidInput`]); there must be at least one.
    pub fn from_shards(shards: Vec<Index>) -> Result<ShardedIndex> {
        let Some(first) = shards.first() else {
            return Err(Error::invalid_param(
                "shards",
                "a sharded index needs at least one shard",
            ));
        };
        let (dtype, dim, metric) = (first.data().dtype(), first.data().dim(), first.metric());
        for (i, s) in shards.iter().enumerate() {
            if (s.data().dtype(), s.data().dim(), s.metric()) != (dtype, dim, metric) {
                return Err(Error::InvalidInput(format!(
                    "shard {i} holds {} x {} {} vectors with metric {}, shard 0 {dim} {dtype} \
                     with metric {metric}",
                    s.data().rows(),
                    s.data().dim(),
                    s.data().dtype(),
                    s.metric(),
                )));
            }
        }
        let mut starts = Vec::with_capacity(shards.len() + 1);
        starts.push(0);
        for s in &shards {
            starts.push(starts[starts.len() - 1] + s.data().rows());
        }
        if starts[starts.len() - 1] >= NodeId::MAX as usize {
            return Err(Error::InvalidInput(format!(
                "{} vectors: ids must stay below u32::MAX",
                starts[starts.len() - 1]
            )));
        }
        Ok(ShardedIndex { shards, starts })
    }

    /// The shards, in id order.
    pub fn shards(&self) -> &[Index] {
        &self.shards
    }

    /// The global ids of shard `i`'s vectors.
    pub fn shard_ids(&self, i: usize) -> Range<usize> {
        self.starts[i]..self.starts[i + 1]
    }

    /// The number of vectors, over all shards.
    pub fn len(&self) -> usize {
        self.starts[self.starts.len() - 1]
    }

    /// Whether the index holds no vector (never: every shard holds one at least).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `k` nearest vectors of each query over every shard, ascending by `(distance, global
    /// id)`. Each shard answers with its `min(k, shard size)` nearest, searched with `params`
    /// (its beam width and knobs, a filter over the global ids cut into the shards' parts);
    /// the answers are merged exactly. With [`SearchParams::devices`] empty the shards are
    /// searched one after another (each as `params` says, on its own default device for a GPU
    /// search); otherwise shard `i` is searched on `devices[i % devices.len()]`, the devices at
    /// the same time. The result is that of searching the shards one after another on one
    /// device with the same parameters, whatever the devices. The stats are summed; `backend`
    /// and `route` are those of shard 0.
    ///
    /// Errors: `k` out of `1..=len`, a filter over another count than [`ShardedIndex::len`],
    /// a device named twice, and what a shard's search returns (the first, in shard order).
    pub fn search(
        &self,
        queries: impl Vectors,
        k: usize,
        params: &SearchParams,
    ) -> Result<SearchOutput> {
        weft_core::error::check_k(k, self.len())?;
        check_devices(&params.devices)?;
        if let Some(filter) = &params.filter {
            filter.check_len(self.len())?;
        }
        queries.with_view(|queries| self.search_view(queries, k, params))
    }

    /// [`ShardedIndex::search`] of borrowed queries.
    fn search_view<T: Element>(
        &self,
        queries: DatasetView<'_, T>,
        k: usize,
        params: &SearchParams,
    ) -> Result<SearchOutput> {
        let start = Instant::now();
        let shard_params: Vec<SearchParams> = (0..self.shards.len())
            .map(|i| {
                let mut p = params.clone();
                if !params.devices.is_empty() {
                    p.devices = vec![params.devices[i % params.devices.len()]];
                }
                p.filter = params.filter.as_ref().map(|f| {
                    let ids = self.shard_ids(i);
                    Filter::from_predicate(ids.len(), |j| f.contains((ids.start + j) as NodeId))
                });
                p
            })
            .collect();
        let search_shard = |i: usize| -> Result<SearchOutput> {
            let shard = &self.shards[i];
            shard.search(queries, k.min(shard.data().rows()), &shard_params[i])
        };
        // One lane per device, each its shards in turn; with one device or none, the shards
        // one after another on the calling thread.
        let lanes = if params.devices.len() > 1 {
            params.devices.len()
        } else {
            0
        };
        let found = in_lanes(self.shards.len(), lanes, |_, i| search_shard(i));
        let found = found.into_iter().collect::<Result<Vec<_>>>()?;
        let mut stats = SearchStats::default();
        for out in &found {
            stats.merge(&out.stats);
        }
        let neighbors = self.merge(&found, queries.rows(), k);
        Ok(SearchOutput {
            neighbors,
            stats,
            elapsed: start.elapsed(),
            backend: found[0].backend,
            route: found[0].route,
        })
    }

    /// Saves the index into folder `dir` (its parents created if needed): `manifest.json`
    /// (the format, its version and each shard's folder and vector count) and one folder per
    /// shard, `shard-00000`, `shard-00001`, ..., each as [`Index::save`] writes it. The folder is
    /// replaced whole, in one rename, as [`Index::save`] does; an existing `dir` must hold only a
    /// sharded index's entries (else [`Error::InvalidInput`], nothing written).
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let manifest = serde_json::json!({
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "len": self.len(),
            "shards": (0..self.shards.len())
                .map(|i| serde_json::json!({
                    "folder": shard_folder(i),
                    "rows": self.shards[i].data().rows(),
                }))
                .collect::<Vec<_>>(),
        });
        crate::save::replace_dir(dir.as_ref(), is_sharded_entry, |tmp| {
            let text = serde_json::to_vec_pretty(&manifest)
                .map_err(|e| Error::InvalidInput(format!("manifest: {e}")))?;
            let path = tmp.join(MANIFEST);
            std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
            for (i, shard) in self.shards.iter().enumerate() {
                shard.save(tmp.join(shard_folder(i)))?;
            }
            Ok(())
        })
    }

    /// Loads a sharded index saved by [`ShardedIndex::save`] (each shard memory-mapped, its
    /// graph's checksum verified, as [`Index::load`] does). A manifest that is not one, of
    /// another version, or whose vector counts disagree with the shards' files is an
    /// [`Error::Format`] naming it.
    pub fn load(dir: impl AsRef<Path>) -> Result<ShardedIndex> {
        let dir = dir.as_ref();
        let path = dir.join(MANIFEST);
        let text = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let bad = |why: String| Error::format(&path, why);
        let manifest: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
        if manifest["format"] != MANIFEST_FORMAT {
            return Err(bad(format!("not a {MANIFEST_FORMAT} manifest")));
        }
        if manifest["version"] != MANIFEST_VERSION {
            return Err(bad(format!(
                "version {} (this weft reads version {MANIFEST_VERSION})",
                manifest["version"]
            )));
        }
        let entries = manifest["shards"]
            .as_array()
            .filter(|a| !a.is_empty())
            .ok_or_else(|| bad("no shard list".into()))?;
        let mut shards = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let folder = entry["folder"]
                .as_str()
                .filter(|f| *f == shard_folder(i))
                .ok_or_else(|| bad(format!("shard {i}: its folder is not {}", shard_folder(i))))?;
            let rows = entry["rows"]
                .as_u64()
                .ok_or_else(|| bad(format!("shard {i}: no vector count")))?;
            let shard = Index::load(dir.join(folder))?;
            if shard.data().rows() as u64 != rows {
                return Err(bad(format!(
                    "shard {i} holds {} vectors, the manifest says {rows}",
                    shard.data().rows()
                )));
            }
            shards.push(shard);
        }
        let index = Self::from_shards(shards)?;
        if manifest["len"].as_u64() != Some(index.len() as u64) {
            return Err(bad(format!(
                "the shards hold {} vectors, the manifest says {}",
                index.len(),
                manifest["len"]
            )));
        }
        Ok(index)
    }

    /// Each query's `k` best of the shards' answers (global ids; ties to the lower id;
    /// padding, [`INVALID`] / `+inf`, last).
    fn merge(&self, found: &[SearchOutput], rows: usize, k: usize) -> Neighbors {
        let mut all = Neighbors::new(rows, k);
        let mut out = all.as_mut();
        let mut row: Vec<(f32, NodeId)> = Vec::new();
        for q in 0..rows {
            row.clear();
            for (i, f) in found.iter().enumerate() {
                let base = self.starts[i] as NodeId;
                let n = &f.neighbors;
                for (&id, &d) in n.row_ids(q).iter().zip(n.row_dists(q)) {
                    if id != INVALID {
                        row.push((d, base + id));
                    }
                }
            }
            row.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let (ids, dists) = out.row_mut(q);
            for (j, (id, dist)) in ids.iter_mut().zip(dists.iter_mut()).enumerate() {
                (*id, *dist) = row
                    .get(j)
                    .map_or((INVALID, f32::INFINITY), |&(d, i)| (i, d));
            }
        }
        all
    }
}

/// Runs `work(lane, item)` for items `0..items` and returns the results in item order: with
/// `lanes` of 0 or 1 one after another on the calling thread (lane 0); otherwise lane `l` (a
/// thread of its own) runs items `l`, `l + lanes`, ... in turn, the lanes at the same time. A
/// panic in a lane is resumed here.
fn in_lanes<R: Send>(
    items: usize,
    lanes: usize,
    work: impl Fn(usize, usize) -> R + Sync,
) -> Vec<R> {
    if lanes <= 1 {
        return (0..items).map(|i| work(0, i)).collect();
    }
    let mut out: Vec<Option<R>> = (0..items).map(|_| None).collect();
    std::thread::scope(|scope| {
        let work = &work;
        let running: Vec<_> = (0..lanes.min(items))
            .map(|lane| {
                scope.spawn(move || {
                    (lane..items)
                        .step_by(lanes)
                        .map(|i| (i, work(lane, i)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for thread in running {
            let done = thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            for (i, r) in done {
                out[i] = Some(r);
            }
        }
    });
    out.into_iter()
        .map(|r| r.expect("every item ran in its lane"))
        .collect()
}

/// The manifest's file name in a saved sharded index.
const MANIFEST: &str = "manifest.json";
/// The manifest's `format` field.
const MANIFEST_FORMAT: &str = "weft-sharded-index";
/// The manifest version this code writes and reads.
const MANIFEST_VERSION: u64 = 1;

/// The folder of shard `i` in a saved sharded index.
fn shard_folder(i: usize) -> String {
    format!("shard-{i:05}")
}

/// Whether a saved sharded index's folder may hold an entry named `name`.
fn is_sharded_entry(name: &str) -> bool {
    name == MANIFEST
        || name
            .strip_prefix("shard-")
            .is_some_and(|i| i.len() >= 5 && i.bytes().all(|b| b.is_ascii_digit()))
}

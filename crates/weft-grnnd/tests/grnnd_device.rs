//! GRNND kernels on a GPU against CPU models: the atomic insertion (heavy contention on one row:
//! exactly the best-capacity set), the update round (the RNG rule in each pair order, with and
//! without new/old flags, strict and not; the pruned entries it keeps for filling), reverse-edge
//! sampling, the finalisation (with and without filling short rows from pruned entries), and
//! whole builds (valid graphs, every vertex reachable, every metric and element type, clear
//! errors).
//!
//! Data are small integers, so that every distance is exact in f32 on both sides and the
//! pruning decisions of the model and the kernel agree bit for bit.

#![cfg(feature = "cuda")]
#![allow(clippy::too_many_arguments, clippy::needless_range_loop)]

use proptest::prelude::*;
use weft_core::rng::{SplitMix64, hash3, mix64};
use weft_core::{BuildCtx, DatasetView, Element, Error, Metric, NodeId};
use weft_gpu::GpuContext;
use weft_gpu::testing::gpu_or_skip;
use weft_grnnd::GrnndParams;
use weft_grnnd::gpu::grnnd::testing::{
    PoolRows, finalize_filled, finalize_rows, insert, reverse_step, update_round,
    update_round_recording,
};
use weft_grnnd::gpu::grnnd::{EMPTY, NEW_BIT, UpdateRound, pack, unpack};
use weft_grnnd::gpu::{Grnnd, GrnndStats};
use weft_rnndescent::{ReverseSampling, UpdateOrder};

const ID_MASK: u64 = 0x7fff_ffff;

fn id_of(e: u64) -> u32 {
    (e & ID_MASK) as u32
}

fn key_of(e: u64) -> u64 {
    e >> 32
}

/// Integer-valued data in `0..range`.
fn int_data(n: usize, dim: usize, range: u64, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    (0..n * dim).map(|_| rng.below(range) as f32).collect()
}

fn dist(metric: Metric, a: &[f32], b: &[f32]) -> f32 {
    match metric {
        Metric::L2Squared => a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum(),
        Metric::InnerProduct => -a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>(),
        Metric::Cosine => unreachable!("the oracle uses exact metrics only"),
    }
}

/// A row as the kernels load it: repeated ids merged into their first copy (NEW if any copy is
/// NEW, the smallest key), EMPTY skipped, slot order.
fn load_row(row: &[u64]) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for &x in row {
        if x == EMPTY {
            continue;
        }
        if let Some(y) = out.iter_mut().find(|y| id_of(**y) == id_of(x)) {
            let flag = (*y | x) & NEW_BIT;
            if key_of(x) < key_of(*y) {
                *y = x;
            }
            *y = (*y & !NEW_BIT) | flag;
        } else {
            out.push(x);
        }
    }
    out
}

/// Indices of `keys` by (key, index).
fn rank_perm(keys: &[u64]) -> Vec<usize> {
    let mut p: Vec<usize> = (0..keys.len()).collect();
    p.sort_by_key(|&i| (keys[i], i));
    p
}

/// The CPU model of one update round: the offers each row receives, in order, the pairs
/// evaluated, the redirects, and per vertex the entries pruned from its row (as loaded, flags
/// included).
fn model_update(
    data: &[f32],
    dim: usize,
    metric: Metric,
    cfg: &Config,
    round: u32,
    pool: &PoolRows,
) -> (Vec<Vec<u64>>, u64, u64, Vec<Vec<u64>>) {
    let (p, seed) = (&cfg.params, cfg.seed);
    let n = pool.n;
    let row = |i: u32| &data[i as usize * dim..(i as usize + 1) * dim];
    let mut offers = vec![Vec::new(); n];
    let mut killed = vec![Vec::new(); n];
    let (mut pairs, mut redirects) = (0u64, 0u64);
    for v in 0..n {
        let mut e = load_row(&pool.row(v));
        let k = e.len();
        let h = hash3(seed, 0x7570_6461_7465_0000 | round as u64, v as u64);
        let okey: Vec<u64> = e
            .iter()
            .map(|&x| {
                let x = x & !NEW_BIT;
                match p.update_order {
                    UpdateOrder::Ascending => x,
                    UpdateOrder::Descending => !x,
                    UpdateOrder::Random => mix64(h ^ (x & ID_MASK)),
                }
            })
            .collect();
        let perm = rank_perm(&okey);
        let mut capped = false;
        let mut my_pairs = 0u64;
        'outer: for a in 1..k {
            let i = perm[a];
            if e[i] == EMPTY {
                continue;
            }
            for &j in &perm[..a] {
                let (ei, ej) = (e[i], e[j]);
                if ej == EMPTY {
                    continue;
                }
                if p.new_old_flags && ei & NEW_BIT == 0 && ej & NEW_BIT == 0 {
                    continue;
                }
                if let Some(m) = p.max_pairs
                    && my_pairs >= m as u64
                {
                    capped = true;
                    break 'outer;
                }
                my_pairs += 1;
                let dij = dist(metric, row(id_of(ei)), row(id_of(ej)));
                let (di, dj) = (unpack(ei).0, unpack(ej).0);
                let far = di.max(dj);
                let prune = if p.strict_prune {
                    dij < far
                } else {
                    dij <= far
                };
                if !prune {
                    continue;
                }
                let (keep, gone) = if di < dj { (i, j) } else { (j, i) };
                offers[id_of(e[keep]) as usize].push(pack(dij, true, id_of(e[gone])));
                killed[v].push(e[gone]);
                redirects += 1;
                e[gone] = EMPTY;
                if gone == i {
                    break;
                }
            }
        }
        pairs += my_pairs;
        for &x in &e {
            if x != EMPTY {
                offers[v].push(if capped { x } else { x & !NEW_BIT });
            }
        }
    }
    (offers, pairs, redirects, killed)
}

/// The CPU model of a pruned buffer row after offers (`pruned_insert`): the `len` smallest of
/// the distinct ids of `initial` and `offered` (flags cleared, EMPTY skipped), each at its
/// smallest entry, ascending.
fn model_pruned(initial: &[u64], offered: &[u64], len: usize) -> Vec<u64> {
    let mut all: Vec<u64> = initial
        .iter()
        .chain(offered)
        .filter(|&&x| x != EMPTY)
        .map(|&x| x & !NEW_BIT)
        .collect();
    all.sort_unstable();
    let mut out: Vec<u64> = Vec::new();
    for x in all {
        if !out.iter().any(|&y| id_of(y) == id_of(x)) {
            out.push(x);
        }
    }
    out.truncate(len);
    out
}

/// Checks a kernel-written row against the offers it received (on top of `initial`): the
/// distinct ids kept are offered ones, as many as fit (less one per duplicate slot a race may
/// have written), none left out is closer than the farthest kept, and each kept flag was
/// offered with that id.
fn check_row(owner: usize, got: &[u64], initial: &[u64], offers: &[u64], r: usize) {
    let mut all: Vec<u64> = initial.to_vec();
    all.extend(
        offers
            .iter()
            .copied()
            .filter(|&x| id_of(x) as usize != owner),
    );
    let got_rows = load_row(got);
    let dups = got.len() - got_rows.len();
    let mut distinct: Vec<u32> = all.iter().map(|&x| id_of(x)).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let want = distinct.len().min(r);
    assert!(
        got_rows.len() + dups >= want && got_rows.len() <= want,
        "row {owner}: {} distinct kept (+{dups} duplicates), expected {want}",
        got_rows.len()
    );
    let mut max_kept = 0u64;
    for &x in &got_rows {
        assert!(
            all.iter()
                .any(|&y| id_of(y) == id_of(x) && key_of(y) == key_of(x)),
            "row {owner}: kept {x:#x} was never offered"
        );
        assert!(
            all.iter()
                .any(|&y| id_of(y) == id_of(x) && (y & NEW_BIT) == (x & NEW_BIT)),
            "row {owner}: kept flag of {} was never offered",
            id_of(x)
        );
        max_kept = max_kept.max(key_of(x));
    }
    if got_rows.len() == want && dups == 0 {
        for &y in &all {
            if !got_rows.iter().any(|&x| id_of(x) == id_of(y)) {
                assert!(
                    key_of(y) >= max_kept,
                    "row {owner}: left out {} (key {:#x}) is closer than a kept entry ({max_kept:#x})",
                    id_of(y),
                    key_of(y)
                );
            }
        }
    }
}

/// Random pools over `n` vertices: rows of up to `fill` distinct ids with their true distances
/// and random flags.
fn random_pool(
    data: &[f32],
    dim: usize,
    n: usize,
    r: usize,
    fill: usize,
    metric: Metric,
    seed: u64,
) -> PoolRows {
    let mut rng = SplitMix64::new(seed);
    let rows: Vec<Vec<u64>> = (0..n)
        .map(|v| {
            let m = (rng.below(fill as u64 + 1) as usize).min(n - 1).min(r);
            let mut ids: Vec<u32> = Vec::new();
            while ids.len() < m {
                let u = rng.below(n as u64) as u32;
                if u as usize != v && !ids.contains(&u) {
                    ids.push(u);
                }
            }
            ids.iter()
                .map(|&u| {
                    let d = dist(
                        metric,
                        &data[v * dim..(v + 1) * dim],
                        &data[u as usize * dim..(u as usize + 1) * dim],
                    );
                    pack(d, rng.below(2) == 0, u)
                })
                .collect()
        })
        .collect();
    PoolRows::from_rows(&rows, r).unwrap()
}

fn ctx_or_skip(name: &str) -> Option<GpuContext> {
    gpu_or_skip(name)
}

#[test]
fn grnnd_insert_heavy_contention_keeps_the_best_capacity_set() {
    let Some(ctx) = ctx_or_skip("grnnd_insert_heavy_contention_keeps_the_best_capacity_set") else {
        return;
    };
    for (case, &(r, m, initial)) in [
        (64usize, 4000usize, 10usize),
        (32, 3000, 32),
        (7, 500, 0),
        (256, 5000, 100),
    ]
    .iter()
    .enumerate()
    {
        let mut rng = SplitMix64::new(case as u64 + 11);
        // Row 0 gets `m` candidates with distinct ids 1..=m (keys with many ties, random flags);
        // row 1 a few; `initial` entries of row 0 have ids above m.
        let init: Vec<u64> = (0..initial)
            .map(|i| pack(rng.below(50) as f32, rng.below(2) == 0, (m + 1 + i) as u32))
            .collect();
        let pool = PoolRows::from_rows(&[init.clone(), Vec::new()], r).unwrap();
        let mut owners = Vec::new();
        let mut entries = Vec::new();
        for id in 1..=m as u32 {
            owners.push(0u32);
            entries.push(pack(rng.below(100) as f32, rng.below(2) == 0, id));
            if id % 97 == 0 {
                owners.push(1);
                entries.push(pack(rng.below(100) as f32, false, id));
            }
        }
        // A self-loop is refused.
        owners.push(1);
        entries.push(pack(0.0, true, 1));
        let out = insert(&ctx, &pool, &owners, &entries).unwrap();
        for owner in 0..2usize {
            let mut offered: Vec<u64> = if owner == 0 { init.clone() } else { Vec::new() };
            offered.extend(
                owners
                    .iter()
                    .zip(&entries)
                    .filter(|(o, e)| **o as usize == owner && id_of(**e) as usize != owner)
                    .map(|(_, e)| *e),
            );
            offered.sort_unstable();
            offered.truncate(r);
            let mut got = out.row(owner);
            got.sort_unstable();
            assert_eq!(got, offered, "case {case}, row {owner}");
        }
    }
}

#[test]
fn grnnd_insert_refuses_ids_already_in_the_row() {
    let Some(ctx) = ctx_or_skip("grnnd_insert_refuses_ids_already_in_the_row") else {
        return;
    };
    let r = 40;
    let init: Vec<u64> = (1..=35u32).map(|i| pack(i as f32, false, i)).collect();
    let pool = PoolRows::from_rows(std::slice::from_ref(&init), r).unwrap();
    // Closer copies of present ids, from many warps at once: all refused (the row has room).
    let owners = vec![0u32; 35 * 8];
    let entries: Vec<u64> = (0..35 * 8)
        .map(|i| pack(0.5, true, (i % 35 + 1) as u32))
        .collect();
    let out = insert(&ctx, &pool, &owners, &entries).unwrap();
    let mut got = out.row(0);
    got.sort_unstable();
    assert_eq!(got, init);
    // One at a time: a repeated new id goes in once.
    let mut p = pool;
    for _ in 0..3 {
        p = insert(&ctx, &p, &[0], &[pack(0.25, true, 99)]).unwrap();
    }
    assert_eq!(p.row(0).iter().filter(|&&x| id_of(x) == 99).count(), 1);
    assert_eq!(p.row(0).len(), 36);
}

/// GRNND's parameters and the seed of a test run (the seed reaches the builds through the build
/// context, the device pieces as an argument).
#[derive(Clone, Debug)]
struct Config {
    params: GrnndParams,
    seed: u64,
}

fn config(order: UpdateOrder, new_old: bool, strict: bool, r: usize, seed: u64) -> Config {
    Config {
        params: GrnndParams {
            s: 1,
            r,
            degree: 1,
            update_order: order,
            new_old_flags: new_old,
            strict_prune: strict,
            ..Default::default()
        },
        seed,
    }
}

fn check_update(
    ctx: &GpuContext,
    n: usize,
    dim: usize,
    r: usize,
    fill: usize,
    metric: Metric,
    cfg: &Config,
    seed: u64,
) {
    let range = if metric == Metric::InnerProduct {
        7
    } else {
        12
    };
    let data = int_data(n, dim, range, seed);
    let view = DatasetView::new(&data, n, dim).unwrap();
    let pool = random_pool(&data, dim, n, r, fill, metric, seed ^ 0x55);
    let round = (seed % 5) as u32;
    let update = UpdateRound {
        params: &cfg.params,
        seed: cfg.seed,
        round,
    };
    let (out, pairs, redirects) = update_round(ctx, view, metric, &update, &pool).unwrap();
    let (offers, mp, mr, _) = model_update(&data, dim, metric, cfg, round, &pool);
    assert_eq!((pairs, redirects), (mp, mr), "pairs, redirects ({cfg:?})");
    for v in 0..n {
        check_row(v, &out.row(v), &[], &offers[v], r);
    }
}

/// An update round that keeps pruned entries (`fill_len` per vertex, on top of a random initial
/// buffer: distinct ids, some slots EMPTY, some ids also in the pool row): the pool as in
/// `check_update`, and each vertex's buffer is exactly the model's.
fn check_recording(
    ctx: &GpuContext,
    n: usize,
    dim: usize,
    r: usize,
    fill: usize,
    fill_len: usize,
    metric: Metric,
    cfg: &Config,
    seed: u64,
) {
    let range = if metric == Metric::InnerProduct {
        7
    } else {
        12
    };
    let data = int_data(n, dim, range, seed);
    let view = DatasetView::new(&data, n, dim).unwrap();
    let pool = random_pool(&data, dim, n, r, fill, metric, seed ^ 0x55);
    let mut rng = SplitMix64::new(seed ^ 0xf111);
    let mut initial = vec![EMPTY; n * fill_len];
    for v in 0..n {
        let slots = &mut initial[v * fill_len..(v + 1) * fill_len];
        for slot in slots.iter_mut() {
            let u = rng.below(n as u64) as u32;
            if rng.below(3) == 0 || u as usize == v {
                continue;
            }
            let x = pack(rng.below(40) as f32, false, u);
            *slot = x;
        }
        // Distinct ids per row (the kernel's invariant): later copies emptied.
        for i in 0..fill_len {
            if slots[i] != EMPTY
                && slots[..i]
                    .iter()
                    .any(|&y| y != EMPTY && id_of(y) == id_of(slots[i]))
            {
                slots[i] = EMPTY;
            }
        }
    }
    let round = (seed % 5) as u32;
    let update = UpdateRound {
        params: &cfg.params,
        seed: cfg.seed,
        round,
    };
    let (out, pairs, redirects, kept) =
        update_round_recording(ctx, view, metric, &update, &pool, fill_len, &initial).unwrap();
    let (offers, mp, mr, killed) = model_update(&data, dim, metric, cfg, round, &pool);
    assert_eq!((pairs, redirects), (mp, mr), "pairs, redirects ({cfg:?})");
    assert_eq!(kept.len(), n * fill_len);
    for v in 0..n {
        check_row(v, &out.row(v), &[], &offers[v], r);
        let init = &initial[v * fill_len..(v + 1) * fill_len];
        let want = model_pruned(init, &killed[v], fill_len);
        let mut got: Vec<u64> = kept[v * fill_len..(v + 1) * fill_len]
            .iter()
            .copied()
            .filter(|&x| x != EMPTY)
            .collect();
        got.sort_unstable();
        assert_eq!(
            got, want,
            "pruned buffer of row {v} ({cfg:?}, fill_len {fill_len})"
        );
    }
}

#[test]
fn grnnd_update_matches_the_cpu_model_in_every_order() {
    let Some(ctx) = ctx_or_skip("grnnd_update_matches_the_cpu_model_in_every_order") else {
        return;
    };
    let mut case = 0u64;
    for order in [
        UpdateOrder::Random,
        UpdateOrder::Ascending,
        UpdateOrder::Descending,
    ] {
        for (new_old, strict) in [(true, true), (false, true), (false, false)] {
            for metric in [Metric::L2Squared, Metric::InnerProduct] {
                case += 1;
                let cfg = config(order, new_old, strict, 48, case);
                check_update(&ctx, 300, 9, 48, 40, metric, &cfg, case);
            }
        }
    }
    // A pair cap: survivors keep their flags.
    let mut cfg = config(UpdateOrder::Random, true, true, 32, 3);
    cfg.params.max_pairs = Some(30);
    check_update(&ctx, 200, 5, 32, 32, Metric::L2Squared, &cfg, 77);
    // Heavy contention: 60 vertices with full pools over 61 points.
    let cfg = config(UpdateOrder::Random, false, true, 64, 5);
    check_update(&ctx, 61, 3, 64, 64, Metric::L2Squared, &cfg, 78);
}

#[test]
fn grnnd_update_keeps_the_closest_pruned_entries() {
    let Some(ctx) = ctx_or_skip("grnnd_update_keeps_the_closest_pruned_entries") else {
        return;
    };
    let mut case = 100u64;
    for order in [
        UpdateOrder::Random,
        UpdateOrder::Ascending,
        UpdateOrder::Descending,
    ] {
        for (new_old, strict) in [(true, true), (false, false)] {
            case += 1;
            let cfg = config(order, new_old, strict, 48, case);
            check_recording(&ctx, 300, 9, 48, 40, 16, Metric::L2Squared, &cfg, case);
        }
    }
    // One slot, every slot of a row, inner product, a pair cap.
    let mut cfg = config(UpdateOrder::Random, true, true, 32, 7);
    check_recording(&ctx, 200, 5, 32, 32, 1, Metric::InnerProduct, &cfg, 79);
    check_recording(&ctx, 200, 5, 32, 32, 32, Metric::L2Squared, &cfg, 80);
    cfg.params.max_pairs = Some(30);
    check_recording(&ctx, 200, 5, 32, 32, 8, Metric::L2Squared, &cfg, 81);
    // Heavy contention on the pools (the buffers have one writer each).
    let cfg = config(UpdateOrder::Random, false, true, 64, 5);
    check_recording(&ctx, 61, 3, 64, 64, 20, Metric::L2Squared, &cfg, 82);
}

/// The CPU model of the reverse step: offers per row.
fn model_reverse(pool: &PoolRows, rho: f32, closest: bool) -> Vec<Vec<u64>> {
    let mut offers = vec![Vec::new(); pool.n];
    for v in 0..pool.n {
        let e = load_row(&pool.row(v));
        offers[v].extend(e.iter().copied());
        let k = e.len();
        let m = ((rho * k as f32).ceil() as usize).min(k);
        let order: Vec<usize> = if closest {
            rank_perm(&e.iter().map(|&x| x & !NEW_BIT).collect::<Vec<_>>())
        } else {
            (0..k).collect()
        };
        for &t in &order[..m] {
            let x = e[t];
            offers[id_of(x) as usize].push((x & 0xffff_ffff_0000_0000) | NEW_BIT | v as u64);
        }
    }
    offers
}

#[test]
fn grnnd_reverse_sampling_matches_the_cpu_model() {
    let Some(ctx) = ctx_or_skip("grnnd_reverse_sampling_matches_the_cpu_model") else {
        return;
    };
    for (case, &(rho, closest, r, fill)) in [
        (0.6f32, true, 32usize, 20usize),
        (1.0, true, 16, 16),
        (0.3, false, 64, 40),
        (0.6, true, 8, 8),
    ]
    .iter()
    .enumerate()
    {
        let n = 400;
        let data = int_data(n, 6, 10, case as u64);
        let pool = random_pool(&data, 6, n, r, fill, Metric::L2Squared, case as u64 + 100);
        let params = GrnndParams {
            rho,
            reverse_sampling: if closest {
                ReverseSampling::Closest
            } else {
                ReverseSampling::PoolOrder
            },
            ..config(UpdateOrder::Random, true, true, r, 1).params
        };
        let out = reverse_step(&ctx, &params, &pool).unwrap();
        let offers = model_reverse(&pool, rho, closest);
        for v in 0..n {
            check_row(v, &out.row(v), &[], &offers[v], r);
        }
    }
}

#[test]
fn grnnd_finalize_sorts_dedups_and_cuts() {
    let Some(ctx) = ctx_or_skip("grnnd_finalize_sorts_dedups_and_cuts") else {
        return;
    };
    let rows = vec![
        vec![
            pack(3.0, true, 4),
            pack(1.0, false, 2),
            pack(3.0, false, 4),
            pack(2.0, true, 7),
            pack(1.0, true, 1),
        ],
        vec![],
        vec![pack(-5.0, false, 9)],
    ];
    let pool = PoolRows::from_rows(&rows, 8).unwrap();
    let (ids, counts) = finalize_rows(&ctx, &pool, 3).unwrap();
    assert_eq!(counts, vec![4, 0, 1]);
    let inv = weft_core::INVALID;
    assert_eq!(ids, vec![1, 2, 7, inv, inv, inv, 9, inv, inv]);
}

/// The CPU model of `grnnd_finalize` (the CPU RNN-Descent's `fill_row` on packed entries): each
/// row merged as loaded, ascending by (distance, id), cut to `degree`; a row of fewer than
/// `fill_len` entries gets the closest entries of its `fill_len` pruned slots (EMPTY, the vertex
/// itself, ids in the row and repeats of an id skipped) up to `fill_len` entries and is sorted
/// again. Returns the rows, the pool sizes and the entries filled in.
fn model_finalize(
    pool: &PoolRows,
    degree: usize,
    fill_len: usize,
    pruned: &[u64],
) -> (Vec<NodeId>, Vec<u32>, u64) {
    let mut ids = vec![weft_core::INVALID; pool.n * degree];
    let mut counts = Vec::with_capacity(pool.n);
    let mut filled = 0u64;
    for v in 0..pool.n {
        let mut row: Vec<u64> = load_row(&pool.row(v))
            .iter()
            .map(|&x| x & !NEW_BIT)
            .collect();
        row.sort_unstable();
        counts.push(row.len() as u32);
        row.truncate(degree);
        let kept = row.len();
        if kept < fill_len {
            let mut cand: Vec<u64> = pruned[v * fill_len..(v + 1) * fill_len]
                .iter()
                .filter(|&&x| x != EMPTY)
                .map(|&x| x & !NEW_BIT)
                .filter(|&x| id_of(x) as usize != v && !row.iter().any(|&y| id_of(y) == id_of(x)))
                .collect();
            cand.sort_unstable();
            for x in cand {
                if row.len() == fill_len {
                    break;
                }
                if !row[kept..].iter().any(|&y| id_of(y) == id_of(x)) {
                    row.push(x);
                }
            }
            filled += (row.len() - kept) as u64;
            row.sort_unstable();
        }
        for (slot, x) in ids[v * degree..(v + 1) * degree].iter_mut().zip(&row) {
            *slot = id_of(*x);
        }
    }
    (ids, counts, filled)
}

/// Random finalisation inputs over `n` vertices: pool rows of up to `max_row` entries (ids other
/// than the vertex, repeats allowed, tied distances, random flags) and `fill_len` pruned slots
/// per vertex (EMPTY, the vertex itself, ids of its row, repeats, random flags).
fn random_fill_inputs(
    n: usize,
    r: usize,
    max_row: usize,
    fill_len: usize,
    seed: u64,
) -> (PoolRows, Vec<u64>) {
    let mut rng = SplitMix64::new(seed);
    let other = |rng: &mut SplitMix64, v: usize| {
        let u = rng.below(n as u64 - 1) as usize;
        (if u >= v { u + 1 } else { u }) as u32
    };
    let mut rows = Vec::with_capacity(n);
    let mut pruned = vec![EMPTY; n * fill_len];
    for v in 0..n {
        let m = if n == 1 {
            0
        } else {
            rng.below(max_row.min(r) as u64 + 1) as usize
        };
        let row: Vec<u64> = (0..m)
            .map(|_| pack(rng.below(20) as f32, rng.below(2) == 0, other(&mut rng, v)))
            .collect();
        for slot in &mut pruned[v * fill_len..(v + 1) * fill_len] {
            let id = match rng.below(8) {
                0 | 1 => continue,
                2 => v as u32,
                3 | 4 if !row.is_empty() => id_of(row[rng.below(row.len() as u64) as usize]),
                _ if n > 1 => other(&mut rng, v),
                _ => continue,
            };
            *slot = pack(rng.below(20) as f32, rng.below(2) == 0, id);
        }
        rows.push(row);
    }
    (PoolRows::from_rows(&rows, r).unwrap(), pruned)
}

fn check_finalize_fill(
    ctx: &GpuContext,
    n: usize,
    r: usize,
    degree: usize,
    fill_len: usize,
    seed: u64,
) {
    let max_row = (2 * degree).max(1);
    let (pool, pruned) = random_fill_inputs(n, r, max_row, fill_len, seed);
    let (ids, counts, filled) = finalize_filled(ctx, &pool, degree, fill_len, &pruned).unwrap();
    let (want_ids, want_counts, want_filled) = model_finalize(&pool, degree, fill_len, &pruned);
    assert_eq!(
        counts, want_counts,
        "pool sizes (n {n}, R {r}, degree {degree}, fill {fill_len})"
    );
    for v in 0..n {
        assert_eq!(
            &ids[v * degree..(v + 1) * degree],
            &want_ids[v * degree..(v + 1) * degree],
            "row {v} (n {n}, R {r}, degree {degree}, fill {fill_len}, seed {seed})"
        );
    }
    assert_eq!(filled, want_filled);
}

#[test]
fn grnnd_finalize_fills_short_rows_from_pruned_entries() {
    let Some(ctx) = ctx_or_skip("grnnd_finalize_fills_short_rows_from_pruned_entries") else {
        return;
    };
    let inv = weft_core::INVALID;
    // Degree 6, rows filled up to 5 entries from 5 pruned slots per vertex.
    let rows = vec![
        // Vertex 0: two kept entries.
        vec![pack(2.0, false, 5), pack(4.0, true, 6)],
        // Vertex 1: five kept entries, long enough: unchanged whatever its buffer holds.
        vec![
            pack(1.0, false, 2),
            pack(2.0, false, 3),
            pack(3.0, false, 4),
            pack(5.0, false, 5),
            pack(6.0, false, 6),
        ],
        // Vertex 2: no kept entry.
        vec![],
        // Vertex 3: two kept entries, more candidates than room.
        vec![pack(1.0, false, 4), pack(1.0, true, 5)],
    ];
    let pruned = vec![
        // Vertex 0: 6 is kept and 0 is the vertex (both skipped), 7 twice (the closer copy
        // counts), 9 is closer than both kept entries: two filled, the buffer is spent.
        pack(3.0, true, 7),
        pack(0.5, false, 6),
        pack(0.1, false, 0),
        pack(2.5, false, 7),
        pack(1.0, false, 9),
        // Vertex 1.
        pack(0.5, false, 9),
        pack(0.5, false, 8),
        EMPTY,
        EMPTY,
        EMPTY,
        // Vertex 2: EMPTY slots and the vertex itself; one filled.
        EMPTY,
        pack(0.0, false, 2),
        pack(7.0, true, 1),
        EMPTY,
        EMPTY,
        // Vertex 3: three filled of four (ties by id), 1 at 1.0 does not fit.
        pack(0.5, false, 9),
        pack(1.0, false, 1),
        pack(0.5, true, 8),
        pack(0.7, false, 7),
        EMPTY,
    ];
    let pool = PoolRows::from_rows(&rows, 8).unwrap();
    let (ids, counts, filled) = finalize_filled(&ctx, &pool, 6, 5, &pruned).unwrap();
    assert_eq!(counts, vec![2, 5, 0, 2]);
    #[rustfmt::skip]
    let want = vec![
        9, 5, 7, 6, inv, inv,
        2, 3, 4, 5, 6, inv,
        1, inv, inv, inv, inv, inv,
        8, 9, 7, 4, 5, inv,
    ];
    assert_eq!(ids, want);
    assert_eq!(filled, 6);
    assert_eq!(model_finalize(&pool, 6, 5, &pruned), (want, counts, 6));
    // Without filling: the kept rows only.
    let (plain, _) = finalize_rows(&ctx, &pool, 6).unwrap();
    assert_eq!(&plain[..6], &[5, 6, inv, inv, inv, inv]);
    for (n, r, degree, fill_len, seed) in [
        (300usize, 64usize, 32usize, 16usize, 1u64),
        (200, 16, 16, 16, 2),
        (100, 8, 1, 1, 3),
        (1, 4, 4, 2, 4),
        (257, 256, 256, 200, 5),
    ] {
        check_finalize_fill(&ctx, n, r, degree, fill_len, seed);
    }
}

fn check_graph(g: &weft_core::FixedDegreeGraph, n: usize) {
    g.validate().unwrap();
    assert_eq!(g.n(), n);
    for v in 0..n {
        let row: Vec<NodeId> = g
            .row(v)
            .iter()
            .copied()
            .filter(|&x| x != weft_core::INVALID)
            .collect();
        assert!(!row.is_empty() || n == 1, "vertex {v} has no edge");
        assert!(!row.contains(&(v as NodeId)), "self-loop at {v}");
        let mut s = row.clone();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), row.len(), "duplicate in row {v}");
    }
}

fn build_and_check<T: Element>(
    ctx: &GpuContext,
    data: &[T],
    n: usize,
    dim: usize,
    metric: Metric,
    cfg: &Config,
) -> GrnndStats {
    let view = DatasetView::new(data, n, dim).unwrap();
    let (g, stats) = Grnnd::new(ctx)
        .build(view, metric, &cfg.params, &BuildCtx::new(cfg.seed))
        .unwrap();
    check_graph(&g, n);
    assert_eq!(stats.unreachable_after, 0, "{stats:?}");
    let reach = weft_grnnd::gpu::grnnd::reachable(g.ids(), n, g.degree(), &[stats.entry_point]);
    assert!(reach.iter().all(|&r| r));
    stats
}

#[test]
fn grnnd_builds_valid_connected_graphs_for_every_metric_and_type() {
    let Some(ctx) = ctx_or_skip("grnnd_builds_valid_connected_graphs_for_every_metric_and_type")
    else {
        return;
    };
    // WEFT_GPU_SMALL (the sanitizer runs): a smaller set.
    let n = if std::env::var_os("WEFT_GPU_SMALL").is_some() {
        300
    } else {
        1500
    };
    let dim = 24;
    let mut rng = SplitMix64::new(5);
    let f: Vec<f32> = (0..n * dim).map(|_| rng.next_f32() * 2.0 - 1.0).collect();
    let cfg = Config {
        params: GrnndParams {
            s: 12,
            r: 32,
            t1: 2,
            t2: 4,
            degree: 16,
            ..Default::default()
        },
        seed: 9,
    };
    for metric in [Metric::L2Squared, Metric::InnerProduct, Metric::Cosine] {
        let s = build_and_check(&ctx, &f, n, dim, metric, &cfg);
        assert!(s.distance_computations > 0 && s.rounds == 8 && s.reverse_steps == 1);
    }
    let h: Vec<half::f16> = f.iter().map(|&x| half::f16::from_f32(x)).collect();
    build_and_check(&ctx, &h, n, dim, Metric::L2Squared, &cfg);
    let u: Vec<u8> = f.iter().map(|&x| ((x + 1.0) * 100.0) as u8).collect();
    build_and_check(&ctx, &u, n, dim, Metric::L2Squared, &cfg);
    let i: Vec<i8> = f.iter().map(|&x| (x * 100.0) as i8).collect();
    build_and_check(&ctx, &i, n, dim, Metric::Cosine, &cfg);
    for order in [UpdateOrder::Ascending, UpdateOrder::Descending] {
        let params = GrnndParams {
            update_order: order,
            new_old_flags: false,
            final_reverse_edges: true,
            ..cfg.params.clone()
        };
        build_and_check(
            &ctx,
            &f,
            n,
            dim,
            Metric::L2Squared,
            &Config { params, ..cfg },
        );
    }
    // Tiny sets: one point, two points, n - 1 < S.
    for tiny in [1usize, 2, 5] {
        build_and_check(&ctx, &f[..tiny * dim], tiny, dim, Metric::L2Squared, &cfg);
    }
    // Quality: the true nearest neighbour is in a vertex's row about as often as in the CPU
    // RNN-Descent graph at the same parameters (uniform 24-d data is hard for both), with rows
    // filled from pruned candidates (cfg's fill_fraction, 0.5) and without (0: the kept rows).
    let view = DatasetView::new(&f, n, dim).unwrap();
    let l2 = Metric::L2Squared.distance_fn::<f32>();
    let nearest: Vec<NodeId> = (0..n)
        .map(|v| {
            let nn = (0..n).filter(|&u| u != v).min_by(|&a, &b| {
                l2.eval(view.row(v), view.row(a))
                    .total_cmp(&l2.eval(view.row(v), view.row(b)))
            });
            nn.unwrap() as NodeId
        })
        .collect();
    for fill_fraction in [cfg.params.fill_fraction, 0.0] {
        let params = GrnndParams {
            fill_fraction,
            ..cfg.params.clone()
        };
        let (g, stats) = Grnnd::new(&ctx)
            .build(view, Metric::L2Squared, &params, &BuildCtx::new(3))
            .unwrap();
        if fill_fraction == 0.0 {
            assert_eq!(stats.filled_edges, 0, "{stats:?}");
        }
        let cpu = weft_core::GraphBuilder::build(
            &weft_rnndescent::RnnDescentCpu,
            view,
            Metric::L2Squared,
            &params,
            &BuildCtx::new(3),
        )
        .unwrap();
        let (mut hits, mut cpu_hits) = (0usize, 0usize);
        for v in 0..n {
            hits += g.row(v).contains(&nearest[v]) as usize;
            cpu_hits += cpu.row(v).contains(&nearest[v]) as usize;
        }
        assert!(
            hits as f64 >= cpu_hits as f64 - 0.05 * n as f64,
            "fill_fraction {fill_fraction}: nearest neighbour in the row for {hits} of {n} (CPU \
             RNN-Descent: {cpu_hits})"
        );
    }
}

#[test]
fn grnnd_errors_are_typed() {
    let Some(ctx) = ctx_or_skip("grnnd_errors_are_typed") else {
        return;
    };
    let data = vec![0.5f32; 100 * 8];
    let view = DatasetView::new(&data, 100, 8).unwrap();
    let b = BuildCtx::new(1);
    for bad in [
        GrnndParams {
            r: 300,
            ..Default::default()
        },
        GrnndParams {
            s: 0,
            ..Default::default()
        },
        GrnndParams {
            degree: 65,
            ..Default::default()
        },
        GrnndParams {
            rho: 0.0,
            ..Default::default()
        },
        GrnndParams {
            max_pairs: Some(0),
            ..Default::default()
        },
        GrnndParams {
            fill_fraction: 1.5,
            ..Default::default()
        },
    ] {
        let e = Grnnd::new(&ctx)
            .build(view, Metric::L2Squared, &bad, &b)
            .unwrap_err();
        assert!(matches!(e, Error::InvalidParams { .. }), "{e}");
    }
    let e = Grnnd::new(&ctx)
        .with_budget(1000)
        .build(view, Metric::L2Squared, &GrnndParams::default(), &b)
        .unwrap_err();
    assert!(matches!(e, Error::OutOfDeviceMemory { .. }), "{e}");
    let mut nan = data.clone();
    nan[17] = f32::NAN;
    let e = Grnnd::new(&ctx)
        .build(
            DatasetView::new(&nan, 100, 8).unwrap(),
            Metric::L2Squared,
            &GrnndParams::default(),
            &b,
        )
        .unwrap_err();
    assert!(!matches!(e, Error::Gpu(_)), "{e}");
    // Cancellation before the first round.
    let b = BuildCtx::new(1);
    b.cancel_token().cancel();
    let e = Grnnd::new(&ctx)
        .build(view, Metric::L2Squared, &GrnndParams::default(), &b)
        .unwrap_err();
    assert!(matches!(e, Error::Cancelled), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn grnnd_update_oracle_on_random_pools(
        n in 2usize..400,
        dim in 1usize..20,
        r in 1usize..80,
        fill in 0usize..80,
        order in 0u8..3,
        new_old in any::<bool>(),
        strict in any::<bool>(),
        ip in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let Some(ctx) = gpu_or_skip("grnnd_update_oracle_on_random_pools") else {
            return Ok(());
        };
        let order =
            [UpdateOrder::Random, UpdateOrder::Ascending, UpdateOrder::Descending][order as usize];
        let cfg = config(order, new_old, strict, r, seed);
        let metric = if ip { Metric::InnerProduct } else { Metric::L2Squared };
        check_update(&ctx, n, dim, r, fill, metric, &cfg, seed);
    }

    #[test]
    fn grnnd_update_recording_oracle_on_random_pools(
        n in 2usize..300,
        dim in 1usize..16,
        r in 1usize..80,
        fill in 0usize..80,
        fill_len in 1usize..80,
        order in 0u8..3,
        new_old in any::<bool>(),
        strict in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let Some(ctx) = gpu_or_skip("grnnd_update_recording_oracle_on_random_pools") else {
            return Ok(());
        };
        let order =
            [UpdateOrder::Random, UpdateOrder::Ascending, UpdateOrder::Descending][order as usize];
        let cfg = config(order, new_old, strict, r, seed);
        let fill_len = 1 + (fill_len - 1) % r;
        check_recording(&ctx, n, dim, r, fill, fill_len, Metric::L2Squared, &cfg, seed);
    }

    #[test]
    fn grnnd_finalize_fill_oracle_on_random_inputs(
        n in 1usize..300,
        r in 1usize..120,
        degree in 1usize..120,
        fill in 0usize..121,
        seed in any::<u64>(),
    ) {
        let Some(ctx) = gpu_or_skip("grnnd_finalize_fill_oracle_on_random_inputs") else {
            return Ok(());
        };
        let degree = 1 + (degree - 1) % r;
        let fill_len = fill % (degree + 1);
        check_finalize_fill(&ctx, n, r, degree, fill_len, seed);
    }

    #[test]
    fn grnnd_insert_oracle_on_random_batches(
        r in 1usize..100,
        m in 1usize..3000,
        rows in 1usize..4,
        seed in any::<u64>(),
    ) {
        let Some(ctx) = gpu_or_skip("grnnd_insert_oracle_on_random_batches") else {
            return Ok(());
        };
        let mut rng = SplitMix64::new(seed);
        let pool = PoolRows::from_rows(&vec![Vec::new(); rows], r).unwrap();
        let owners: Vec<u32> = (0..m).map(|_| rng.below(rows as u64) as u32).collect();
        // Distinct ids per owner (ids above the row count, so no self-loops).
        let entries: Vec<u64> = (0..m)
            .map(|i| pack(rng.below(30) as f32, rng.below(2) == 0, (rows + i) as u32))
            .collect();
        let out = insert(&ctx, &pool, &owners, &entries).unwrap();
        for owner in 0..rows {
            let mut want: Vec<u64> = owners.iter().zip(&entries)
                .filter(|(o, _)| **o as usize == owner).map(|(_, e)| *e).collect();
            want.sort_unstable();
            want.truncate(r);
            let mut got = out.row(owner);
            got.sort_unstable();
            prop_assert_eq!(got, want);
        }
    }
}

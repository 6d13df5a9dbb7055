//! GPU tests: each skips itself visibly without a GPU (`SKIPPED (no CUDA device: ...)`), and
//! fails instead under `WEFT_REQUIRE_GPU=1`.

use half::f16;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use weft_core::distance::reference_distance;
use weft_core::rng::{SplitMix64, below, hash3, mix64};
use weft_core::{Dataset, Element, Error, INVALID, Metric};
use weft_gpu::context::PINNED_TRANSFER_THRESHOLD;
use weft_gpu::testing::{
    affine_walks_on_device, gpu_or_skip, gpu_required, pair_distances_on_device, rng_on_device,
    tag_set_on_device, visited_set_on_device, warp_sort_on_device,
};
use weft_gpu::{DeviceMatrix, GpuContext, KernelLoadPath, KernelMode, probe};

/// Proptest cases per oracle test (`WEFT_GPU_CASES`, default 12).
fn cases() -> u32 {
    std::env::var("WEFT_GPU_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

fn random<T: Element>(rows: usize, dim: usize, seed: u64) -> Dataset<T> {
    let mut r = SplitMix64::new(seed);
    Dataset::from_fn(rows, dim, |_, _| {
        let v = r.next_f32() * 4.0 - 2.0;
        match T::DTYPE {
            weft_core::DType::U8 => T::from_f32((v + 2.0) * 60.0),
            weft_core::DType::I8 => T::from_f32(v * 60.0),
            _ => T::from_f32(v),
        }
    })
    .unwrap()
}

#[test]
fn probe_never_panics() {
    match probe() {
        Ok(ctx) => {
            let i = ctx.info();
            eprintln!("device: {i:?}");
            assert!(i.sm_count > 0 && i.total_memory > 0);
            let (free, total) = ctx.memory().unwrap();
            assert!(free <= total);
        }
        Err(e) => {
            assert!(
                !gpu_required(),
                "WEFT_REQUIRE_GPU is set but probe failed: {e}"
            );
            assert!(matches!(e, Error::Unsupported(_) | Error::Gpu(_)), "{e:?}");
        }
    }
}

#[test]
fn rng_header_matches_weft_core() {
    let Some(ctx) = gpu_or_skip("rng_header_matches_weft_core") else {
        return;
    };
    for seed in [0u64, 1, 0xdead_beef_cafe_f00d, u64::MAX] {
        let n = 1000u64;
        let got = rng_on_device(&ctx, seed, 5000, n).unwrap();
        for i in 0..5000u64 {
            let g = &got[3 * i as usize..3 * i as usize + 3];
            assert_eq!(g[0], mix64(i ^ seed), "mix64 at {i}");
            assert_eq!(g[1], hash3(seed, i, 7 * i + 3), "hash3 at {i}");
            assert_eq!(g[2], below(hash3(seed, i, 1), n + i), "below at {i}");
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The model of `coprime_step` in `weft/rng.cuh`: `below(bits, m)` (1 for 0), then the next
/// values up, wrapping from `m - 1` to 1, until one is coprime to `m` (64 tries, else 1).
fn coprime_step_model(bits: u64, m: u32) -> u32 {
    if m <= 1 {
        return 1;
    }
    let mut g = (below(bits, u64::from(m)) as u32).max(1);
    for _ in 0..64 {
        if gcd(u64::from(g), u64::from(m)) == 1 {
            return g;
        }
        g = if g + 1 < m { g + 1 } else { 1 };
    }
    1
}

#[test]
fn affine_walk_header_matches_model_and_permutes() {
    let Some(ctx) = gpu_or_skip("affine_walk_header_matches_model_and_permutes") else {
        return;
    };
    // Small moduli (walked whole: a permutation), even and highly composite ones (many steps
    // rejected), primes, and the largest.
    let kinds: [u32; 16] = [
        0,
        1,
        2,
        3,
        4,
        6,
        12,
        30,
        97,
        120,
        128,
        210,
        30_030,
        999_983,
        1 << 31,
        u32::MAX,
    ];
    let steps = 210;
    for seed in [0u64, 0x5eed_0fa1] {
        let ms: Vec<u32> = (0..40).flat_map(|_| kinds).collect();
        let got = affine_walks_on_device(&ctx, seed, &ms, steps).unwrap();
        assert_eq!(got.len(), ms.len() * (2 + steps));
        for (i, &m) in ms.iter().enumerate() {
            let row = &got[i * (2 + steps)..(i + 1) * (2 + steps)];
            let h = hash3(seed, i as u64, 0);
            let (o, g) = (row[0], row[1]);
            assert_eq!(u64::from(o), below(h, u64::from(m)), "o, walk {i}, m {m}");
            assert_eq!(
                g,
                coprime_step_model(mix64(h ^ 0x5bd1_e995), m),
                "g, walk {i}, m {m}"
            );
            if m == 0 {
                assert_eq!(o, 0);
                assert!(row[2..].iter().all(|&x| x == 0), "m = 0 writes no offsets");
                continue;
            }
            assert!(o < m, "o {o} >= m {m}");
            assert!(g >= 1 && (m == 1 || g < m), "g {g}, m {m}");
            assert_eq!(
                gcd(u64::from(g), u64::from(m)),
                1,
                "g {g} not coprime to {m}"
            );
            for (j, &x) in row[2..].iter().enumerate() {
                let want = (u64::from(o) + j as u64 * u64::from(g)) % u64::from(m);
                assert_eq!(u64::from(x), want, "at({j}), walk {i}, m {m}");
            }
            if m as usize <= steps {
                let mut seen = row[2..2 + m as usize].to_vec();
                seen.sort_unstable();
                assert!(
                    seen.iter().copied().eq(0..m),
                    "the first m offsets of walk {i} (m {m}) are not a permutation"
                );
            }
        }
    }
}

fn check_pairs<T: Element>(ctx: &GpuContext, dim: usize, seed: u64) {
    let a = random::<T>(37, dim, seed);
    let b = random::<T>(37, dim, seed ^ 0x55);
    for m in Metric::ALL {
        let got = pair_distances_on_device(ctx, a.view(), b.view(), m).unwrap();
        for (i, &g) in got.iter().enumerate() {
            let want = reference_distance(m, a.row(i), b.row(i));
            let scale: f64 = a
                .row(i)
                .iter()
                .chain(b.row(i))
                .map(|v| (v.to_f32() as f64).powi(2))
                .sum();
            let tol = if m == Metric::Cosine {
                1e-5
            } else {
                1e-6 * (scale + 1.0)
            };
            assert!(
                (g as f64 - want).abs() <= tol,
                "{m:?} {:?} dim {dim} row {i}: gpu {g} cpu {want}",
                T::DTYPE,
            );
        }
    }
}

#[test]
fn warp_distance_matches_reference() {
    let Some(ctx) = gpu_or_skip("warp_distance_matches_reference") else {
        return;
    };
    for (i, dim) in [1usize, 3, 16, 17, 100, 128, 300, 1000]
        .into_iter()
        .enumerate()
    {
        check_pairs::<f32>(&ctx, dim, i as u64);
        check_pairs::<f16>(&ctx, dim, i as u64);
        check_pairs::<u8>(&ctx, dim, i as u64);
        check_pairs::<i8>(&ctx, dim, i as u64);
    }
}

#[test]
fn warp_sort_sorts_pairs() {
    let Some(ctx) = gpu_or_skip("warp_sort_sorts_pairs") else {
        return;
    };
    let mut r = SplitMix64::new(3);
    let runs = 50;
    // Few distinct distances, so that ties are ordered by id.
    let d: Vec<f32> = (0..runs * 32).map(|_| r.below(8) as f32).collect();
    let ids: Vec<u32> = (0..runs * 32).map(|_| r.below(1000) as u32).collect();
    let (gd, gi) = warp_sort_on_device(&ctx, &d, &ids).unwrap();
    for run in 0..runs {
        let mut want: Vec<(f32, u32)> = (0..32)
            .map(|j| (d[run * 32 + j], ids[run * 32 + j]))
            .collect();
        want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let got: Vec<(f32, u32)> = (0..32)
            .map(|j| (gd[run * 32 + j], gi[run * 32 + j]))
            .collect();
        assert_eq!(got, want, "run {run}");
    }
}

/// The CPU model of `visited_hash` in kernels/include/weft/hashset.cuh.
fn visited_hash(mut id: u32) -> u32 {
    id ^= id >> 16;
    id = id.wrapping_mul(0x7feb_352d);
    id ^= id >> 15;
    id = id.wrapping_mul(0x846c_a68b);
    id ^= id >> 16;
    id
}

/// The CPU model of one run of in-order inserts: (answers, final table).
fn visited_model(ids: &[u32], bits: u32) -> (Vec<bool>, Vec<u32>) {
    let mask = (1u32 << bits) - 1;
    let mut table = vec![INVALID; 1 << bits];
    let answers = ids
        .iter()
        .map(|&id| {
            let mut h = visited_hash(id) & mask;
            for _ in 0..=mask {
                if table[h as usize] == INVALID {
                    table[h as usize] = id;
                    return true;
                }
                if table[h as usize] == id {
                    return false;
                }
                h = (h + 1) & mask;
            }
            true
        })
        .collect();
    (answers, table)
}

/// Visited sets (weft/hashset.cuh): in-order inserts match the CPU model slot for slot, full
/// tables included; concurrent inserts say "new" exactly once per distinct id and hold exactly
/// the distinct ids.
#[test]
fn visited_set_matches_model() {
    let Some(ctx) = gpu_or_skip("visited_set_matches_model") else {
        return;
    };
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        ..Config::default()
    });
    let strategy = (1usize..700, 1u32..11, 1u32..2000, 1usize..4, any::<u64>());
    runner
        .run(&strategy, |(per_block, bits, range, blocks, seed)| {
            let mut r = SplitMix64::new(seed);
            let ids: Vec<u32> = (0..per_block * blocks)
                .map(|_| below(r.next_u64(), range as u64) as u32)
                .collect();
            let ordered = visited_set_on_device(&ctx, &ids, per_block, bits, true).unwrap();
            let shared = visited_set_on_device(&ctx, &ids, per_block, bits, false).unwrap();
            let size = 1usize << bits;
            for (b, run) in ids.chunks(per_block).enumerate() {
                let (answers, table) = visited_model(run, bits);
                let at = b * per_block..(b + 1) * per_block;
                prop_assert_eq!(&ordered.is_new[at.clone()], &answers[..]);
                prop_assert_eq!(&ordered.tables[b * size..(b + 1) * size], &table[..]);
                let mut distinct: Vec<u32> = run.to_vec();
                distinct.sort_unstable();
                distinct.dedup();
                if distinct.len() > size {
                    continue; // a full table forgets ids by design
                }
                prop_assert!(ordered.contains[at.clone()].iter().all(|&c| c));
                prop_assert!(shared.contains[at.clone()].iter().all(|&c| c));
                let mut held: Vec<u32> = shared.tables[b * size..(b + 1) * size]
                    .iter()
                    .copied()
                    .filter(|&x| x != INVALID)
                    .collect();
                held.sort_unstable();
                prop_assert_eq!(&held, &distinct);
                let mut new_ids: Vec<u32> = run
                    .iter()
                    .zip(&shared.is_new[at])
                    .filter(|(_, n)| **n)
                    .map(|(&id, _)| id)
                    .collect();
                new_ids.sort_unstable();
                prop_assert_eq!(&new_ids, &distinct, "one 'new' per distinct id");
            }
            Ok(())
        })
        .unwrap();
}

/// `tag_hash` of weft/hashset.cuh: a bijection of `[0, 2^key_bits)`.
fn tag_hash(id: u32, key_bits: u32) -> u32 {
    let mask = if key_bits >= 32 {
        u32::MAX
    } else {
        (1u32 << key_bits) - 1
    };
    let s = key_bits / 2;
    let mut x = id & mask;
    x ^= x >> s;
    x = x.wrapping_mul(0x9e37_79b1) & mask;
    x ^= x >> s;
    x = x.wrapping_mul(0x85eb_ca6b) & mask;
    x ^= x >> s;
    x
}

/// Tag bits, probe limit and empty slot of a tag set (weft/hashset.cuh).
const TAG_BITS: u32 = 12;
const TAG_PROBES: u32 = 15;
const TAG_EMPTY: u32 = 0xffff;

/// The slot of a tag set's words.
fn tag_slot(words: &[u32], pos: u32) -> u32 {
    (words[(pos >> 1) as usize] >> ((pos & 1) * 16)) & 0xffff
}

/// CPU model of in-order inserts into a tag set of `2^bits` slots: each insert's answer (0 seen,
/// 1 new, 2 lost) and the final words.
fn tag_set_model(ids: &[u32], bits: u32) -> (Vec<u8>, Vec<u32>) {
    let mask = (1u32 << bits) - 1;
    let mut words = vec![u32::MAX; 1 << (bits - 1)];
    let answers = ids
        .iter()
        .map(|&id| {
            let h = tag_hash(id, bits + TAG_BITS);
            let mut pos = h & mask;
            for probe in 0..TAG_PROBES {
                let entry = (probe << TAG_BITS) | (h >> bits);
                let slot = tag_slot(&words, pos);
                if slot == entry {
                    return 0;
                }
                if slot == TAG_EMPTY {
                    let shift = (pos & 1) * 16;
                    let w = &mut words[(pos >> 1) as usize];
                    *w = (*w & !(0xffff << shift)) | (entry << shift);
                    return 1;
                }
                pos = (pos + 1) & mask;
            }
            2
        })
        .collect();
    (answers, words)
}

/// The ids a tag set's words hold, each named through `by_hash` (hash -> id of the inserted
/// ids); `None` if a slot holds an entry that names no inserted id.
fn tag_set_held(
    words: &[u32],
    bits: u32,
    by_hash: &std::collections::HashMap<u32, u32>,
) -> Option<Vec<u32>> {
    let mask = (1u32 << bits) - 1;
    let mut held = Vec::new();
    for pos in 0..=mask {
        let e = tag_slot(words, pos);
        if e == TAG_EMPTY {
            continue;
        }
        let home = pos.wrapping_sub(e >> TAG_BITS) & mask;
        let h = ((e & ((1 << TAG_BITS) - 1)) << bits) | home;
        held.push(*by_hash.get(&h)?);
    }
    held.sort_unstable();
    Some(held)
}

#[test]
fn tag_hash_is_a_bijection() {
    for key_bits in [13u32, 14, 17, 20] {
        let mut seen = vec![false; 1 << key_bits];
        for id in 0..1u32 << key_bits {
            let h = tag_hash(id, key_bits);
            assert!(
                h < 1 << key_bits && !seen[h as usize],
                "key_bits {key_bits} id {id}"
            );
            seen[h as usize] = true;
        }
    }
}

/// Tag sets (weft/hashset.cuh): in-order inserts match the CPU model slot for slot (full sets
/// and lost ids included); concurrent inserts say "new" exactly once per id they hold, hold only
/// inserted ids, each once, and membership agrees with what they hold.
#[test]
fn tag_set_matches_model() {
    let Some(ctx) = gpu_or_skip("tag_set_matches_model") else {
        return;
    };
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        ..Config::default()
    });
    let strategy = (1usize..900, 1u32..12, 1u32..24, 1usize..4, any::<u64>());
    runner
        .run(&strategy, |(per_block, bits, range_bits, blocks, seed)| {
            let mut r = SplitMix64::new(seed);
            let range = 1u64 << range_bits.min(bits + TAG_BITS);
            let ids: Vec<u32> = (0..per_block * blocks)
                .map(|_| below(r.next_u64(), range) as u32)
                .collect();
            let ordered = tag_set_on_device(&ctx, &ids, per_block, bits, true).unwrap();
            let shared = tag_set_on_device(&ctx, &ids, per_block, bits, false).unwrap();
            let words = 1usize << (bits - 1);
            for (b, run) in ids.chunks(per_block).enumerate() {
                let (answers, table) = tag_set_model(run, bits);
                let at = b * per_block..(b + 1) * per_block;
                prop_assert_eq!(&ordered.answers[at.clone()], &answers[..]);
                prop_assert_eq!(&ordered.tables[b * words..(b + 1) * words], &table[..]);
                let by_hash: std::collections::HashMap<u32, u32> = run
                    .iter()
                    .map(|&id| (tag_hash(id, bits + TAG_BITS), id))
                    .collect();
                for (tables, res) in [(&ordered.tables, &ordered), (&shared.tables, &shared)] {
                    let held = tag_set_held(&tables[b * words..(b + 1) * words], bits, &by_hash);
                    prop_assert!(held.is_some(), "a slot names an id never inserted");
                    let held = held.unwrap();
                    prop_assert!(held.windows(2).all(|w| w[0] < w[1]), "an id held twice");
                    for (i, &id) in run.iter().enumerate() {
                        let is_held = held.binary_search(&id).is_ok();
                        prop_assert_eq!(res.contains[b * per_block + i], is_held);
                        let news = run
                            .iter()
                            .zip(&res.answers[at.clone()])
                            .filter(|&(&x, &a)| x == id && a == 1)
                            .count();
                        prop_assert_eq!(news, usize::from(is_held), "id {}", id);
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn device_matrix_round_trip() {
    let Some(ctx) = gpu_or_skip("device_matrix_round_trip") else {
        return;
    };
    let a = random::<f16>(33, 21, 9);
    let m = DeviceMatrix::upload(&ctx, a.view()).unwrap();
    assert_eq!(m.stride(), 32);
    assert_eq!(m.download(&ctx).unwrap().as_slice(), a.as_slice());
    let b = random::<f32>(10, 32, 10);
    let m = DeviceMatrix::upload(&ctx, b.view()).unwrap();
    assert_eq!(m.download(&ctx).unwrap().as_slice(), b.as_slice());
}

#[test]
fn device_matrix_round_trip_through_pinned_staging() {
    let Some(ctx) = gpu_or_skip("device_matrix_round_trip_through_pinned_staging") else {
        return;
    };
    // 20 MiB padded (three staging chunks, the last partial); rows of 37 u8 padded to 48 so
    // rows straddle chunk boundaries, and an f32 set without padding.
    let a = random::<u8>(20 * (1 << 20) / 48 + 7, 37, 11);
    let m = DeviceMatrix::upload(&ctx, a.view()).unwrap();
    assert_eq!(m.download(&ctx).unwrap().as_slice(), a.as_slice());
    let b = random::<f32>(3 * (1 << 20) / 32 + 5, 32, 12);
    let m = DeviceMatrix::upload(&ctx, b.view()).unwrap();
    assert_eq!(m.download(&ctx).unwrap().as_slice(), b.as_slice());
    // Re-uploading fewer rows into the same matrix replaces them, padding included.
    let c = random::<u8>(1000, 37, 13);
    let mut m = DeviceMatrix::upload(&ctx, a.view()).unwrap();
    m.upload_rows(&ctx, c.view()).unwrap();
    assert_eq!(m.download(&ctx).unwrap().as_slice(), c.as_slice());
    // Plain buffers above the threshold.
    let ids: Vec<u32> = (0..5_000_000u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let buf = ctx.upload(&ids).unwrap();
    assert_eq!(ctx.download(&buf, ids.len()).unwrap(), ids);
    assert_eq!(ctx.download(&buf, 3).unwrap(), ids[..3]);
}

/// Panics naming the first element where `got` differs from `want` (lengths included).
fn assert_same<T: PartialEq + std::fmt::Debug>(what: &str, got: &[T], want: &[T]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: element {i} is {:?}, want {:?}", got[i], want[i]);
    }
}

#[test]
fn download_view_of_sub_ranges() {
    let Some(ctx) = gpu_or_skip("download_view_of_sub_ranges") else {
        return;
    };
    // 24 MiB of u32: views below, at and above the pinned threshold (2 MiB elements), with
    // unaligned starts, partial and whole last staging chunks.
    let ids: Vec<u32> = (0..6_000_000u32)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ 0x5bd1_e995)
        .collect();
    let buf = ctx.upload(&ids).unwrap();
    let at = PINNED_TRANSFER_THRESHOLD / 4;
    for (lo, hi) in [
        (0, 0),
        (5, 5),
        (0, 1),
        (3, 1000),
        (12_345, 12_345 + at - 1),
        (7, 7 + at),
        (1, ids.len() - 1),
        (0, 2 * at),
        (2 * at + 1, ids.len()),
        (0, ids.len()),
    ] {
        let got = ctx.download_view(&buf.slice(lo..hi)).unwrap();
        assert_same(&format!("u32 view {lo}..{hi}"), &got, &ids[lo..hi]);
    }
    // A view of a view, and `download` (a prefix) agreeing with `download_view`.
    let outer = buf.slice(1000..ids.len() - 1000);
    let got = ctx.download_view(&outer.slice(17..at + 40)).unwrap();
    assert_same("nested view", &got, &ids[1017..1000 + at + 40]);
    let n = 2 * at + 11;
    assert_same(
        "download prefix",
        &ctx.download(&buf, n).unwrap(),
        &ctx.download_view(&buf.slice(0..n)).unwrap(),
    );
    // Two-byte elements, views starting at odd elements (device addresses not 4-byte aligned).
    let halves: Vec<u16> = (0..9_000_001u32)
        .map(|i| (i.wrapping_mul(40_503) >> 7) as u16)
        .collect();
    let hbuf = ctx.upload(&halves).unwrap();
    for (lo, hi) in [(1, 101), (1, halves.len()), (333, 333 + at * 2 + 1)] {
        let got = ctx.download_view(&hbuf.slice(lo..hi)).unwrap();
        assert_same(&format!("u16 view {lo}..{hi}"), &got, &halves[lo..hi]);
    }
}

#[test]
fn nvrtc_path_compiles_and_caches() {
    let Some(ctx) = gpu_or_skip("nvrtc_path_compiles_and_caches") else {
        return;
    };
    let ctx = ctx.with_kernel_mode(KernelMode::Nvrtc);
    let p = ctx.load_module(weft_gpu::kernel_modules()[0]).unwrap();
    assert!(matches!(p, KernelLoadPath::Nvrtc { .. }), "{p:?}");
    let got = rng_on_device(&ctx, 5, 100, 10).unwrap();
    assert_eq!(got[3], mix64(1 ^ 5));
    // A second context finds the cubin in the disk cache (when the cache folder is writable).
    let ctx2 = probe().unwrap().with_kernel_mode(KernelMode::Nvrtc);
    let p2 = ctx2.load_module(weft_gpu::kernel_modules()[0]).unwrap();
    eprintln!("first load: {p}; second load: {p2}");
    assert!(matches!(p2, KernelLoadPath::Nvrtc { .. }));
    assert_eq!(ctx2.kernel_load_paths(), vec![("testing", p2)]);
}

/// Where NVRTC compiles, a launch compiles its kernel's unit only: the f32 pair distance
/// compiles neither the other element types nor the module's plain kernels, and still agrees
/// with the CPU reference.
#[test]
fn nvrtc_compiles_only_the_launched_kernels() {
    let Some(ctx) = gpu_or_skip("nvrtc_compiles_only_the_launched_kernels") else {
        return;
    };
    let ctx = ctx.with_kernel_mode(KernelMode::Nvrtc);
    if let Err(e) = ctx.nvrtc() {
        assert!(!gpu_required(), "no NVRTC: {e}");
        eprintln!("nvrtc_compiles_only_the_launched_kernels: SKIPPED (no NVRTC: {e})");
        return;
    }
    let a = random::<f32>(9, 40, 3);
    let b = random::<f32>(9, 40, 4);
    for m in Metric::ALL {
        let got = pair_distances_on_device(&ctx, a.view(), b.view(), m).unwrap();
        for (i, &g) in got.iter().enumerate() {
            let want = reference_distance(m, a.row(i), b.row(i));
            assert!(
                (g as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()),
                "{m:?} row {i}: {g} vs {want}"
            );
        }
    }
    assert_eq!(
        ctx.compiled_units(),
        vec![("testing", vec!["testing_pair_distance_f32"])]
    );
    // The whole module is not loaded, and the unit shows as NVRTC in the load paths.
    let paths = ctx.kernel_load_paths();
    assert_eq!(paths.len(), 1, "{paths:?}");
    assert!(
        matches!(paths[0], ("testing", KernelLoadPath::Nvrtc { .. })),
        "{paths:?}"
    );
}

/// A binary with cubins for the device never compiles a kernel on it: every module with a
/// compatible cubin loads it (issue 18 item 5: first use spent 35-49 s in NVRTC when the pack
/// had been built without nvcc). Skips visibly where the build had no nvcc.
#[test]
fn embedded_cubins_load_without_compiling() {
    let Some(ctx) = gpu_or_skip("embedded_cubins_load_without_compiling") else {
        return;
    };
    let ctx = ctx.with_kernel_mode(KernelMode::Auto);
    let arch = ctx.info().arch();
    let mut checked = 0;
    for m in weft_gpu::kernel_modules() {
        match weft_gpu::loader::compatible_cubin(m.cubins, arch) {
            Some((built, _)) => {
                let p = ctx.load_module(m).unwrap();
                assert_eq!(
                    p,
                    KernelLoadPath::Cubin { arch: built },
                    "module {}",
                    m.name
                );
                checked += 1;
            }
            None => eprintln!(
                "embedded_cubins_load_without_compiling: module {} has no cubin for sm_{arch} \
                 (cubins: {:?}); SKIPPED for it",
                m.name,
                m.cubin_archs()
            ),
        }
    }
    // A run that must have cubins (the device pack's, WEFT_KERNELS=cubin) checked them all.
    if matches!(KernelMode::from_env(), Ok(KernelMode::Cubin)) {
        assert_eq!(checked, weft_gpu::kernel_modules().len());
    }
}

/// NVRTC compiles weft-gpu's modules for sm_80 and sm_90 without a warning; needs NVRTC but no
/// GPU (skips visibly without NVRTC, fails under WEFT_REQUIRE_GPU).
#[test]
fn nvrtc_compiles_every_module() {
    weft_gpu::testing::assert_nvrtc_compiles(
        "nvrtc_compiles_every_module",
        &weft_gpu::kernel_modules(),
    );
}

#[test]
fn host_copies_wait_once_and_fill_every_destination() {
    let Some(ctx) = gpu_or_skip("host_copies_wait_once_and_fill_every_destination") else {
        return;
    };
    let ids: Vec<u32> = (0..1000u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let dists: Vec<f32> = (0..777).map(|i| i as f32 * 0.5 - 3.0).collect();
    let counters: Vec<u64> = vec![u64::MAX - 5, 42];
    let halves: Vec<u16> = (0..13u16).collect();
    let (bi, bd, bc, bh) = (
        ctx.upload(&ids).unwrap(),
        ctx.upload(&dists).unwrap(),
        ctx.upload(&counters).unwrap(),
        ctx.upload(&halves).unwrap(),
    );
    let mut gi = vec![0u32; 990];
    let mut gd = vec![0f32; 777];
    let mut gc = [0u64; 2];
    let mut gh = vec![0u16; 13];
    let mut empty: [u32; 0] = [];
    let mut copies = ctx.host_copies().unwrap();
    // Sub-ranges at odd offsets, element sizes 2, 4 and 8, and an empty copy.
    copies.add(&bi.slice(7..997), &mut gi).unwrap();
    copies.add(&bh.slice(0..13), &mut gh).unwrap();
    copies.add(&bd.slice(0..777), &mut gd).unwrap();
    copies.add(&bi.slice(3..3), &mut empty).unwrap();
    copies.add(&bc.slice(0..2), &mut gc).unwrap();
    copies.finish().unwrap();
    assert_eq!(gi, ids[7..997]);
    assert_eq!(gd, dists);
    assert_eq!(gc, [u64::MAX - 5, 42]);
    assert_eq!(gh, halves);
    // A length mismatch is a typed error; copies dropped unfinished leave the context usable.
    let mut short = vec![0u32; 3];
    let mut first = vec![0u32; 10];
    let mut copies = ctx.host_copies().unwrap();
    copies.add(&bi.slice(0..10), &mut first).unwrap();
    assert!(matches!(
        copies.add(&bi.slice(0..4), &mut short),
        Err(weft_core::Error::InvalidInput(_))
    ));
    drop(copies);
    assert_eq!(ctx.download(&bi, 1000).unwrap(), ids);
}

//! Helpers for GPU tests, here and in other crates, and device-side checks of the shared kernel
//! headers (`kernels/include/weft/`) against their Rust counterparts.
//!
//! GPU tests call [`gpu_or_skip`] first: without a usable GPU it prints
//! `SKIPPED (no CUDA device: <reason>)` to stderr (past the test harness's capture, so that the
//! skip is visible) and returns `None`; with `WEFT_REQUIRE_GPU=1` it panics instead, so that a run
//! on a GPU machine cannot pass by skipping.

use std::io::Write as _;

use weft_core::{DatasetView, Element, Metric, NodeId, Result};

use crate::context::{GpuContext, probe};
use crate::launch;
use crate::matrix::DeviceMatrix;

/// Whether `WEFT_REQUIRE_GPU` asks for GPU tests to fail rather than skip.
pub fn gpu_required() -> bool {
    std::env::var("WEFT_REQUIRE_GPU").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// A GPU context for test `test`, or `None` after printing why the test is skipped.
///
/// # Panics
/// When there is no usable GPU and `WEFT_REQUIRE_GPU=1` is set: that is the point of the
/// variable.
pub fn gpu_or_skip(test: &str) -> Option<GpuContext> {
    match probe() {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            if gpu_required() {
                panic!("{test}: WEFT_REQUIRE_GPU is set but no CUDA device can be used: {e}");
            }
            let _ = writeln!(std::io::stderr(), "{test}: SKIPPED (no CUDA device: {e})");
            None
        }
    }
}

/// Compiles every module of `modules` with NVRTC for sm_80 and sm_90 and asserts an empty log:
/// the check each crate with kernels runs on its own modules. Needs NVRTC but no GPU: without
/// NVRTC it says so on stderr and returns (and fails under `WEFT_REQUIRE_GPU`).
pub fn assert_nvrtc_compiles(test: &str, modules: &[&crate::KernelModule]) {
    let nv = match crate::nvrtc::Nvrtc::load() {
        Ok(nv) => nv,
        Err(e) => {
            assert!(
                !gpu_required(),
                "{test}: WEFT_REQUIRE_GPU is set but NVRTC is missing: {e}"
            );
            let _ = writeln!(std::io::stderr(), "{test}: SKIPPED (no NVRTC: {e})");
            return;
        }
    };
    for m in modules {
        for arch in [80, 90] {
            let (cubin, log) = nv
                .compile_cubin(
                    m.source,
                    &format!("{}.cu", m.name),
                    &crate::loader::nvrtc_options(arch),
                )
                .unwrap_or_else(|e| panic!("{test}: module {} sm_{arch}: {e}", m.name));
            assert!(
                !cubin.is_empty(),
                "{test}: module {} sm_{arch}: empty cubin",
                m.name
            );
            assert!(log.is_empty(), "{test}: module {} sm_{arch}: {log}", m.name);
        }
    }
}

/// Runs kernel `testing_rng_u64`: for `i < count`, `[mix64(i ^ seed), hash3(seed, i, 7 i + 3),
/// below(hash3(seed, i, 1), n + i)]`.
pub fn rng_on_device(ctx: &GpuContext, seed: u64, count: usize, n: u64) -> Result<Vec<u64>> {
    let mut out = ctx.alloc_zeros::<u64>(3 * count)?;
    launch::testing_rng(ctx, seed, count, n, &mut out.slice_mut(0..3 * count))?;
    ctx.download(&out, 3 * count)
}

/// Runs kernel `testing_affine_walk` (`AffineWalk` of `weft/rng.cuh`): for walk `i`, of
/// modulus `ms[i]` and key `hash3(seed, i, 0)`, the `2 + steps` words `[o, g, at(0), ...,
/// at(steps - 1)]`, walk after walk (the `at` words are 0 when `ms[i] == 0`).
pub fn affine_walks_on_device(
    ctx: &GpuContext,
    seed: u64,
    ms: &[u32],
    steps: usize,
) -> Result<Vec<u32>> {
    let steps = launch::u32_of(steps, "steps")?;
    let words = ms.len() * (2 + steps as usize);
    if words == 0 {
        return Ok(Vec::new());
    }
    let d_ms = ctx.upload(ms)?;
    let mut out = ctx.alloc_zeros::<u32>(words)?;
    launch::testing_affine_walk(
        ctx,
        seed,
        &d_ms.slice(0..ms.len()),
        steps,
        &mut out.slice_mut(0..words),
    )?;
    ctx.download(&out, words)
}

/// Runs kernel `testing_pair_distance_<dtype>`: `distance(a_i, b_i)` by the warp distance
/// routine of `weft/distance.cuh`.
pub fn pair_distances_on_device<T: Element>(
    ctx: &GpuContext,
    a: DatasetView<'_, T>,
    b: DatasetView<'_, T>,
    metric: Metric,
) -> Result<Vec<f32>> {
    a.check_same_dim(&b, "pair distance rows")?;
    if a.rows() != b.rows() {
        return Err(weft_core::Error::dim_mismatch(
            "pair rows",
            a.rows(),
            b.rows(),
        ));
    }
    let n = a.rows();
    let da = DeviceMatrix::upload(ctx, a)?;
    let db = DeviceMatrix::upload(ctx, b)?;
    let mut out = ctx.alloc_zeros::<f32>(n)?;
    launch::testing_pair_distance::<T>(
        ctx,
        &da.rows_view(0, n)?,
        &db.rows_view(0, n)?,
        n as u32,
        da.stride() as u32,
        metric,
        &mut out.slice_mut(0..n),
    )?;
    ctx.download(&out, n)
}

/// Runs kernel `testing_warp_sort_f32` on runs of 32 (distance, id) pairs.
pub fn warp_sort_on_device(
    ctx: &GpuContext,
    dists: &[f32],
    ids: &[NodeId],
) -> Result<(Vec<f32>, Vec<NodeId>)> {
    if dists.len() != ids.len() || !dists.len().is_multiple_of(32) {
        return Err(weft_core::Error::InvalidInput(
            "warp sort needs equal lengths, a multiple of 32".into(),
        ));
    }
    let n = dists.len();
    let mut d = ctx.upload(dists)?;
    let mut i = ctx.upload(ids)?;
    launch::testing_warp_sort(
        ctx,
        &mut d.slice_mut(0..n.max(1)),
        &mut i.slice_mut(0..n.max(1)),
        (n / 32) as u32,
    )?;
    Ok((ctx.download(&d, n)?, ctx.download(&i, n)?))
}

/// What [`visited_set_on_device`] returns: per id, whether its insert said "new" and whether the
/// set holds it afterwards; per run, the final table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VisitedSetResult {
    /// The answer of each id's insert.
    pub is_new: Vec<bool>,
    /// `visited_contains` of each id after all inserts.
    pub contains: Vec<bool>,
    /// The `2^bits` slots of each run, run after run (`INVALID` = empty).
    pub tables: Vec<NodeId>,
}

/// Runs kernel `testing_visited_set` (the visited sets of `weft/hashset.cuh`): `ids` split into
/// runs of `per_block`, each inserted into its own shared-memory table of `2^bits` slots,
/// concurrently by 256 threads (`exclusive == false`) or in order by one thread.
pub fn visited_set_on_device(
    ctx: &GpuContext,
    ids: &[NodeId],
    per_block: usize,
    bits: u32,
    exclusive: bool,
) -> Result<VisitedSetResult> {
    let (answers, contains, tables) = set_on_device(
        ctx,
        launch::SetKind::Visited,
        ids,
        per_block,
        bits,
        exclusive,
    )?;
    Ok(VisitedSetResult {
        is_new: answers.into_iter().map(|b| b != 0).collect(),
        contains,
        tables,
    })
}

/// Runs `kind`'s set kernel over `ids` in runs of `per_block` (one block and table each):
/// the inserts' answers, the membership afterwards and the tables' words.
fn set_on_device(
    ctx: &GpuContext,
    kind: launch::SetKind,
    ids: &[NodeId],
    per_block: usize,
    bits: u32,
    exclusive: bool,
) -> Result<(Vec<u8>, Vec<bool>, Vec<u32>)> {
    if per_block == 0 || !ids.len().is_multiple_of(per_block) {
        return Err(weft_core::Error::InvalidInput(
            "set ids must be whole runs of per_block > 0".into(),
        ));
    }
    let blocks = ids.len() / per_block;
    let run = launch::SetRun {
        kind,
        per_block: per_block as u32,
        bits,
        blocks: blocks as u32,
        mode: i32::from(exclusive),
    };
    let n = ids.len();
    let words = blocks * kind.table_words(bits.clamp(1, 14));
    let d_ids = ctx.upload(ids)?;
    let mut answers = ctx.alloc_zeros::<u8>(n.max(1))?;
    let mut contains = ctx.alloc_zeros::<u8>(n.max(1))?;
    let mut table = ctx.alloc_zeros::<u32>(words.max(1))?;
    launch::testing_set(
        ctx,
        &run,
        &d_ids.slice(0..n.max(1)),
        &mut answers.slice_mut(0..n.max(1)),
        &mut contains.slice_mut(0..n.max(1)),
        &mut table.slice_mut(0..words.max(1)),
    )?;
    Ok((
        ctx.download(&answers, n)?,
        ctx.download(&contains, n)?
            .into_iter()
            .map(|b| b != 0)
            .collect(),
        ctx.download(&table, words)?,
    ))
}

/// What [`tag_set_on_device`] returns: per id, the insert's answer and whether the set holds it
/// afterwards; per run, the final words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagSetResult {
    /// The answer of each id's insert: 0 already there, 1 new, 2 lost (not recorded).
    pub answers: Vec<u8>,
    /// `tagset_contains` of each id after all inserts.
    pub contains: Vec<bool>,
    /// The `2^(bits - 1)` words of each run, run after run (two 16-bit slots a word, the
    /// lower slot in the low half; `0xFFFF` = empty).
    pub tables: Vec<u32>,
}

/// Runs kernel `testing_tag_set` (the tag sets of `weft/hashset.cuh`): `ids` (each below
/// `2^(bits + 12)`) split into runs of `per_block`, each inserted into its own shared-memory tag
/// set of `2^bits` slots, concurrently by 256 threads (`exclusive == false`) or in order by one
/// thread.
pub fn tag_set_on_device(
    ctx: &GpuContext,
    ids: &[NodeId],
    per_block: usize,
    bits: u32,
    exclusive: bool,
) -> Result<TagSetResult> {
    let (answers, contains, tables) =
        set_on_device(ctx, launch::SetKind::Tag, ids, per_block, bits, exclusive)?;
    Ok(TagSetResult {
        answers,
        contains,
        tables,
    })
}

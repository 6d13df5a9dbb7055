//! Checked launches of weft-gpu's own kernels (device-side tests), and the
//! argument checks every crate's launching code uses ([`need`], [`u32_of`], [`elem_bytes`],
//! [`check_stride`]): a launch checks that each pointer covers what the kernel touches for the
//! shapes it passes, then calls the kernel's generated launcher.

use weft_core::{Element, Error, Metric, Result};

use crate::context::GpuContext;
use crate::kernel::Launch;
use crate::kernels::testing;
use crate::memory::{DeviceView, DeviceViewMut};

/// `v` as a u32 kernel argument, or `InvalidInput` naming `what`.
pub fn u32_of(v: usize, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::InvalidInput(format!("{what} = {v} exceeds u32")))
}

/// `InvalidInput` naming `what` unless a buffer of `len` elements holds `needed`.
pub fn need(len: usize, needed: u64, what: &str) -> Result<()> {
    if (len as u64) < needed {
        return Err(Error::InvalidInput(format!(
            "{what}: buffer of {len} elements, kernel needs {needed}"
        )));
    }
    Ok(())
}

/// Bytes of `rows` rows of `stride` elements of `T`.
pub fn elem_bytes<T: Element>(rows: u32, stride: u32) -> u64 {
    rows as u64 * stride as u64 * std::mem::size_of::<T>() as u64
}

/// `InvalidInput` unless `stride` (elements between row starts) is a positive multiple of 16.
pub fn check_stride(stride: u32) -> Result<()> {
    if stride == 0 || !stride.is_multiple_of(16) {
        return Err(Error::InvalidInput(format!(
            "row stride {stride} is not a positive multiple of 16"
        )));
    }
    Ok(())
}

/// `testing_rng_u64`: three values per index (see kernels/testing/testing.cu).
pub(crate) fn testing_rng(
    ctx: &GpuContext,
    seed: u64,
    count: usize,
    n: u64,
    out: &mut DeviceViewMut<'_, u64>,
) -> Result<()> {
    let count = u32_of(count, "count")?;
    need(out.len(), 3 * count as u64, "testing_rng output")?;
    if count == 0 {
        return Ok(());
    }
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        testing::testing_rng_u64(
            ctx,
            Launch::per_item(count, 256),
            &testing::TestingRngU64Args {
                seed,
                count,
                n,
                out: out.output(),
            },
        )
    }
}

/// `testing_affine_walk`: one thread per walk, `2 + steps` words each (see
/// kernels/testing/testing.cu).
pub(crate) fn testing_affine_walk(
    ctx: &GpuContext,
    seed: u64,
    ms: &DeviceView<'_, u32>,
    steps: u32,
    out: &mut DeviceViewMut<'_, u32>,
) -> Result<()> {
    let count = u32_of(ms.len(), "walks")?;
    need(
        out.len(),
        u64::from(count) * (2 + u64::from(steps)),
        "testing_affine_walk output",
    )?;
    if count == 0 {
        return Ok(());
    }
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        testing::testing_affine_walk(
            ctx,
            Launch::per_item(count, 256),
            &testing::TestingAffineWalkArgs {
                seed,
                ms: ms.input(),
                count,
                steps,
                out: out.output(),
            },
        )
    }
}

/// `testing_pair_distance_<dtype>`: one warp per pair of rows.
pub(crate) fn testing_pair_distance<T: Element>(
    ctx: &GpuContext,
    a_rows: &DeviceView<'_, u8>,
    b_rows: &DeviceView<'_, u8>,
    pairs: u32,
    stride: u32,
    metric: Metric,
    out: &mut DeviceViewMut<'_, f32>,
) -> Result<()> {
    check_stride(stride)?;
    need(
        a_rows.len(),
        elem_bytes::<T>(pairs, stride),
        "pair distance a",
    )?;
    need(
        b_rows.len(),
        elem_bytes::<T>(pairs, stride),
        "pair distance b",
    )?;
    need(out.len(), pairs as u64, "pair distance output")?;
    if pairs == 0 {
        return Ok(());
    }
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        testing::testing_pair_distance(
            ctx,
            T::DTYPE,
            Launch::blocks(pairs.div_ceil(4), 128),
            &testing::TestingPairDistanceArgs {
                a: a_rows.input(),
                b: b_rows.input(),
                pairs,
                stride,
                metric,
                out: out.output(),
            },
        )
    }
}

/// `testing_warp_sort_f32`: sorts runs of 32 pairs in place.
pub(crate) fn testing_warp_sort(
    ctx: &GpuContext,
    d: &mut DeviceViewMut<'_, f32>,
    id: &mut DeviceViewMut<'_, u32>,
    runs: u32,
) -> Result<()> {
    need(d.len(), runs as u64 * 32, "warp sort distances")?;
    need(id.len(), runs as u64 * 32, "warp sort ids")?;
    if runs == 0 {
        return Ok(());
    }
    // SAFETY: each pointer's length was checked above (`need`) for these sizes.
    unsafe {
        testing::testing_warp_sort_f32(
            ctx,
            Launch::blocks(runs.div_ceil(4), 128),
            &testing::TestingWarpSortF32Args {
                d: d.output(),
                id: id.output(),
                runs,
            },
        )
    }
}

/// Which set kernel of `testing.cu` a [`SetRun`] drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetKind {
    /// `testing_visited_set`: `2^bits` u32 slots (bits in 1..=13).
    Visited,
    /// `testing_tag_set`: `2^bits` 16-bit tag slots (bits in 1..=14).
    Tag,
}

impl SetKind {
    /// The kernel, the largest `bits` (32 KiB of shared memory) and the log2 of the bytes of
    /// one slot.
    fn spec(self) -> (&'static str, u32, u32) {
        match self {
            SetKind::Visited => ("testing_visited_set", 13, 2),
            SetKind::Tag => ("testing_tag_set", 14, 1),
        }
    }

    /// u32 words of one table of `2^bits` slots.
    pub(crate) fn table_words(self, bits: u32) -> usize {
        let (_, _, slot_log2) = self.spec();
        (1usize << bits) << slot_log2 >> 2
    }
}

/// Shapes of one `testing_visited_set` or `testing_tag_set` launch.
pub(crate) struct SetRun {
    /// The kernel.
    pub kind: SetKind,
    /// Ids per block.
    pub per_block: u32,
    /// log2 of the table's slots.
    pub bits: u32,
    /// Blocks (runs of `per_block` ids).
    pub blocks: u32,
    /// 0: concurrent inserts; 1: thread 0 inserts in order.
    pub mode: i32,
}

/// `testing_visited_set` / `testing_tag_set`: inserts runs of ids into shared-memory sets (one
/// per block); `answers` receives each insert's answer, `contains` the membership afterwards,
/// `table` each block's final words.
pub(crate) fn testing_set(
    ctx: &GpuContext,
    run: &SetRun,
    ids: &DeviceView<'_, u32>,
    answers: &mut DeviceViewMut<'_, u8>,
    contains: &mut DeviceViewMut<'_, u8>,
    table: &mut DeviceViewMut<'_, u32>,
) -> Result<()> {
    let (name, max_bits, _) = run.kind.spec();
    if run.bits == 0 || run.bits > max_bits {
        return Err(Error::InvalidInput(format!(
            "{name} of 2^{} slots: bits must be in 1..={max_bits} (32 KiB of shared memory)",
            run.bits
        )));
    }
    let n = run.per_block as u64 * run.blocks as u64;
    let words = run.kind.table_words(run.bits);
    need(ids.len(), n, "set ids")?;
    need(answers.len(), n, "set answers")?;
    need(contains.len(), n, "set membership")?;
    need(table.len(), run.blocks as u64 * words as u64, "set tables")?;
    if n == 0 {
        return Ok(());
    }
    let launch = Launch::new((run.blocks, 1, 1), 256, (words * 4) as u32);
    match run.kind {
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        SetKind::Visited => unsafe {
            testing::testing_visited_set(
                ctx,
                launch,
                &testing::TestingVisitedSetArgs {
                    ids: ids.input(),
                    per_block: run.per_block,
                    bits: run.bits,
                    mode: run.mode,
                    is_new: answers.output(),
                    contains: contains.output(),
                    table: table.output(),
                },
            )
        },
        // SAFETY: each pointer's length was checked above (`need`) for these sizes.
        SetKind::Tag => unsafe {
            testing::testing_tag_set(
                ctx,
                launch,
                &testing::TestingTagSetArgs {
                    ids: ids.input(),
                    per_block: run.per_block,
                    bits: run.bits,
                    mode: run.mode,
                    answer: answers.output(),
                    contains: contains.output(),
                    table: table.output(),
                },
            )
        },
    }
}

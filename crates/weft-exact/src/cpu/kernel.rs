//! The blocked filter kernel: approximate distances of an `MR x NR` tile of (query, base) pairs
//! from a register-blocked matrix product, compared against per-query bounds.
//!
//! Operands are packed panels of `f32`:
//! - a query panel holds `MR` queries as `dim x MR` (element `k` of query `i` at `k * MR + i`),
//!   already scaled by the metric's factor (`-2` for L2, `-1` otherwise), so that the product is
//!   the distance minus the per-row and per-column terms;
//! - a base panel holds `NR` base vectors as `dim x NR` (element `k` of vector `j` at
//!   `k * NR + j`), with a per-column additive term `col_add[j]`.
//!
//! For every tile the kernel computes `v[i][j] = col_add[j] + sum_k a[k][i] b[k][j]` and reports
//! the columns where `v[i][j]` is not greater than `bounds[i]` (NaN counts as passing) as a bit
//! mask, with the row's values, to a callback, which may lower `bounds[i]`.

use weft_core::distance::{Isa, detect_isa};

/// What the kernel reports: `hit(row, panel, mask, values)` for every row of a tile with a passing
/// column, with the row's `nr` values; returns the row's new bound.
pub(crate) type Hit<'a> = dyn FnMut(usize, usize, u32, &[f32]) -> f32 + 'a;

/// A tile kernel over a run of base panels: `(a, dim, b, col_add, panels, bounds, hit)`.
type BlockFn = fn(&[f32], usize, &[f32], &[f32], usize, &mut [f32], &mut Hit<'_>);

/// A run of packed base panels: `panels` panels in `b` (`panels * dim * nr`) with their column
/// terms `col_add` (`panels * nr`).
#[derive(Clone, Copy)]
pub(crate) struct BasePanels<'a> {
    /// The panels, `dim x nr` each.
    pub(crate) b: &'a [f32],
    /// Each column's additive term.
    pub(crate) col_add: &'a [f32],
    /// How many panels.
    pub(crate) panels: usize,
}

/// The kernel chosen for this CPU and its tile shape.
#[derive(Clone, Copy)]
pub(crate) struct Kernel {
    /// Queries per tile.
    pub(crate) mr: usize,
    /// Base vectors per tile (at most 32).
    pub(crate) nr: usize,
    run: BlockFn,
    /// The instruction set.
    pub(crate) isa: Isa,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("mr", &self.mr)
            .field("nr", &self.nr)
            .field("isa", &self.isa)
            .finish()
    }
}

impl Kernel {
    /// The best kernel for the running CPU (honours `WEFT_CPU_ISA`, see [`detect_isa`]).
    pub(crate) fn detect() -> Kernel {
        Self::for_isa(detect_isa())
    }

    /// The kernel for `isa`, which the running CPU must support.
    pub(crate) fn for_isa(isa: Isa) -> Kernel {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => Kernel {
                mr: avx512::MR,
                nr: avx512::NR,
                run: avx512::block,
                isa,
            },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => Kernel {
                mr: avx2::MR,
                nr: avx2::NR,
                run: avx2::block,
                isa,
            },
            _ => Kernel {
                mr: portable::MR,
                nr: portable::NR,
                run: portable::block,
                isa: Isa::Baseline,
            },
        }
    }

    /// Runs the tiles of one query panel `a` (`dim * mr`) against the base panels `base`.
    #[inline]
    pub(crate) fn run(
        &self,
        a: &[f32],
        dim: usize,
        base: BasePanels<'_>,
        bounds: &mut [f32],
        hit: &mut Hit<'_>,
    ) {
        let BasePanels { b, col_add, panels } = base;
        assert!(a.len() >= dim * self.mr);
        assert!(b.len() >= panels * dim * self.nr);
        assert!(col_add.len() >= panels * self.nr);
        assert!(bounds.len() >= self.mr);
        (self.run)(a, dim, b, col_add, panels, bounds, hit)
    }
}

/// Whether approximate value `v` passes `bound`: not greater, NaN included.
#[inline(always)]
#[allow(clippy::neg_cmp_op_on_partial_ord)]
fn passes(v: f32, bound: f32) -> bool {
    !(v > bound)
}

/// The portable tile: plain arrays the compiler vectorises, compiled once per instruction set.
#[inline(always)]
fn block_generic<const MR: usize, const NR: usize>(
    a: &[f32],
    dim: usize,
    b: &[f32],
    col_add: &[f32],
    panels: usize,
    bounds: &mut [f32],
    hit: &mut Hit<'_>,
) {
    let a = &a[..dim * MR];
    for p in 0..panels {
        let bp = &b[p * dim * NR..(p + 1) * dim * NR];
        let mut acc = [[0f32; NR]; MR];
        for (ak, bk) in a.chunks_exact(MR).zip(bp.chunks_exact(NR)) {
            let ak: &[f32; MR] = ak.try_into().expect("chunk of MR");
            let bk: &[f32; NR] = bk.try_into().expect("chunk of NR");
            for i in 0..MR {
                for j in 0..NR {
                    acc[i][j] = ak[i].mul_add(bk[j], acc[i][j]);
                }
            }
        }
        let ca: &[f32; NR] = col_add[p * NR..(p + 1) * NR]
            .try_into()
            .expect("chunk of NR");
        for i in 0..MR {
            let bound = bounds[i];
            let mut mask = 0u32;
            let mut v = [0f32; NR];
            for j in 0..NR {
                v[j] = acc[i][j] + ca[j];
                mask |= (passes(v[j], bound) as u32) << j;
            }
            if mask != 0 {
                bounds[i] = hit(i, p, mask, &v);
            }
        }
    }
}

/// The baseline build (no FMA: `mul_add` would be a library call).
mod portable {
    use super::{Hit, passes};

    pub(super) const MR: usize = 4;
    pub(super) const NR: usize = 8;

    pub(super) fn block(
        a: &[f32],
        dim: usize,
        b: &[f32],
        col_add: &[f32],
        panels: usize,
        bounds: &mut [f32],
        hit: &mut Hit<'_>,
    ) {
        let a = &a[..dim * MR];
        for p in 0..panels {
            let bp = &b[p * dim * NR..(p + 1) * dim * NR];
            let mut acc = [[0f32; NR]; MR];
            for (ak, bk) in a.chunks_exact(MR).zip(bp.chunks_exact(NR)) {
                for i in 0..MR {
                    for j in 0..NR {
                        acc[i][j] += ak[i] * bk[j];
                    }
                }
            }
            for i in 0..MR {
                let bound = bounds[i];
                let mut mask = 0u32;
                let mut v = [0f32; NR];
                for j in 0..NR {
                    v[j] = acc[i][j] + col_add[p * NR + j];
                    mask |= (passes(v[j], bound) as u32) << j;
                }
                if mask != 0 {
                    bounds[i] = hit(i, p, mask, &v);
                }
            }
        }
    }
}

/// AVX2 + FMA: a 6 x 16 tile (12 accumulator registers).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::Hit;

    pub(super) const MR: usize = 6;
    pub(super) const NR: usize = 16;

    #[target_feature(enable = "avx2,fma")]
    fn block_tf(
        a: &[f32],
        dim: usize,
        b: &[f32],
        col_add: &[f32],
        panels: usize,
        bounds: &mut [f32],
        hit: &mut Hit<'_>,
    ) {
        super::block_generic::<MR, NR>(a, dim, b, col_add, panels, bounds, hit)
    }

    pub(super) fn block(
        a: &[f32],
        dim: usize,
        b: &[f32],
        col_add: &[f32],
        panels: usize,
        bounds: &mut [f32],
        hit: &mut Hit<'_>,
    ) {
        // SAFETY: `Kernel::for_isa` hands this out only for `Isa::Avx2` or better, which
        // `detect_isa` reports only after run-time detection of AVX2 and FMA.
        unsafe { block_tf(a, dim, b, col_add, panels, bounds, hit) }
    }
}

/// AVX-512: a 14 x 32 tile (28 accumulator registers, two base loads and one broadcast per
/// step).
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::Hit;

    pub(super) const MR: usize = 14;
    pub(super) const NR: usize = 32;

    #[target_feature(enable = "avx512f")]
    fn block_tf(
        a: &[f32],
        dim: usize,
        b: &[f32],
        col_add: &[f32],
        panels: usize,
        bounds: &mut [f32],
        hit: &mut Hit<'_>,
    ) {
        // Bounds were checked by `Kernel::run`; restate them for the raw-pointer loop below.
        assert!(a.len() >= dim * MR && b.len() >= panels * dim * NR);
        assert!(col_add.len() >= panels * NR && bounds.len() >= MR);
        let ap = a.as_ptr();
        for p in 0..panels {
            // SAFETY: panel `p` spans `b[p * dim * NR .. (p + 1) * dim * NR]`, inside `b` by the
            // assertion above.
            let bp = unsafe { b.as_ptr().add(p * dim * NR) };
            let mut acc = [[_mm512_setzero_ps(); 2]; MR];
            for k in 0..dim {
                // SAFETY: `k < dim`, so `k * NR + 31 < dim * NR` (inside panel `p`) and
                // `k * MR + i < dim * MR <= a.len()`.
                unsafe {
                    let b0 = _mm512_loadu_ps(bp.add(k * NR));
                    let b1 = _mm512_loadu_ps(bp.add(k * NR + 16));
                    let ak = ap.add(k * MR);
                    for (i, acc) in acc.iter_mut().enumerate() {
                        let av = _mm512_set1_ps(*ak.add(i));
                        acc[0] = _mm512_fmadd_ps(av, b0, acc[0]);
                        acc[1] = _mm512_fmadd_ps(av, b1, acc[1]);
                    }
                }
            }
            // SAFETY: `col_add[p * NR .. p * NR + 32]` is inside `col_add` (asserted above).
            let (c0, c1) = unsafe {
                let cp = col_add.as_ptr().add(p * NR);
                (_mm512_loadu_ps(cp), _mm512_loadu_ps(cp.add(16)))
            };
            for (i, acc) in acc.iter().enumerate() {
                let bound = _mm512_set1_ps(bounds[i]);
                let v0 = _mm512_add_ps(acc[0], c0);
                let v1 = _mm512_add_ps(acc[1], c1);
                let m0 = _mm512_cmp_ps_mask::<_CMP_NGT_UQ>(v0, bound) as u32;
                let m1 = _mm512_cmp_ps_mask::<_CMP_NGT_UQ>(v1, bound) as u32;
                let mask = m0 | (m1 << 16);
                if mask != 0 {
                    let mut v = [0f32; NR];
                    // SAFETY: `v` holds 32 floats; the stores write 16 each at offsets 0 and 16.
                    unsafe {
                        _mm512_storeu_ps(v.as_mut_ptr(), v0);
                        _mm512_storeu_ps(v.as_mut_ptr().add(16), v1);
                    }
                    bounds[i] = hit(i, p, mask, &v);
                }
            }
        }
    }

    pub(super) fn block(
        a: &[f32],
        dim: usize,
        b: &[f32],
        col_add: &[f32],
        panels: usize,
        bounds: &mut [f32],
        hit: &mut Hit<'_>,
    ) {
        // SAFETY: `Kernel::for_isa` hands this out only for `Isa::Avx512`, which `detect_isa`
        // reports only after run-time detection of AVX-512F.
        unsafe { block_tf(a, dim, b, col_add, panels, bounds, hit) }
    }
}

/// Every kernel the running CPU supports (for tests).
#[cfg(test)]
pub(crate) fn supported() -> Vec<Kernel> {
    let mut v = vec![Kernel::for_isa(Isa::Baseline)];
    let best = detect_isa();
    if best != Isa::Baseline {
        v.push(Kernel::for_isa(Isa::Avx2));
    }
    if best == Isa::Avx512 {
        v.push(Kernel::for_isa(Isa::Avx512));
    }
    v
}

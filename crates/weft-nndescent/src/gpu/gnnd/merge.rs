//! GGM, the k-NN graph merge of GNND (Wang, Zhao & Zeng 2021, Algorithm 3), on the device.
//!
//! Two k-NN graphs `G1` of the vectors `a` (vertices `[0, n1)`) and `G2` of `b` (vertices
//! `[n1, n1 + n2)`) become one graph of `n1 + n2` vertices:
//! 1. each list makes room for cross neighbours ([`MergeLists`]; by default doubled below
//!    degree 16, the paper's from 16): doubled, it widens to `2k` entries, keeps all `k` own
//!    entries (OLD) and takes `k` distinct random vertices of the other subset; the paper's
//!    ([`MergeLists::Half`]) keeps its nearest `k - k/2` and takes `k/2` (`gnnd_cross_init_*`,
//!    inserted NEW by `gnnd_merge`);
//! 2. GNND iterations refine the lists with cross-subset joins only: the sampling skips OLD
//!    entries of the other subset (`gnnd_sample` with `split = n1`), so NEW samples are all of
//!    the other subset and OLD samples of the owner's, and the join skips NEW x NEW pairs
//!    (`MODE_CROSS`): every pair joined is a cross pair, every insertion a cross neighbour;
//! 3. with [`MergeLists::Half`], each list is merged with the `k/2` entries set aside in step 1
//!    (top k, duplicates removed), through the inbox and `gnnd_merge` ([`Gnnd::merge_device`];
//!    [`Gnnd::merge_device_cross`] leaves this to a caller that keeps the full graphs, as the
//!    out-of-memory build does); widened lists are cut to their nearest `k` (on the host).
//!
//! The vectors stay in two device matrices (the kernels read vertex `v < n1` from `a`, others
//! from `b`), so an out-of-memory build keeps one shard resident and streams the other.

use weft_core::INVALID;
use weft_gpu::DeviceCopy;

use super::*;

/// One of the two inputs of a graph merge (GGM): a vector set and its k-NN graph, whose ids are
/// local to the set (vertex `v` of `graph` is row `v` of `vectors`). `V` holds the vectors: a
/// [`DatasetView`] on the host ([`Gnnd::merge`]), a `&`[`DeviceMatrix`] on the device
/// ([`Gnnd::merge_device`], [`Gnnd::merge_device_cross`]).
#[derive(Clone, Copy, Debug)]
pub struct MergeSide<'g, V> {
    /// The vectors.
    pub vectors: V,
    /// Their k-NN graph (local ids).
    pub graph: &'g KnnGraph,
}

impl<'g, V> MergeSide<'g, V> {
    /// The vectors `vectors` with their k-NN graph `graph`.
    pub fn new(vectors: V, graph: &'g KnnGraph) -> Self {
        MergeSide { vectors, graph }
    }
}

impl GnndTuning {
    /// Device bytes a merge of `n1 + n2` points needs with degree `k` and `params`' sample
    /// count (lists of [`MergeLists::width`], inbox, samples), plus the vectors of both subsets
    /// when `vectors`.
    pub fn merge_bytes_needed<T: Element>(
        &self,
        n1: usize,
        n2: usize,
        dim: usize,
        k: usize,
        params: &NnDescentParams,
        vectors: bool,
    ) -> u64 {
        let lists = self.bytes_needed::<T>(n1 + n2, dim, self.merge_lists.width(k), params, false);
        if vectors {
            lists + DeviceMatrix::<T>::bytes_for(n1, dim) + DeviceMatrix::<T>::bytes_for(n2, dim)
        } else {
            lists
        }
    }
}

impl<'c> Gnnd<'c> {
    /// Device bytes a merge of `n1 + n2` points needs with degree `k`; see
    /// [`GnndTuning::merge_bytes_needed`].
    pub fn merge_bytes_needed<T: Element>(
        &self,
        n1: usize,
        n2: usize,
        dim: usize,
        k: usize,
        params: &NnDescentParams,
        vectors: bool,
    ) -> u64 {
        self.tuning
            .merge_bytes_needed::<T>(n1, n2, dim, k, params, vectors)
    }

    /// Merges the k-NN graphs of `a` and `b` (host vectors and graphs, local ids) into the graph
    /// of the `a` rows followed by the `b` rows, on the host (see the module documentation), with
    /// `params`' GPU fields and `build`'s seed as in [`Gnnd::build`].
    pub fn merge<T: Element>(
        &self,
        a: MergeSide<'_, DatasetView<'_, T>>,
        b: MergeSide<'_, DatasetView<'_, T>>,
        metric: Metric,
        params: &NnDescentParams,
        build: &BuildCtx,
    ) -> Result<(KnnGraph, GnndStats)> {
        let (va, ga, vb, gb) = (a.vectors, a.graph, b.vectors, b.graph);
        check_merge_inputs(va.rows(), va.dim(), ga, vb.rows(), vb.dim(), gb)?;
        self.tuning.check(params, ga.k())?;
        let bytes =
            self.merge_bytes_needed::<T>(va.rows(), vb.rows(), va.dim(), ga.k(), params, true);
        self.ctx.check_fits(bytes, self.budget)?;
        let da = DeviceMatrix::upload(self.ctx, va)?;
        let db = DeviceMatrix::upload(self.ctx, vb)?;
        let (g, mut stats) = self.merge_device(
            MergeSide::new(&da, ga),
            MergeSide::new(&db, gb),
            metric,
            params,
            build,
        )?;
        stats.bytes = bytes;
        Ok((g.download(self.ctx)?, stats))
    }

    /// Merges the k-NN graphs of `a` and `b` (vectors on the device, graphs on the host with
    /// local ids) and leaves the merged graph (vertices: `a`'s rows, then `b`'s) on the device.
    /// Each row is the top `k` of its own graph's row and the cross neighbours found.
    pub fn merge_device<T: Element>(
        &self,
        a: MergeSide<'_, &DeviceMatrix<T>>,
        b: MergeSide<'_, &DeviceMatrix<T>>,
        metric: Metric,
        params: &NnDescentParams,
        build: &BuildCtx,
    ) -> Result<(DeviceKnnGraph, GnndStats)> {
        self.ggm(a, b, metric, params, build, true)
    }

    /// Like [`Gnnd::merge_device`] without step 3: each row is the top `k` of the own entries
    /// kept in step 1 (all `k` with doubled lists, the nearest `k - k/2` with the paper's, see
    /// [`MergeLists`]) and the cross neighbours found. For callers that keep the full
    /// graphs and take the union themselves (the out-of-memory build).
    pub fn merge_device_cross<T: Element>(
        &self,
        a: MergeSide<'_, &DeviceMatrix<T>>,
        b: MergeSide<'_, &DeviceMatrix<T>>,
        metric: Metric,
        params: &NnDescentParams,
        build: &BuildCtx,
    ) -> Result<(DeviceKnnGraph, GnndStats)> {
        self.ggm(a, b, metric, params, build, false)
    }

    /// [`Gnnd::merge_device`] (`full`: with step 3) or [`Gnnd::merge_device_cross`].
    fn ggm<T: Element>(
        &self,
        a: MergeSide<'_, &DeviceMatrix<T>>,
        b: MergeSide<'_, &DeviceMatrix<T>>,
        metric: Metric,
        params: &NnDescentParams,
        build: &BuildCtx,
        full: bool,
    ) -> Result<(DeviceKnnGraph, GnndStats)> {
        let (a, ga, b, gb) = (a.vectors, a.graph, b.vectors, b.graph);
        let (n1, n2) = (a.rows(), b.rows());
        check_merge_inputs(n1, a.dim(), ga, n2, b.dim(), gb)?;
        let k = ga.k();
        self.tuning.check(params, k)?;
        let width = self.tuning.merge_lists.width(k);
        if width > MAX_K {
            return Err(Error::invalid_param(
                "merge_lists",
                format!(
                    "a merge with {:?} lists of degree {k} works on lists of {width} entries, \
                     more than the GNND maximum of {MAX_K}; use MergeLists::Half",
                    self.tuning.merge_lists.resolve(k)
                ),
            ));
        }
        self.tuning.check(params, width)?;
        let n = n1 + n2;
        check_points(n)?;
        let bytes = self.merge_bytes_needed::<T>(n1, n2, a.dim(), k, params, false);
        self.ctx.check_fits(bytes, self.budget)?;
        build.check_cancelled()?;
        let ctx = self.ctx;
        let lists = self.tuning.merge_lists;
        let keep = lists.kept(k);
        let cross = width - keep;
        let set_aside = k - keep;
        // Step 1 on the host: the kept nearest `keep` entries (OLD), padding after them; the
        // entries set aside for step 3.
        let mut ids = vec![INVALID; n * width];
        let mut dists = vec![f32::INFINITY; n * width];
        let mut drop_i = vec![INVALID; if full { n * set_aside } else { 0 }];
        let mut drop_d = vec![f32::INFINITY; drop_i.len()];
        let mut drop_cnt = vec![0u32; if full { n } else { 0 }];
        for (g, offset, first) in [(ga, 0u32, 0usize), (gb, n1 as u32, n1)] {
            for v in 0..g.n() {
                let (ri, rd) = (g.row_ids(v), g.row_dists(v));
                let row = first + v;
                for j in 0..k {
                    if ri[j] == INVALID {
                        break;
                    }
                    if j < keep {
                        ids[row * width + j] = ri[j] + offset;
                        dists[row * width + j] = rd[j];
                    } else if full {
                        let c = drop_cnt[row] as usize;
                        drop_i[row * set_aside + c] = ri[j] + offset;
                        drop_d[row * set_aside + c] = rd[j];
                        drop_cnt[row] += 1;
                    }
                }
            }
        }
        let mut st = State::alloc(
            ctx,
            n,
            width,
            params.gpu_sample,
            self.tuning.inbox_for(width, params.gpu_sample),
        )?;
        htod(ctx, &ids, &mut st.list_i)?;
        htod(ctx, &dists, &mut st.list_d)?;
        drop((ids, dists));
        let va = a.rows_view(0, n1)?;
        let vb = b.rows_view(0, n2)?;
        let stride = u32_of(a.stride(), "stride")?;
        let vectors = Vectors {
            a: &va,
            b: &vb,
            split: n1 as u32,
            stride,
        };
        ctx.prepare_kernels(&super::merge_kernels::<T>(metric)?)?;
        if metric == Metric::Cosine {
            exact_norms::<T>(ctx, &va, n1 as u32, stride, &mut st.norms.slice_mut(0..n1))?;
            exact_norms::<T>(ctx, &vb, n2 as u32, stride, &mut st.norms.slice_mut(n1..n))?;
        }
        let mut stats = GnndStats {
            bytes,
            ..Default::default()
        };
        build.progress().begin("ggm", Some(params.max_iters as u64));
        cross_init::<T>(ctx, &vectors, metric, cross as u32, build.seed(), &mut st)?;
        merge(ctx, &mut st)?;
        let run = Iterations {
            params,
            mode: self.tuning.mode() | MODE_CROSS,
            sample_split: n1 as u32,
        };
        iterate::<T>(ctx, &mut st, &vectors, metric, &run, build, &mut stats)?;
        build.progress().end();
        if full && set_aside > 0 {
            // Step 3: the entries set aside through the inbox (rows of `set_aside` slots).
            htod(ctx, &drop_i, &mut st.inbox_i)?;
            htod(ctx, &drop_d, &mut st.inbox_d)?;
            htod(ctx, &drop_cnt, &mut st.inbox_cnt)?;
            st.m = set_aside;
            merge(ctx, &mut st)?;
        }
        finish(ctx, &mut st)?;
        let graph = if width == k {
            DeviceKnnGraph::from_parts(n, k, st.list_i, st.list_d)?
        } else {
            // Each row (sorted, padding last) cut to its nearest `k`, through the host; the
            // merge's buffers are freed before the graph is uploaded.
            let wide_i = ctx.download(&st.list_i, n * width)?;
            let wide_d = ctx.download(&st.list_d, n * width)?;
            drop(st);
            let (ids, dists) = (cut_rows(&wide_i, width, k), cut_rows(&wide_d, width, k));
            DeviceKnnGraph::from_parts(n, k, ctx.upload(&ids)?, ctx.upload(&dists)?)?
        };
        Ok((graph, stats))
    }
}

/// The GGM join mode bit (the kernel's `MODE_CROSS`): NEW x NEW pairs are not joined.
pub(super) const MODE_CROSS: u32 = 2;

/// Checks the shapes of a merge: graphs of the vectors' row counts, one `k >= 2`, one dimension,
/// both non-empty, valid rows (ids local to each graph).
fn check_merge_inputs(
    n1: usize,
    dim1: usize,
    ga: &KnnGraph,
    n2: usize,
    dim2: usize,
    gb: &KnnGraph,
) -> Result<()> {
    if dim1 != dim2 {
        return Err(Error::dim_mismatch("GGM merge", dim1, dim2));
    }
    if n1 == 0 || n2 == 0 {
        return Err(Error::InvalidInput(
            "a graph merge needs two non-empty vector sets".into(),
        ));
    }
    if ga.n() != n1 || gb.n() != n2 {
        return Err(Error::InvalidInput(format!(
            "graph merge: graphs of {} and {} vertices for {n1} and {n2} vectors",
            ga.n(),
            gb.n()
        )));
    }
    if ga.k() != gb.k() {
        return Err(Error::invalid_param(
            "k",
            format!(
                "graph merge: the graphs have degrees {} and {}",
                ga.k(),
                gb.k()
            ),
        ));
    }
    if ga.k() < 2 {
        return Err(Error::invalid_param(
            "k",
            format!(
                "a graph merge needs k >= 2 (half of each list makes room for cross neighbours), got {}",
                ga.k()
            ),
        ));
    }
    ga.validate()?;
    gb.validate()
}

/// The first `k` of every row of `width` entries.
fn cut_rows<T: Copy>(wide: &[T], width: usize, k: usize) -> Vec<T> {
    wide.chunks_exact(width)
        .flat_map(|row| &row[..k])
        .copied()
        .collect()
}

/// Copies `src` into the start of `dst` (a pageable copy) and waits for it.
fn htod<T: DeviceCopy>(ctx: &GpuContext, src: &[T], dst: &mut DeviceBuffer<T>) -> Result<()> {
    if dst.len() < src.len() {
        return Err(Error::Gpu(format!(
            "internal: copy of {} elements into a buffer of {}",
            src.len(),
            dst.len()
        )));
    }
    ctx.copy_to_device(src, &mut dst.slice_mut(0..src.len()))
}

fn cross_init<T: Element>(
    ctx: &GpuContext,
    data: &Vectors<'_, '_>,
    metric: Metric,
    half: u32,
    seed: u64,
    st: &mut State,
) -> Result<()> {
    let (n, m) = (st.n as u32, st.m as u32);
    data.check::<T>(n, "gnnd_cross_init data")?;
    if m < half {
        return Err(Error::Gpu(format!("internal: inbox {m} < k/2 {half}")));
    }
    // SAFETY: the data views were checked above (`Vectors::check`); the state's buffers were
    // allocated by `State::alloc` for its own `n`, `k`, `p` and `m`.
    unsafe {
        kernels::gnnd_cross_init(
            ctx,
            T::DTYPE,
            warp_launch(st.n)?,
            &kernels::GnndCrossInitArgs {
                a: data.a.input(),
                b: data.b.input(),
                split: data.split,
                n,
                stride: data.stride,
                metric,
                half,
                seed,
                inbox_d: st.inbox_d.output(),
                inbox_i: st.inbox_i.output(),
                inbox_cnt: st.inbox_cnt.output(),
                m,
            },
        )
    }
}

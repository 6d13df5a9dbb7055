//! The GPU CAGRA-style search: [`CagraSearchGpu`], a [`Searcher`] over
//! `weft_gpu::cagra_search::CagraSearchDevice` (the kernels and their design:
//! `weft_gpu::cagra_search` and `docs/kernels.md`).

use weft_core::{
    DatasetView, Element, Error, FixedDegreeGraph, Metric, NeighborsMut, Params, Result,
    SearchStats, Searcher,
};
use weft_gpu::GpuContext;
use weft_gpu::cagra_search::{CagraSearchConfig, CagraSearchDevice, CagraSearchMode};

use crate::cagra_gpu_params::{CagraSearchModeParam, CagraSearchParams};
use crate::check::check_search_inputs;
use crate::copy::copy_results;

/// The device configuration of `p`.
fn config(p: &CagraSearchParams) -> CagraSearchConfig {
    CagraSearchConfig {
        itopk: p.itopk,
        search_width: p.search_width,
        max_iterations: p.max_iterations,
        min_iterations: p.min_iterations,
        team_size: p.team_size,
        mode: match p.mode {
            CagraSearchModeParam::Auto => CagraSearchMode::Auto,
            CagraSearchModeParam::SingleCta => CagraSearchMode::SingleCta,
            CagraSearchModeParam::MultiCta => CagraSearchMode::MultiCta,
        },
        seed: p.seed,
    }
}

/// CAGRA-style search on a GPU (name `cagra_gpu`) over any [`FixedDegreeGraph`]: the graph's
/// entry points (when it has some) and seeded random points start each query. The data, graph
/// and queries are uploaded for each call; `weft_gpu::CagraSearchDevice::search_device`
/// searches sets already on the device.
#[derive(Clone, Copy, Debug)]
pub struct CagraSearchGpu<'c> {
    ctx: &'c GpuContext,
}

impl<'c> CagraSearchGpu<'c> {
    /// The search on `ctx`.
    pub fn new(ctx: &'c GpuContext) -> Self {
        CagraSearchGpu { ctx }
    }

    /// The device configuration `weft_gpu::cagra_search` takes for `params` (for callers that
    /// keep a `CagraSearchSession`; the filter is passed separately).
    pub fn device_config(params: &CagraSearchParams) -> CagraSearchConfig {
        config(params)
    }
}

impl Searcher<FixedDegreeGraph> for CagraSearchGpu<'_> {
    type Params = CagraSearchParams;

    fn name(&self) -> &'static str {
        "cagra_gpu"
    }

    fn search<T: Element>(
        &self,
        graph: &FixedDegreeGraph,
        data: DatasetView<'_, T>,
        queries: DatasetView<'_, T>,
        metric: Metric,
        params: &CagraSearchParams,
        mut out: NeighborsMut<'_>,
    ) -> Result<SearchStats> {
        let k = check_search_inputs(graph, data, queries, &out, |n, dim| params.validate(n, dim))?;
        if params.itopk < k {
            return Err(Error::invalid_param(
                "itopk",
                format!("the list size itopk = {} is below k = {k}", params.itopk),
            ));
        }
        if queries.rows() == 0 {
            return Ok(SearchStats::default());
        }
        let (nb, stats) = CagraSearchDevice::new(self.ctx).search(
            data,
            graph,
            queries,
            metric,
            k,
            &config(params),
            params.filter.as_deref(),
        )?;
        copy_results(&nb, &mut out);
        Ok(stats)
    }
}

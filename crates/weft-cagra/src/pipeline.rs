//! CAGRA's whole construction on the CPU as one [`GraphBuilder`]: [`CagraPipeline`], a k-NN
//! graph from any [`KnnGraphBuilder`] (or exact brute force, [`KnnSource::Exact`]), then
//! [`CagraCpu`]. The GPU counterpart is `gpu::CagraPipelineGpu`.

use weft_core::{
    BuildCtx, DatasetView, Element, Error, FixedDegreeGraph, GraphBuilder, GraphOptimizer,
    KnnGraph, KnnGraphBuilder, Metric, NoParams, Params, Result,
};

use crate::{CagraCpu, CagraParams, KnnSource};

/// The checks every CAGRA pipeline makes before building its k-NN graph: not cancelled, data
/// not empty, parameters valid for its shape, every value finite.
pub(crate) fn check_pipeline_input<T: Element>(
    data: DatasetView<'_, T>,
    params: &CagraParams,
    ctx: &BuildCtx,
) -> Result<()> {
    ctx.check_cancelled()?;
    if data.is_empty() {
        return Err(Error::InvalidInput("cagra: the dataset is empty".into()));
    }
    params.validate(data.rows(), data.dim())?;
    data.check_finite()
}

/// CAGRA on the CPU (name `cagra`): the k-NN graph of degree
/// [`CagraParams::intermediate_degree`] from the builder `K` with its parameters
/// ([`KnnSource::NnDescent`], the default) or by exact brute force
/// ([`KnnSource::Exact`], `weft_exact::ExactKnn`), then [`CagraCpu`] down to
/// [`CagraParams::graph_degree`], with entry points and the connectivity repair.
///
/// `K` is any k-NN graph builder: the `weft` facade registers CPU NN-Descent; tests use the
/// exact graph.
#[derive(Clone, Debug)]
pub struct CagraPipeline<K: KnnGraphBuilder> {
    knn: K,
    knn_params: K::Params,
}

impl<K: KnnGraphBuilder> CagraPipeline<K> {
    /// The pipeline whose k-NN graphs `knn` builds with `knn_params`.
    pub fn new(knn: K, knn_params: K::Params) -> Self {
        CagraPipeline { knn, knn_params }
    }

    /// The k-NN graph the pipeline optimises (after the input checks): by `K`, or exact with
    /// [`KnnSource::Exact`].
    pub fn knn_graph<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &CagraParams,
        ctx: &BuildCtx,
    ) -> Result<KnnGraph> {
        check_pipeline_input(data, params, ctx)?;
        let k = params.intermediate_degree;
        match params.knn {
            KnnSource::NnDescent => self.knn.build(data, metric, k, &self.knn_params, ctx),
            KnnSource::Exact => weft_exact::ExactKnn.build(data, metric, k, &NoParams {}, ctx),
        }
    }
}

impl<K: KnnGraphBuilder> GraphBuilder for CagraPipeline<K> {
    type Params = CagraParams;
    type Output = FixedDegreeGraph;

    fn name(&self) -> &'static str {
        "cagra"
    }

    fn build<T: Element>(
        &self,
        data: DatasetView<'_, T>,
        metric: Metric,
        params: &CagraParams,
        ctx: &BuildCtx,
    ) -> Result<FixedDegreeGraph> {
        let knn = self.knn_graph(data, metric, params, ctx)?;
        CagraCpu.optimize(data, metric, &knn, params.graph_degree, params, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::GraphView;

    /// A k-NN builder that only fails: shows which source the pipeline used.
    struct Refuses;

    impl KnnGraphBuilder for Refuses {
        type Params = NoParams;

        fn name(&self) -> &'static str {
            "refuses"
        }

        fn build<T: Element>(
            &self,
            _data: DatasetView<'_, T>,
            _metric: Metric,
            _k: usize,
            _params: &NoParams,
            _ctx: &BuildCtx,
        ) -> Result<KnnGraph> {
            Err(Error::Unsupported("no k-NN graph here".into()))
        }
    }

    #[test]
    fn the_pipeline_optimises_its_builders_graph_or_the_exact_one() {
        let base = weft_io::synthetic::Preset::Sift
            .generator(3)
            .unwrap()
            .base(600)
            .unwrap();
        let ctx = BuildCtx::new(7);
        let params = CagraParams {
            graph_degree: 16,
            intermediate_degree: 32,
            ..Default::default()
        };
        let knn = weft_exact::ExactKnn
            .build(base.view(), Metric::L2Squared, 32, &NoParams {}, &ctx)
            .unwrap();
        let want = CagraCpu
            .optimize(base.view(), Metric::L2Squared, &knn, 16, &params, &ctx)
            .unwrap();
        let exact = CagraPipeline::new(weft_exact::ExactKnn, NoParams {});
        let got = exact
            .build(base.view(), Metric::L2Squared, &params, &ctx)
            .unwrap();
        assert_eq!(got.ids(), want.ids());
        assert_eq!(got.entry_points(), want.entry_points());
        // The builder is asked for the default source; `Exact` never asks it.
        let refuses = CagraPipeline::new(Refuses, NoParams {});
        assert!(matches!(
            refuses.build(base.view(), Metric::L2Squared, &params, &ctx),
            Err(Error::Unsupported(_))
        ));
        let by_exact = CagraParams {
            knn: KnnSource::Exact,
            ..params.clone()
        };
        let got = refuses
            .build(base.view(), Metric::L2Squared, &by_exact, &ctx)
            .unwrap();
        assert_eq!(got.ids(), want.ids());
        // The input checks come first.
        let empty = DatasetView::<f32>::new(&[], 0, 8).unwrap();
        assert!(matches!(
            exact.build(empty, Metric::L2Squared, &params, &ctx),
            Err(Error::InvalidInput(_))
        ));
    }
}

//! The search registry: which search answers a query, keyed by graph kind and back end, as
//! [`crate::Registry`] keys the builds by algorithm and back end. [`crate::Index::search`]
//! resolves [`crate::SearchParams::backend`] (automatic: the GPU when usable), then runs the
//! route this table names; a new search (another device kind, several GPUs) is a new row here
//! and a new arm where the index runs it.

use weft_graph::storage::GraphKind;

use crate::registry::Backend;

/// One search the index can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SearchRoute {
    /// The exhaustive scan ([`crate::SearchParams::exact`]): reads no graph; on the CPU.
    Exact,
    /// The CPU beam search (`weft_search::BeamSearch`), over every graph kind (a hierarchical
    /// graph's base layer, entered from its entry points).
    Beam,
    /// The GPU CAGRA-style search (`weft_search::CagraSearchSession`): fixed-degree graphs, and
    /// k-NN graphs as fixed-degree ones.
    CagraGpu,
    /// The GPU GGNN search (`weft_search::GgnnSearchSession`): hierarchical graphs.
    GgnnGpu,
}

impl SearchRoute {
    /// `exact`, `beam`, `cagra_gpu` or `ggnn_gpu`.
    pub fn name(self) -> &'static str {
        match self {
            SearchRoute::Exact => "exact",
            SearchRoute::Beam => "beam",
            SearchRoute::CagraGpu => "cagra_gpu",
            SearchRoute::GgnnGpu => "ggnn_gpu",
        }
    }

    /// Where it runs: [`Backend::Cpu`] or [`Backend::Gpu`].
    pub fn backend(self) -> Backend {
        match self {
            SearchRoute::Exact | SearchRoute::Beam => Backend::Cpu,
            SearchRoute::CagraGpu | SearchRoute::GgnnGpu => Backend::Gpu,
        }
    }
}

/// Every graph search the index runs: (graph kind, back end, search). Exact search reads no
/// graph and is not keyed here.
pub const SEARCH_ROUTES: [(GraphKind, Backend, SearchRoute); 6] = [
    (GraphKind::Knn, Backend::Cpu, SearchRoute::Beam),
    (GraphKind::Fixed, Backend::Cpu, SearchRoute::Beam),
    (GraphKind::Hier, Backend::Cpu, SearchRoute::Beam),
    (GraphKind::Knn, Backend::Gpu, SearchRoute::CagraGpu),
    (GraphKind::Fixed, Backend::Gpu, SearchRoute::CagraGpu),
    (GraphKind::Hier, Backend::Gpu, SearchRoute::GgnnGpu),
];

/// The search that answers a graph search of a `kind` graph on `backend` ([`Backend::Cpu`] or
/// [`Backend::Gpu`]; `None` for [`Backend::Auto`], which the caller resolves first, or a pair
/// the table does not list).
pub fn search_route(kind: GraphKind, backend: Backend) -> Option<SearchRoute> {
    SEARCH_ROUTES
        .iter()
        .find(|(k, b, _)| *k == kind && *b == backend)
        .map(|&(_, _, route)| route)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_graph_kind_has_one_search_per_back_end() {
        for kind in [GraphKind::Knn, GraphKind::Fixed, GraphKind::Hier] {
            for backend in [Backend::Cpu, Backend::Gpu] {
                let n = SEARCH_ROUTES
                    .iter()
                    .filter(|(k, b, _)| *k == kind && *b == backend)
                    .count();
                assert_eq!(n, 1, "{kind:?} on {backend:?}");
                let route = search_route(kind, backend).unwrap();
                assert_eq!(route.backend(), backend);
            }
            assert_eq!(search_route(kind, Backend::Auto), None);
        }
        assert_eq!(
            search_route(GraphKind::Hier, Backend::Gpu),
            Some(SearchRoute::GgnnGpu)
        );
        assert_eq!(SearchRoute::Exact.backend(), Backend::Cpu);
    }
}

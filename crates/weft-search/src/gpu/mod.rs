//! The searches on the GPU (feature `cuda`), with their kernels in this crate's `kernels/`
//! (`cagra_search`, `ggnn_search`; design notes in `docs/kernels.md` and `docs/ggnn.md`):
//!
//! - [`cagra`]: the CAGRA-style search: [`cagra::CagraSearchGpu`] (a [`weft_core::Searcher`],
//!   name `cagra_gpu`), [`cagra::CagraSearchDevice`] (sets already on the device) and
//!   [`cagra::CagraSearchSession`] (data and graph resident, buffers reused across calls);
//! - [`rerank`]: the f16 traversal of the CAGRA search ([`crate::SearchPrecision::F16`]): the
//!   f16 copy of f32 data and the exact f32 rerank of each query's list (kernels
//!   `search_rerank`);
//! - [`ggnn`]: the GGNN query: [`ggnn::GgnnSearchGpu`] (name `ggnn_gpu`),
//!   [`ggnn::GgnnSearchDevice`] and [`ggnn::GgnnSearchSession`].
//!
//! Both take the crate's own parameters ([`crate::CagraSearchParams`],
//! [`crate::GgnnSearchParams`]); their searches of sets already on the device read them as one
//! [`DeviceSearchInputs`].

pub mod cagra;
mod common;
pub mod ggnn;
pub mod rerank;

pub use common::DeviceSearchInputs;

/// The generated bindings of this crate's kernel modules.
pub(crate) mod kernels {
    /// `kernels/cagra_search`.
    #[allow(dead_code)]
    pub(crate) mod cagra_search {
        include!(concat!(env!("OUT_DIR"), "/cagra_search.rs"));
    }
    /// `kernels/ggnn_search`.
    #[allow(dead_code)]
    pub(crate) mod ggnn_search {
        include!(concat!(env!("OUT_DIR"), "/ggnn_search.rs"));
    }
    /// `kernels/search_rerank`: the f16 copy and the exact rerank of the f16 traversal.
    #[allow(dead_code)]
    pub(crate) mod search_rerank {
        include!(concat!(env!("OUT_DIR"), "/search_rerank.rs"));
    }
}

/// This crate's kernel modules (for reports and the NVRTC check).
pub fn kernel_modules() -> Vec<&'static weft_gpu::KernelModule> {
    vec![
        &kernels::cagra_search::MODULE,
        &kernels::ggnn_search::MODULE,
        &kernels::search_rerank::MODULE,
    ]
}

//! # weft-graph
//!
//! Operations on the graphs of `weft-core`: statistics and connectivity ([`stats`]), graph recall
//! against an exact k-NN graph ([`recall`]), exact k-NN on the CPU ([`exact`]), hierarchical graphs
//! ([`hier`]) and the on-disk format ([`storage`]).

pub mod exact;
pub mod hier;
pub mod recall;
pub mod stats;
pub mod storage;

pub use weft_core::{FixedDegreeGraph, GraphView, INVALID, KnnGraph, NodeId};

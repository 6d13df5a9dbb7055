//! # weft-graph
//!
//! Operations on the graphs of `weft-core` ([`KnnGraph`], [`FixedDegreeGraph`], any
//! [`GraphView`]), re-exported here:
//!
//! - [`stats`]: degree distributions, reachability from the entry points, strongly connected
//!   components ([`graph_stats`]), and the unreachable set builders repair ([`reachable_from`]).
//! - [`connect`]: entry points spread over the data ([`connect::spread_entry_points`]) and the
//!   connectivity repair every search-graph builder runs ([`connect::repair_connectivity`]).
//! - [`hier`]: hierarchical (GGNN-style) graphs, [`HierGraph`].
//! - [`storage`]: the checksummed, memory-mappable on-disk format ([`storage::save_knn`],
//!   [`storage::load`], [`storage::read_header`]).

pub mod connect;
pub mod hier;
pub mod stats;
pub mod storage;

pub use connect::{RepairReport, connect_graph, repair_connectivity, spread_entry_points};
pub use hier::{HierGraph, HierLayer};
pub use stats::{GraphStats, Reachability, graph_stats, reachable_from};
pub use storage::{FormatIssue, GraphHeader, GraphKind, GraphMeta, LoadOptions, StoredGraph};
pub use weft_core::{FixedDegreeGraph, GraphView, INVALID, KnnGraph, NodeId};

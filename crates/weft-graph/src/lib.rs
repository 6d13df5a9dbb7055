//! weft-graph

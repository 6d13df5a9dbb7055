//! weft benchmarks

//! weft-io

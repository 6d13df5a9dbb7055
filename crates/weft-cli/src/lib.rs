//! weft-cli

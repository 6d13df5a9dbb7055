//! weft

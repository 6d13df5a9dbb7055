//! weft-ggnn

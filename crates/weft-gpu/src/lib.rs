//! weft-gpu

//! weft-cagra

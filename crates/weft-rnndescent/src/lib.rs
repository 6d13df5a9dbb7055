//! weft-rnndescent

//! weft-nndescent

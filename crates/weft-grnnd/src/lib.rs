//! weft-grnnd

//! weft-search

//! the weft binary
fn main() {}

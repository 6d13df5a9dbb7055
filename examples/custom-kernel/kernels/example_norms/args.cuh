// The example module's argument struct, passed by value: its Rust twin
// (`kernels::ExampleScaledNormsArgs`) is generated from this declaration, layout asserted on
// both sides.
#pragma once
#include "weft/types.cuh"

namespace weft {

// example_scaled_norms: `rows` rows of `dim` floats, row-major, in `data`;
// `out[r] = scale * |row r|^2`.
struct ExampleScaledNormsArgs {
    const float* data;
    u32 rows;
    u32 dim;
    float scale;
    float* out;
};

}  // namespace weft

// search_rerank/search_rerank.cu: the f16 traversal of the GPU CAGRA search
// (crates/weft-search/src/gpu/rerank.rs drives it; docs/kernels.md, "F16 traversal and
// rerank", explains the design):
//   - search_rerank_to_f16: an f32 matrix -> its f16 copy in the same padded layout (the
//     padding is zero in both), rounded to nearest even, counting values that overflow to
//     infinity (the host refuses them);
//   - search_rerank_f32: per query, exact f32 distances to the ids of its list (the search's
//     output over the f16 copy), sorted by (distance, id), the k best distinct written out.
#include "weft/distance.cuh"
#include "weft/topk.cuh"
#include "weft/types.cuh"
#include "args.cuh"

using namespace weft;

// Converts `elems` f32 values (a multiple of 8: whole padded rows) at `src` to f16 bits at
// `dst`, eight per thread and step (two 16-byte loads, one 16-byte store), grid-stride. Adds to
// `*overflow` the number of finite inputs whose f16 is infinite (|x| >= 65520).
extern "C" __global__ void __launch_bounds__(256)
    search_rerank_to_f16(const __grid_constant__ SearchRerankToF16Args a) {
    const uint4* in = reinterpret_cast<const uint4*>(a.src);
    uint4* out = reinterpret_cast<uint4*>(a.dst);
    const unsigned long long groups = a.elems / 8;
    u32 over = 0;
    for (unsigned long long g = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; g < groups;
         g += (unsigned long long)gridDim.x * blockDim.x) {
        const uint4 lo4 = in[2 * g];
        const uint4 hi4 = in[2 * g + 1];
        const u32 w[8] = {lo4.x, lo4.y, lo4.z, lo4.w, hi4.x, hi4.y, hi4.z, hi4.w};
        u32 packed[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const u16 lo = f32_to_f16(__uint_as_float(w[2 * i]));
            const u16 hi = f32_to_f16(__uint_as_float(w[2 * i + 1]));
            // Infinite f16 (exponent all ones, mantissa zero) from a finite f32.
            over += ((lo & 0x7fffu) == 0x7c00u && (w[2 * i] & 0x7f800000u) != 0x7f800000u) ? 1u : 0u;
            over += ((hi & 0x7fffu) == 0x7c00u && (w[2 * i + 1] & 0x7f800000u) != 0x7f800000u) ? 1u : 0u;
            packed[i] = (u32)lo | ((u32)hi << 16);
        }
        out[g] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
    if (over != 0) atomicAdd(a.overflow, (unsigned long long)over);
}

// One block per query: the `m` ids of the query's list (`cand`, [query][m]; ids >= n, INVALID
// included, take no part, duplicates are allowed and returned once) scored with exact distances
// between the f32 query row and the f32 data rows (`stride` elements, zero-padded), one warp per
// id (weft/distance.cuh's warp_distance); sorted by (distance, id) with the block bitonic sort
// over `slots` (a power of two >= m) pairs of dynamic shared memory; the first `k` distinct
// valid ones written to out_ids / out_d ([query][k]), the rest padded with (INVALID, +inf).
extern "C" __global__ void __launch_bounds__(128)
    search_rerank_f32(const __grid_constant__ SearchRerankF32Args a) {
    const u8* data = a.data;
    const u8* queries = a.queries;
    const u32* cand = a.cand;
    const u32 n = a.n, stride = a.stride, nq = a.nq, m = a.m, slots = a.slots, k = a.k;
    const MetricCode metric = a.metric;
    u32* out_ids = a.out_ids;
    float* out_d = a.out_d;
    extern __shared__ __align__(16) u32 smem[];
    float* d = reinterpret_cast<float*>(smem);
    u32* id = smem + slots;
    const u32 q = blockIdx.x;
    if (q >= nq) return;
    const u32 tid = threadIdx.x;
    for (u32 i = tid; i < slots; i += blockDim.x) {
        u32 x = i < m ? cand[(u64)q * m + i] : INVALID;
        if (x >= n) x = INVALID;
        id[i] = x;
        d[i] = inf_f32();
    }
    __syncthreads();
    const float* qrow = reinterpret_cast<const float*>(queries) + (u64)q * stride;
    const float* base = reinterpret_cast<const float*>(data);
    const u32 warp = tid / 32;
    const u32 nwarps = blockDim.x / 32;
    for (u32 i = warp; i < m; i += nwarps) {
        const u32 x = id[i];
        if (x == INVALID) continue;  // the same for the whole warp
        const float dist = warp_distance<float>(qrow, base + (u64)x * stride, stride, metric);
        if ((tid & 31u) == 0) d[i] = dist;
    }
    block_bitonic_sort(d, id, slots);  // barriers on both sides
    if (tid < 32) {
        const u32 lane = tid;
        u32* dst_i = out_ids + (u64)q * k;
        float* dst_d = out_d + (u64)q * k;
        u32 pos = 0;
        for (u32 b = 0; b < slots && pos < k; b += 32) {
            const u32 i = b + lane;
            const u32 x = i < slots ? id[i] : INVALID;
            const bool keep = x != INVALID && (i == 0 || id[i - 1] != x);
            const u32 ballot = __ballot_sync(0xffffffffu, keep);
            const u32 at = pos + __popc(ballot & ((1u << lane) - 1u));
            if (keep && at < k) {
                dst_i[at] = x;
                dst_d[at] = d[i];
            }
            pos += __popc(ballot);
        }
        for (u32 i = pos + lane; i < k; i += 32) {
            dst_i[i] = INVALID;
            dst_d[i] = inf_f32();
        }
    }
}

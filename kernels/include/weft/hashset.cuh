// weft/hashset.cuh: visited sets of vertex ids for graph searches and joins.
//
// An open-addressing table of `size` = 2^bits slots of NodeId, empty slots holding INVALID,
// linear probing from visited_hash(id). The table lives wherever the caller puts it (shared
// memory for one block's search, global memory for larger sets) and is "forgettable": a search
// may clear it and start again (visited_clear), at the price of possibly re-visiting a vertex,
// which is harmless for correctness. Inserting into a full table records nothing and reports the
// id as new (again only a possible re-visit, never a lost vertex).
//
// The hash is weft_core-independent but fixed: the Rust oracle test
// (crates/weft-gpu/tests/gpu.rs, visited_set_*) models it bit for bit.
#pragma once

#include "weft/types.cuh"

namespace weft {

// A 32-bit integer finaliser (xor-shift-multiply), good enough to spread consecutive ids.
__device__ __forceinline__ u32 visited_hash(u32 id) {
    id ^= id >> 16;
    id *= 0x7feb352du;
    id ^= id >> 15;
    id *= 0x846ca68bu;
    id ^= id >> 16;
    return id;
}

// Empties `size` slots cooperatively: every thread of the block calls it; the caller
// synchronises (__syncthreads) before the table is used.
__device__ __forceinline__ void visited_clear(NodeId* slots, u32 size) {
    for (u32 i = threadIdx.x; i < size; i += blockDim.x) slots[i] = INVALID;
}

// Inserts `id` (not INVALID) into a table of mask + 1 slots that several threads may update at
// once. Returns true if the id was not there before (exactly one of several concurrent inserts of
// the same id returns true), false if it was. A full table returns true without recording it.
__device__ __forceinline__ bool visited_insert(NodeId* slots, u32 mask, NodeId id) {
    u32 h = visited_hash(id) & mask;
    for (u32 probe = 0; probe <= mask; ++probe) {
        const NodeId prev = atomicCAS(&slots[h], INVALID, id);
        if (prev == INVALID) return true;
        if (prev == id) return false;
        h = (h + 1) & mask;
    }
    return true;
}

// Single-threaded insert into a table no other thread writes at the same time (a per-thread or
// per-warp-leader table): the same placement as visited_insert without atomics.
__device__ __forceinline__ bool visited_insert_exclusive(NodeId* slots, u32 mask, NodeId id) {
    u32 h = visited_hash(id) & mask;
    for (u32 probe = 0; probe <= mask; ++probe) {
        const NodeId cur = slots[h];
        if (cur == INVALID) {
            slots[h] = id;
            return true;
        }
        if (cur == id) return false;
        h = (h + 1) & mask;
    }
    return true;
}

// Whether `id` is in the table (no concurrent inserts of `id` assumed).
__device__ __forceinline__ bool visited_contains(const NodeId* slots, u32 mask, NodeId id) {
    u32 h = visited_hash(id) & mask;
    for (u32 probe = 0; probe <= mask; ++probe) {
        const NodeId cur = slots[h];
        if (cur == id) return true;
        if (cur == INVALID) return false;
        h = (h + 1) & mask;
    }
    return false;
}

}  // namespace weft

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

// ---------------------------------------------------------------------------------------------
// Tag sets: exact sets of ids in half the space of a visited table.
//
// A tag set of 2^bits slots of 16 bits (2^(bits - 1) words of u32; bits >= 1) holds ids below
// 2^(bits + TAG_BITS). Each id is mapped by tag_hash, a bijection of [0, 2^(bits + TAG_BITS)),
// to a home slot (the low `bits` bits) and a tag (the high TAG_BITS bits). An id stored
// `probe` slots after its home (linear probing, at most TAG_PROBES slots) is the 16-bit entry
// (probe << TAG_BITS) | tag, so the entry and its slot name the id exactly: no two ids share an
// entry in the same slot, and membership is exact (no false positives, unlike a filter). Empty
// slots hold TAG_EMPTY (probe 15 never occurs). An id whose TAG_PROBES slots are all taken by
// others is not recorded ("lost"), as in a full visited table.
//
// The Rust oracle test (crates/weft-gpu/tests/gpu.rs, tag_set_*) models it bit for bit.

// Tag bits of an entry.
constexpr u32 TAG_BITS = 12;
// The most slots an insert or lookup probes.
constexpr u32 TAG_PROBES = 15;
// An empty slot.
constexpr u32 TAG_EMPTY = 0xFFFFu;
// What tagset_insert reports.
constexpr u32 TAG_SEEN = 0, TAG_NEW = 1, TAG_LOST = 2;

// A bijection of [0, 2^key_bits) (key_bits in 13..=32): xor-shifts and odd multiplications
// modulo 2^key_bits, so consecutive ids spread over the home slots.
__device__ __forceinline__ u32 tag_hash(u32 id, u32 key_bits) {
    const u32 mask = key_bits >= 32 ? 0xffffffffu : (1u << key_bits) - 1u;
    const u32 s = key_bits / 2;
    u32 x = id & mask;
    x ^= x >> s;
    x = (x * 0x9e3779b1u) & mask;
    x ^= x >> s;
    x = (x * 0x85ebca6bu) & mask;
    x ^= x >> s;
    return x;
}

// Inserts `id` (below 2^(bits + TAG_BITS)) into a tag set of 2^bits slots that several threads
// may update at once (every write is an atomicCAS on the word holding the slot; slots are only
// ever filled between two clears, so a read that shows a slot taken stays true). Returns TAG_NEW
// if it was not there (exactly one of several concurrent inserts of the same id), TAG_SEEN if it
// was, TAG_LOST if it could not be recorded.
__device__ __forceinline__ u32 tagset_insert(u32* words, u32 bits, u32 id) {
    const u32 h = tag_hash(id, bits + TAG_BITS);
    const u32 mask = (1u << bits) - 1u;
    const u32 tag = h >> bits;
    u32 pos = h & mask;
    for (u32 probe = 0; probe < TAG_PROBES; ++probe) {
        const u32 entry = (probe << TAG_BITS) | tag;
        u32* w = &words[pos >> 1];
        const u32 shift = (pos & 1u) * 16u;
        // A plain read decides most inserts (an id already there, a slot taken by another);
        // only an empty slot is claimed with a CAS, which fails, returning the word as it is
        // now, when another thread changed the word since the read.
        u32 cur = *reinterpret_cast<volatile u32*>(w);
        for (;;) {
            const u32 slot = (cur >> shift) & 0xffffu;
            if (slot == entry) return TAG_SEEN;
            if (slot != TAG_EMPTY) break;
            const u32 want = (cur & ~(0xffffu << shift)) | (entry << shift);
            const u32 prev = atomicCAS(w, cur, want);
            if (prev == cur) return TAG_NEW;
            cur = prev;
        }
        pos = (pos + 1u) & mask;
    }
    return TAG_LOST;
}

// Whether `id` is in the tag set (no concurrent insert of `id` assumed).
__device__ __forceinline__ bool tagset_contains(const u32* words, u32 bits, u32 id) {
    const u32 h = tag_hash(id, bits + TAG_BITS);
    const u32 mask = (1u << bits) - 1u;
    const u32 tag = h >> bits;
    u32 pos = h & mask;
    for (u32 probe = 0; probe < TAG_PROBES; ++probe) {
        const u32 slot = (words[pos >> 1] >> ((pos & 1u) * 16u)) & 0xffffu;
        if (slot == ((probe << TAG_BITS) | tag)) return true;
        if (slot == TAG_EMPTY) return false;
        pos = (pos + 1u) & mask;
    }
    return false;
}

}  // namespace weft

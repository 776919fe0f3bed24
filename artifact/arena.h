// The memory plan's arena: buffers that are never in use at the same time share one allocation.
// orchc decides which buffers may overlap (lowering/plan_memory.cpp: every pair not listed as a
// conflict is ordered in the DAG) and lays them out at the params' defaults; the runtime lays
// them out again with the bound sizes. Both call pack_arena, so the same sizes give the same
// offsets. check_arena is the independent check of a layout, run by the validator on the
// artifact's layout and by the runtime on its own. Plain C++, no CUDA (the runtime links this).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace orch::artifact {

// What cudaMalloc guarantees for an allocation's start, so a buffer in the arena is as aligned
// as one allocated alone.
constexpr uint64_t kArenaAlignment = 256;

// Two slots (indices into the arena's buffers) that must not share a byte, lower index first.
using SlotPair = std::pair<uint32_t, uint32_t>;

struct ArenaLayout {
  std::vector<uint64_t> offsets;  // per slot, multiples of the alignment
  uint64_t bytes = 0;             // the arena: the largest offset + size
  std::string error;              // non-empty: the sizes do not fit in 64 bits
  bool ok() const { return error.empty(); }
};

// Lays out slots of `bytes` each, largest first, each at the lowest aligned offset where it
// overlaps no slot it conflicts with that is already placed. Deterministic. `alignment` must be
// a power of two. Slots of 0 bytes go at offset 0 and overlap nothing.
ArenaLayout pack_arena(const std::vector<uint64_t>& bytes, const std::vector<SlotPair>& conflicts,
                       uint64_t alignment = kArenaAlignment);

// Why `offsets` is not a layout of `bytes` that respects `conflicts` within `arena_bytes` (an
// offset not a multiple of `alignment`, a slot past the end, two conflicting slots sharing a
// byte: the first found, naming the slots by index), or "".
std::string check_arena(const std::vector<uint64_t>& bytes, const std::vector<uint64_t>& offsets,
                        const std::vector<SlotPair>& conflicts, uint64_t arena_bytes,
                        uint64_t alignment = kArenaAlignment);

}  // namespace orch::artifact

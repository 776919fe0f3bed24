// The memory plan at instantiate, without CUDA (tested on machines without a GPU): which
// buffers go into the Executable's one arena and where, with the bound sizes. The artifact says
// which buffers may share bytes (MemoryPlan: slots and the conflicts between them, docs/format.md);
// a buffer the application binds leaves the arena, and the rest are laid out again here with
// artifact::pack_arena, the same code orchc used at the params' defaults, so equal sizes give
// the artifact's layout. The layout is checked against the conflicts before anything uses it.
#pragma once

#include <cstdint>
#include <vector>

#include "artifact/pipeline_generated.h"
#include "orch/runtime.h"
#include "runtime/src/plan.h"

namespace orch::rt {

struct ArenaPlacement {
  std::vector<int64_t> offset;  // per Pipeline.buffers: its offset in the arena, -1 outside it
  uint64_t bytes = 0;           // the arena (0: none)
  uint64_t alone_bytes = 0;     // what the arena's buffers would take allocated one by one
  size_t buffers = 0;           // how many are in it
};

// The arena for `p`'s memory plan with the sizes of `plan`, leaving out buffers with
// `bound[i]`. An arena of one buffer is none: that buffer is allocated alone.
Result<ArenaPlacement> place_arena(const fb::Pipeline& p, const Plan& plan, const std::vector<bool>& bound);

}  // namespace orch::rt

// validate()'s rules for the memory plan (docs/format.md, "MemoryPlan"): what the runtime needs
// to lay the arena out again and trust it. Whether the plan is right (which buffers may share)
// is orchc's proof (lowering/verify_memory_plan.cpp); the runtime checks its own layout against
// the conflicts with check_arena.
#include <string>
#include <vector>

#include "artifact/arena.h"
#include "artifact/artifact.h"
#include "artifact/detail.h"

namespace orch::artifact {

std::string memory_plan_problem(const fb::Pipeline& p) {
  const fb::MemoryPlan* m = p.memory_plan();
  if (!m) return "";
  const uint32_t n_buffers = detail::size_of(p.buffers());
  const uint64_t alignment = m->alignment();
  if (alignment < kArenaAlignment || alignment > (uint64_t(1) << 30) || (alignment & (alignment - 1)) != 0)
    return "memory plan: alignment " + std::to_string(alignment) + " is not a power of two from " +
           std::to_string(kArenaAlignment) + " to 2^30";
  if (!detail::structs_aligned(m->slots())) return "memory plan: slots are not 8-byte aligned";
  const uint32_t n = detail::size_of(m->slots());
  std::vector<uint64_t> bytes, offsets;
  int64_t last = -1;
  for (uint32_t i = 0; i < n; ++i) {
    const fb::ArenaSlot* s = m->slots()->Get(i);
    const std::string label = "memory plan slot " + std::to_string(i);
    if (s->buffer() >= n_buffers)
      return label + ": buffer index " + std::to_string(s->buffer()) + " is out of range (the pipeline has " +
             std::to_string(n_buffers) + " buffers)";
    if (static_cast<int64_t>(s->buffer()) <= last) return label + ": buffers are not in increasing order";
    last = s->buffer();
    const fb::Buffer* b = p.buffers()->Get(s->buffer());
    if (b->host() || !b->count() || b->symmetric())
      return label + ": buffer '" + detail::printable(b->name()) + "' is " +
             (b->host()        ? "host memory"
              : b->symmetric() ? "on NVSHMEM's symmetric heap"
                               : "a device scalar") +
             ", which never shares an arena";
    if (!m->laid_out() && (s->offset() != 0 || s->bytes() != 0))
      return label + " has an offset or size, but the plan is not laid out";
    bytes.push_back(s->bytes());
    offsets.push_back(s->offset());
  }
  std::vector<SlotPair> conflicts;
  const uint32_t nc = detail::size_of(m->conflicts());
  for (uint32_t i = 0; i < nc; ++i) {
    const fb::SlotPair* c = m->conflicts()->Get(i);
    if (c->a() >= c->b() || c->b() >= n)
      return "memory plan conflict " + std::to_string(i) + " (" + std::to_string(c->a()) + ", " +
             std::to_string(c->b()) + ") is not two slots, lower first, of the " + std::to_string(n);
    SlotPair pair{c->a(), c->b()};
    if (!conflicts.empty() && !(conflicts.back() < pair))
      return "memory plan conflict " + std::to_string(i) + " is out of order or repeated";
    conflicts.push_back(pair);
  }
  if (!m->laid_out()) {
    if (m->arena_bytes() != 0) return "memory plan: arena_bytes is set, but the plan is not laid out";
    return "";
  }
  const std::string problem = check_arena(bytes, offsets, conflicts, m->arena_bytes(), alignment);
  return problem.empty() ? "" : "memory plan: " + problem;
}

}  // namespace orch::artifact

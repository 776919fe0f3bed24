#include "runtime/src/arena.h"

#include <string>

#include "artifact/arena.h"

namespace orch::rt {

Result<ArenaPlacement> place_arena(const fb::Pipeline& p, const Plan& plan, const std::vector<bool>& bound) {
  ArenaPlacement out;
  const uint32_t n = p.buffers() ? p.buffers()->size() : 0;
  out.offset.assign(n, -1);
  const fb::MemoryPlan* m = p.memory_plan();
  if (!m || !m->slots()) return out;
  // The slots still in the arena, renumbered, and the conflicts among them.
  std::vector<int64_t> renumbered(m->slots()->size(), -1);
  std::vector<uint32_t> buffers;
  std::vector<uint64_t> bytes;
  for (uint32_t s = 0; s < m->slots()->size(); ++s) {
    const uint32_t b = m->slots()->Get(s)->buffer();
    if (b >= n || b >= plan.buffers.size() || (b < bound.size() && bound[b])) continue;
    renumbered[s] = static_cast<int64_t>(buffers.size());
    buffers.push_back(b);
    bytes.push_back(plan.buffers[b].bytes);
  }
  if (buffers.size() < 2) return out;
  std::vector<artifact::SlotPair> conflicts;
  if (m->conflicts())
    for (const fb::SlotPair* c : *m->conflicts()) {
      if (c->a() >= renumbered.size() || c->b() >= renumbered.size()) continue;  // the validator refuses these
      const int64_t a = renumbered[c->a()], b = renumbered[c->b()];
      if (a >= 0 && b >= 0) conflicts.emplace_back(static_cast<uint32_t>(a), static_cast<uint32_t>(b));
    }
  const artifact::ArenaLayout layout = artifact::pack_arena(bytes, conflicts, m->alignment());
  if (!layout.ok()) return Error(ErrorCode::Unsupported, "the memory plan's arena: " + layout.error);
  // The independent check: a packing bug must not hand two live buffers the same bytes.
  const std::string problem = artifact::check_arena(bytes, layout.offsets, conflicts, layout.bytes, m->alignment());
  if (!problem.empty())
    return Error(ErrorCode::Unsupported, "the memory plan's arena is laid out wrongly (a bug in orch): " + problem);
  for (size_t i = 0; i < buffers.size(); ++i) {
    out.offset[buffers[i]] = static_cast<int64_t>(layout.offsets[i]);
    out.alone_bytes += bytes[i];
  }
  out.bytes = layout.bytes;
  out.buffers = buffers.size();
  return out;
}

}  // namespace orch::rt

#include "lowering/passes.h"

namespace orch::lowering {

namespace {

void merge_accesses(std::vector<ir::BufferAccess>& into,
                    const std::vector<ir::BufferAccess>& from) {
  for (const ir::BufferAccess& a : from) {
    bool found = false;
    for (ir::BufferAccess& b : into)
      if (b.buffer == a.buffer) {
        b.read |= a.read;
        b.write |= a.write;
        found = true;
      }
    if (!found) into.push_back(a);
  }
}

// Both of no unrolled copy, or of the same one: one kernel can hold one guard.
bool same_guard(const ir::Node& a, const ir::Node& b) {
  if (a.guard.has_value() != b.guard.has_value()) return false;
  return !a.guard || (a.guard->loop == b.guard->loop && a.guard->copy == b.guard->copy);
}

std::vector<std::pair<int, ir::Expr>> updates_of(ir::Node& n) {
  if (n.kind == ir::NodeKind::ScalarUpdate && n.fused_updates.empty()) return {{n.dst, n.value}};
  return std::move(n.fused_updates);
}

}  // namespace

void fuse_generated_kernels(ir::Program& p) {
  for_each_region(p, [&](ir::Region& region, int) {
    std::vector<ir::Node> out;
    for (ir::Node& n : region.nodes) {
      bool fusable = n.kind == ir::NodeKind::ScalarUpdate || n.kind == ir::NodeKind::SetCondition;
      // Adjacent in program order means no statement lies between them, so running both in
      // one kernel at the later one's place keeps every dependency.
      if (fusable && !out.empty() && out.back().kind == ir::NodeKind::ScalarUpdate && same_guard(out.back(), n)) {
        ir::Node prev = std::move(out.back());
        out.pop_back();
        std::vector<std::pair<int, ir::Expr>> updates = updates_of(prev);
        for (auto& u : updates_of(n)) updates.push_back(std::move(u));
        if (n.kind == ir::NodeKind::ScalarUpdate) {
          n.dst = updates.front().first;
          n.value = updates.front().second;
        }
        n.fused_updates = std::move(updates);
        std::vector<ir::BufferAccess> accesses = prev.accesses;
        merge_accesses(accesses, n.accesses);
        n.accesses = std::move(accesses);
        if (n.kind == ir::NodeKind::ScalarUpdate) n.loc = prev.loc;
      }
      out.push_back(std::move(n));
    }
    region.nodes = std::move(out);
  });
}

}  // namespace orch::lowering

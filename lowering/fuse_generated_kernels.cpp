#include "lowering/passes.h"

namespace orch::lowering {

namespace {

void merge_accesses(std::vector<mir::BufferAccess>& into,
                    const std::vector<mir::BufferAccess>& from) {
  for (const mir::BufferAccess& a : from) {
    bool found = false;
    for (mir::BufferAccess& b : into)
      if (b.buffer == a.buffer) {
        b.read |= a.read;
        b.write |= a.write;
        found = true;
      }
    if (!found) into.push_back(a);
  }
}

// Both of no unrolled copy, or of the same one: one kernel can hold one guard.
bool same_guard(const mir::Node& a, const mir::Node& b) {
  if (a.guard.has_value() != b.guard.has_value()) return false;
  return !a.guard || (a.guard->loop == b.guard->loop && a.guard->copy == b.guard->copy);
}

// The updates a fusable node (a ScalarUpdate or a SetCondition) runs, in order.
std::vector<std::pair<int, mir::Expr>> updates_of(mir::Node& n) {
  if (mir::ScalarUpdateNode* u = std::get_if<mir::ScalarUpdateNode>(&n.op)) {
    if (u->fused_updates.empty()) return {{u->dst, u->value}};
    return std::move(u->fused_updates);
  }
  return std::move(n.as<mir::SetConditionNode>().fused_updates);
}

}  // namespace

void fuse_generated_kernels(mir::Program& p) {
  for_each_region(p, [&](mir::Region& region, int) {
    std::vector<mir::Node> out;
    for (mir::Node& n : region.nodes) {
      bool fusable = n.is<mir::ScalarUpdateNode>() || n.is<mir::SetConditionNode>();
      // Adjacent in program order means no statement lies between them, so running both in
      // one kernel at the later one's place keeps every dependency.
      if (fusable && !out.empty() && out.back().is<mir::ScalarUpdateNode>() && same_guard(out.back(), n)) {
        mir::Node prev = std::move(out.back());
        out.pop_back();
        std::vector<std::pair<int, mir::Expr>> updates = updates_of(prev);
        for (auto& u : updates_of(n)) updates.push_back(std::move(u));
        if (mir::ScalarUpdateNode* u = std::get_if<mir::ScalarUpdateNode>(&n.op)) {
          u->dst = updates.front().first;
          u->value = updates.front().second;
          u->fused_updates = std::move(updates);
          n.loc = prev.loc;
        } else {
          n.as<mir::SetConditionNode>().fused_updates = std::move(updates);
        }
        std::vector<mir::BufferAccess> accesses = prev.accesses;
        merge_accesses(accesses, n.accesses);
        n.accesses = std::move(accesses);
      }
      out.push_back(std::move(n));
    }
    region.nodes = std::move(out);
  });
}

}  // namespace orch::lowering

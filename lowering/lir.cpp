#include "lowering/lir.h"

namespace orch::lir {

const char* to_string(ArgKind k) {
  switch (k) {
    case ArgKind::Value: return "value";
    case ArgKind::Buffer: return "buffer";
    case ArgKind::CondHandle: return "handle";
    case ArgKind::GraphExec: return "exec";
    case ArgKind::GraphTable: return "table";
    case ArgKind::Status: return "status";
  }
  return "?";
}

const char* to_string(ConditionalType t) {
  switch (t) {
    case ConditionalType::If: return "if";
    case ConditionalType::While: return "while";
    case ConditionalType::Switch: return "switch";
  }
  return "?";
}

const char* to_string(DepKind k) {
  switch (k) {
    case DepKind::Full: return "full";
    case DepKind::Programmatic: return "programmatic";
  }
  return "?";
}

const char* to_string(PlanStatus s) {
  switch (s) {
    case PlanStatus::Arena: return "shares the arena";
    case PlanStatus::NoPartner: return "in use beside every buffer it could share with";
    case PlanStatus::Off: return "planning is off (--no-memory-plan)";
    case PlanStatus::Host: return "host memory";
    case PlanStatus::Scalar: return "a device scalar";
    case PlanStatus::Keep: return "declared `keep`";
    case PlanStatus::Generated: return "orchc's own";
    case PlanStatus::Unused: return "no statement uses it";
    case PlanStatus::Collective: return "a collective's buffer";
    case PlanStatus::DeviceGraph: return "used by a graph launched from the device";
    case PlanStatus::ReadFirst: return "may be read before a launch writes all of it (its contents carry between launches)";
    case PlanStatus::ResultSometimes:
      return "a result some launches may not write (its contents carry between launches)";
    case PlanStatus::TooMany: return "past the planner's limits (buffers or uses)";
  }
  return "?";
}

const char* kind_name(const NodeOp& op) {
  return std::visit(overloaded{
                        [](const KernelNode&) { return "kernel"; },
                        [](const MemcpyNode&) { return "memcpy"; },
                        [](const MemsetNode&) { return "memset"; },
                        [](const EmptyNode&) { return "empty"; },
                        [](const ConditionalNode&) { return "conditional"; },
                        [](const CollectiveNode&) { return "collective"; },
                    },
                    op);
}

std::string where(const Node& n) {
  return "line " + std::to_string(n.loc.begin.line) + ":" + std::to_string(n.loc.begin.col);
}

bool holds_while(const Node& n) {
  const auto* c = std::get_if<ConditionalNode>(&n.op);
  if (!c) return false;
  if (c->type == ConditionalType::While) return true;
  for (const Body& b : c->bodies)
    for (const Node& inner : b.nodes)
      if (holds_while(inner)) return true;
  return false;
}

bool reaches(const Body& b, uint32_t from, uint32_t to) {
  // Backwards from `to`; indices are a topological order, so nothing below `from` can lead to it.
  std::vector<bool> seen(b.nodes.size(), false);
  std::vector<uint32_t> stack{to};
  while (!stack.empty()) {
    const uint32_t at = stack.back();
    stack.pop_back();
    if (at == from) return true;
    for (const Dep& d : b.nodes[at].deps)
      if (d.from >= from && !seen[d.from]) seen[d.from] = true, stack.push_back(d.from);
  }
  return false;
}

}  // namespace orch::lir

#include "lowering/mir.h"

#include "compiler/dag.h"
#include "support/overloaded.h"

namespace orch::mir {

const char* to_string(GuardRole r) {
  switch (r) {
    case GuardRole::Alone:
      return "alone";
    case GuardRole::Decide:
      return "decide";
    case GuardRole::Race:
      return "race";
    case GuardRole::Follow:
      return "follow";
    case GuardRole::Each:
      return "each";
  }
  return "?";
}

const char* to_string(NodeKind k) {
  switch (k) {
    case NodeKind::Kernel:
      return "kernel";
    case NodeKind::Copy:
      return "copy";
    case NodeKind::Fill:
      return "fill";
    case NodeKind::ScalarUpdate:
      return "scalar_update";
    case NodeKind::If:
      return "if";
    case NodeKind::While:
      return "while";
    case NodeKind::Switch:
      return "switch";
    case NodeKind::LaunchGraph:
      return "launch";
    case NodeKind::Collective:
      return "collective";
    case NodeKind::Shmem:
      return "nvshmem";
    case NodeKind::SetCondition:
      return "set_condition";
  }
  return "?";
}

const ConditionalParts* conditional(const Node& n) {
  return std::visit(
      overloaded{[](const IfNode& c) -> const ConditionalParts* { return &c; },
                 [](const WhileNode& c) -> const ConditionalParts* { return &c; },
                 [](const SwitchNode& c) -> const ConditionalParts* { return &c; },
                 [](const KernelNode&) -> const ConditionalParts* { return nullptr; },
                 [](const CopyNode&) -> const ConditionalParts* { return nullptr; },
                 [](const FillNode&) -> const ConditionalParts* { return nullptr; },
                 [](const ScalarUpdateNode&) -> const ConditionalParts* { return nullptr; },
                 [](const LaunchGraphNode&) -> const ConditionalParts* { return nullptr; },
                 [](const CollectiveNode&) -> const ConditionalParts* { return nullptr; },
                 [](const ShmemNode&) -> const ConditionalParts* { return nullptr; },
                 [](const SetConditionNode&) -> const ConditionalParts* { return nullptr; }},
      n.op);
}

ConditionalParts* conditional(Node& n) {
  return const_cast<ConditionalParts*>(conditional(static_cast<const Node&>(n)));
}

Bodies<const Region> bodies(const Node& n) {
  const ConditionalParts* c = conditional(n);
  if (!c) return {};
  return {c->bodies.data(), c->bodies.data() + c->bodies.size()};
}

Bodies<Region> bodies(Node& n) {
  ConditionalParts* c = conditional(n);
  if (!c) return {};
  return {c->bodies.data(), c->bodies.data() + c->bodies.size()};
}

bool is_ordered(const Region& region, int from, int to) {
  return orch::is_ordered(region.edges, region.nodes.size(), from, to);
}

}  // namespace orch::mir

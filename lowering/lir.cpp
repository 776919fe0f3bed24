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

}  // namespace orch::lir

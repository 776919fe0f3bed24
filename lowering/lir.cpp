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

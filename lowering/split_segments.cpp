#include "lowering/passes.h"

namespace orch::lowering {

namespace {

enum class NodeClass { Plain, Conditional, LaunchOrCollective };

NodeClass classify(const mir::Program& p, const mir::Node& n) {
  switch (n.kind()) {
    case mir::NodeKind::If:
    case mir::NodeKind::While:
    case mir::NodeKind::Switch:
      return NodeClass::Conditional;
    case mir::NodeKind::LaunchGraph:
    case mir::NodeKind::Collective:
      return NodeClass::LaunchOrCollective;
    case mir::NodeKind::Kernel: {
      // A kernel that may launch kernels from the device is kept apart from conditional
      // nodes like one that launches graphs: a precaution, as both use the device runtime's
      // launch path and the pair is not measured (a needless split costs one more launch).
      const mir::Kernel& k = p.kernels[n.as<mir::KernelNode>().kernel];
      return k.budgets.empty() && !k.may_launch_kernels ? NodeClass::Plain
                                                        : NodeClass::LaunchOrCollective;
    }
    case mir::NodeKind::Copy:
    case mir::NodeKind::Fill:
    case mir::NodeKind::ScalarUpdate:
    case mir::NodeKind::SetCondition:
    case mir::NodeKind::Shmem:  // a kernel that calls NVSHMEM, later
      break;
  }
  return NodeClass::Plain;
}

}  // namespace

void split_segments(mir::Program& p) {
  p.segments = {p.main_graph};
  if (p.main_graph < 0) return;
  bool has_conditional = false, has_other = false;
  for (const mir::Node& n : p.graphs[p.main_graph].body.nodes) {
    NodeClass c = classify(p, n);
    has_conditional |= c == NodeClass::Conditional;
    has_other |= c == NodeClass::LaunchOrCollective;
  }
  if (!has_conditional || !has_other) return;

  // Cut main in program order wherever the class flips; plain nodes stay with the segment
  // they are in. Segments run one after another, which keeps every ordering.
  mir::Graph original = std::move(p.graphs[p.main_graph]);
  std::vector<mir::Graph> parts;
  NodeClass current = NodeClass::Plain;
  for (mir::Node& n : original.body.nodes) {
    NodeClass c = classify(p, n);
    if (parts.empty() || (c != NodeClass::Plain && current != NodeClass::Plain && c != current)) {
      mir::Graph g;
      g.name = original.name + "." + std::to_string(parts.size());
      g.loc = original.loc;
      parts.push_back(std::move(g));
      current = NodeClass::Plain;
    }
    if (c != NodeClass::Plain) current = c;
    parts.back().body.nodes.push_back(std::move(n));
  }
  p.segments.clear();
  p.graphs[p.main_graph] = std::move(parts[0]);
  p.segments.push_back(p.main_graph);
  for (size_t i = 1; i < parts.size(); ++i) {
    p.graphs.push_back(std::move(parts[i]));
    p.segments.push_back(static_cast<int>(p.graphs.size() - 1));
  }
  // Launch counts per execution now belong to whichever segment launches.
  for (int s : p.segments) {
    mir::Graph& g = p.graphs[s];
    g.fire_and_forget_launches = original.fire_and_forget_launches;
    g.tail_launches = original.tail_launches;
    g.self_tail_launches = original.self_tail_launches;
  }
}

}  // namespace orch::lowering

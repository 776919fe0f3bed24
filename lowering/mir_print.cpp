// --print-passes' view of lowering's program: `orchc --emit=yaml`'s YAML (compiler/emit.h's
// parts for what the checker's program shares) with what the passes add: handles, fused
// updates, condition kernels, segments.
#include <yaml-cpp/yaml.h>

#include "compiler/emit.h"
#include "lowering/mir.h"
#include "support/overloaded.h"

namespace orch::mir {

namespace {

void region(YAML::Emitter& out, const Program& p, const SourceManager& sources, const Region& r);

void node(YAML::Emitter& out, const Program& p, const SourceManager& sources, const Node& n,
          size_t id) {
  emit_parts::yaml_node_start(out, p, sources, id, to_string(n.kind()), describe_node(p, n), n.loc,
                              n.call_stack, n.accesses);
  auto kernel = [&](const KernelNode& k) {
    std::vector<std::string> args;
    for (const KernelArg& a : k.args) {
      switch (a.kind) {
        case ArgKind::Value:
          args.push_back(to_string(a.value, p));
          break;
        case ArgKind::Buffer:
          args.push_back(p.buffers[a.ref].name);
          break;
        case ArgKind::Cond:
          args.push_back("cond");
          break;
        case ArgKind::CondHandle:
          args.push_back("handle " + std::to_string(a.ref));
          break;
        case ArgKind::Graph:
        case ArgKind::GraphFamily:
          args.push_back(a.self ? "self" : p.graphs[a.ref].name);
          break;
        case ArgKind::Status:
          args.push_back("device status");
          break;
      }
    }
    emit_parts::yaml_kernel_fields(out, p.kernels[k.kernel].name, args);
  };
  auto handle = [&](int h) {
    if (h >= 0) out << YAML::Key << "handle" << YAML::Value << h;
  };
  auto bodies = [&](const ConditionalParts& c) {
    if (c.bodies.empty()) return;
    out << YAML::Key << "bodies" << YAML::Value << YAML::BeginSeq;
    for (const Region& b : c.bodies) region(out, p, sources, b);
    out << YAML::EndSeq;
  };
  auto conditional = [&](const ConditionalParts& c) {
    handle(c.handle);
    bodies(c);
  };
  std::visit(
      overloaded{kernel, [](const CopyNode&) {}, [](const FillNode&) {},
                 [](const ScalarUpdateNode&) {}, [&](const IfNode& c) { conditional(c); },
                 [&](const WhileNode& c) { conditional(c); },
                 [&](const SwitchNode& c) {
                   handle(c.handle);
                   out << YAML::Key << "cases" << YAML::Value << YAML::Flow << c.case_values;
                   out << YAML::Key << "default" << YAML::Value << c.has_default;
                   bodies(c);
                 },
                 [](const LaunchGraphNode&) {}, [](const CollectiveNode&) {},
                 [](const ShmemNode&) {}, [&](const SetConditionNode& c) { handle(c.handle); }},
      n.op);
  out << YAML::EndMap;
}

void region(YAML::Emitter& out, const Program& p, const SourceManager& sources, const Region& r) {
  out << YAML::BeginMap;
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (size_t i = 0; i < r.nodes.size(); ++i) node(out, p, sources, r.nodes[i], i);
  out << YAML::EndSeq;
  emit_parts::yaml_edges(out, p, r.edges);
  out << YAML::EndMap;
}

}  // namespace

std::string describe_node(const Program& p, const Node& n) {
  using namespace emit_parts;
  auto updates = [&](const std::vector<std::pair<int, Expr>>& fused, const char* separator) {
    std::string s;
    for (const auto& [dst, value] : fused) s += describe_scalar_update(p, dst, value) + separator;
    return s;
  };
  return std::visit(
      overloaded{[&](const KernelNode& k) {
                   return describe_launch(p, k.kernel, k.grid, k.block, k.shared_bytes);
                 },
                 [&](const CopyNode& c) { return describe(p, c); },
                 [&](const FillNode& f) { return describe(p, f); },
                 [&](const ScalarUpdateNode& u) {
                   if (u.fused_updates.size() <= 1)
                     return describe_scalar_update(p, u.dst, u.value);
                   std::string s = updates(u.fused_updates, "; ");
                   return s.substr(0, s.size() - 2);
                 },
                 [&](const IfNode& c) { return describe_conditional(p, "if", &*c.cond); },
                 [&](const WhileNode& c) {
                   return describe_conditional(p, "while", c.cond ? &*c.cond : nullptr);
                 },
                 [&](const SwitchNode& c) { return describe_conditional(p, "switch", &*c.cond); },
                 [&](const LaunchGraphNode& l) { return describe(p, l, p.graphs[l.graph].name); },
                 [&](const CollectiveNode& c) { return describe(p, c); },
                 [&](const ShmemNode& s) { return describe(p, s); },
                 [&](const SetConditionNode& c) {
                   return updates(c.fused_updates, "; ") + "set condition " +
                          std::to_string(c.handle) + " = " + to_string(c.cond, p);
                 }},
      n.op);
}

std::string print(const Program& p, const SourceManager& sources) {
  YAML::Emitter out;
  emit_parts::yaml_declarations(out, p);
  out << YAML::Key << "graphs" << YAML::Value << YAML::BeginSeq;
  for (const Graph& g : p.graphs) {
    emit_parts::yaml_graph_start(out, g.name, g.device, g.family_size, g.fire_and_forget_launches,
                                 g.tail_launches, g.self_tail_launches);
    region(out, p, sources, g.body);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  if (!p.segments.empty()) {
    out << YAML::Key << "segments" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (int g : p.segments) out << p.graphs[g].name;
    out << YAML::EndSeq;
  }
  if (!p.handles.empty()) {
    out << YAML::Key << "handles" << YAML::Value << YAML::BeginSeq;
    for (const ConditionalHandle& h : p.handles)
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "graph" << YAML::Value
          << p.graphs[h.graph].name << YAML::Key << "default" << YAML::Value << h.default_value
          << YAML::EndMap;
    out << YAML::EndSeq;
  }
  emit_parts::yaml_bind_checks(out, p, sources);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace orch::mir

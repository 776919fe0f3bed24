#include <yaml-cpp/yaml.h>

#include <sstream>

#include "compiler/emit.h"

#include "support/overloaded.h"

namespace orch {

namespace {

std::string location(const SourceManager& sources, const SourceRange& r) {
  return sources.describe(r);
}

std::string value_text(const ir::Value& v) {
  std::ostringstream s;
  if (v.is_float()) s << v.f64();
  else s << v.to_string();
  return s.str();
}

void region(YAML::Emitter& out, const ir::Program& p, const SourceManager& sources,
            const ir::Region& r);

void node(YAML::Emitter& out, const ir::Program& p, const SourceManager& sources,
          const ir::Node& n, size_t id) {
  emit_parts::yaml_node_start(out, p, sources, id, ir::to_string(n.kind()), describe_node(p, n), n.loc,
                              n.call_stack, n.accesses);
  // Each kind's own fields (the ones describe_node does not already say), one lambda per kind:
  // a new kind must say what it adds here.
  auto kernel = [&](const ir::KernelNode& k) {
    std::vector<std::string> args;
    for (const ir::KernelArg& a : k.args) {
      switch (a.kind) {
        case ir::ArgKind::Value: args.push_back(ir::to_string(a.value, p)); break;
        case ir::ArgKind::Buffer: args.push_back(p.buffers[a.ref].name); break;
        case ir::ArgKind::Cond: args.push_back("cond"); break;
        case ir::ArgKind::Graph:
        case ir::ArgKind::GraphFamily: args.push_back(a.self ? "self" : p.graphs[a.ref].name); break;
      }
    }
    emit_parts::yaml_kernel_fields(out, p.kernels[k.kernel].name, args);
  };
  auto bodies = [&](const ir::ConditionalParts& c) {
    if (c.bodies.empty()) return;
    out << YAML::Key << "bodies" << YAML::Value << YAML::BeginSeq;
    for (const ir::Region& b : c.bodies) region(out, p, sources, b);
    out << YAML::EndSeq;
  };
  std::visit(overloaded{kernel,
                        [](const ir::CopyNode&) {},
                        [](const ir::FillNode&) {},
                        [](const ir::ScalarUpdateNode&) {},
                        [&](const ir::IfNode& c) { bodies(c); },
                        [&](const ir::WhileNode& c) { bodies(c); },
                        [&](const ir::SwitchNode& c) {
                          out << YAML::Key << "cases" << YAML::Value << YAML::Flow << c.case_values;
                          out << YAML::Key << "default" << YAML::Value << c.has_default;
                          bodies(c);
                        },
                        [](const ir::LaunchGraphNode&) {},
                        [](const ir::CollectiveNode&) {},
                        [](const ir::ShmemNode&) {}},
             n.op);
  out << YAML::EndMap;
}

void region(YAML::Emitter& out, const ir::Program& p, const SourceManager& sources,
            const ir::Region& r) {
  out << YAML::BeginMap;
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (size_t i = 0; i < r.nodes.size(); ++i) node(out, p, sources, r.nodes[i], i);
  out << YAML::EndSeq;
  emit_parts::yaml_edges(out, p, r.edges);
  out << YAML::EndMap;
}

}  // namespace

namespace emit_parts {

void yaml_node_start(YAML::Emitter& out, const ir::Declarations& p, const SourceManager& sources, size_t id,
                     const char* kind, const std::string& what, const SourceRange& loc,
                     const std::vector<SourceRange>& call_stack, const std::vector<ir::BufferAccess>& accesses) {
  out << YAML::BeginMap;
  out << YAML::Key << "id" << YAML::Value << id;
  out << YAML::Key << "kind" << YAML::Value << kind;
  out << YAML::Key << "what" << YAML::Value << what;
  out << YAML::Key << "at" << YAML::Value << location(sources, loc);
  if (!call_stack.empty()) {
    out << YAML::Key << "inlined_from" << YAML::Value << YAML::BeginSeq;
    for (const SourceRange& r : call_stack) out << location(sources, r);
    out << YAML::EndSeq;
  }
  std::vector<std::string> reads, writes;
  for (const ir::BufferAccess& a : accesses) {
    if (a.read) reads.push_back(p.buffers[a.buffer].name);
    if (a.write) writes.push_back(p.buffers[a.buffer].name);
  }
  out << YAML::Key << "reads" << YAML::Value << YAML::Flow << reads;
  out << YAML::Key << "writes" << YAML::Value << YAML::Flow << writes;
}

void yaml_kernel_fields(YAML::Emitter& out, const std::string& kernel, const std::vector<std::string>& args) {
  out << YAML::Key << "kernel" << YAML::Value << kernel;
  out << YAML::Key << "args" << YAML::Value << YAML::BeginSeq;
  for (const std::string& a : args) out << a;
  out << YAML::EndSeq;
}

void yaml_edges(YAML::Emitter& out, const ir::Declarations& p, const std::vector<ir::Edge>& edges) {
  out << YAML::Key << "edges" << YAML::Value << YAML::BeginSeq;
  for (const ir::Edge& e : edges) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "from" << YAML::Value << e.from
        << YAML::Key << "to" << YAML::Value << e.to << YAML::Key << "buffer" << YAML::Value
        << (e.buffer >= 0 ? p.buffers[e.buffer].name : std::string("-")) << YAML::Key << "kind" << YAML::Value << ir::to_string(e.kind)
        << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

void yaml_declarations(YAML::Emitter& out, const ir::Declarations& p) {
  out << YAML::BeginMap;
  out << YAML::Key << "pipeline" << YAML::Value << p.name;
  out << YAML::Key << "targets" << YAML::Value << YAML::Flow << p.targets;
  out << YAML::Key << "params" << YAML::Value << YAML::BeginSeq;
  for (const ir::Param& x : p.params) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << x.name
        << YAML::Key << "type" << YAML::Value << ir::to_string(x.type);
    if (x.default_value)
      out << YAML::Key << "default" << YAML::Value << ir::to_string(*x.default_value, p);
    if (x.default_evaluated)
      out << YAML::Key << "value" << YAML::Value << value_text(*x.default_evaluated);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "buffers" << YAML::Value << YAML::BeginSeq;
  for (const ir::Buffer& b : p.buffers) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << b.name
        << YAML::Key << "type" << YAML::Value << ir::to_string(b.elem);
    if (b.count) out << YAML::Key << "count" << YAML::Value << ir::to_string(*b.count, p);
    out << YAML::Key << "memory" << YAML::Value << (b.host ? "host" : "device");
    if (b.keep) out << YAML::Key << "keep" << YAML::Value << true;
    if (b.symmetric) out << YAML::Key << "symmetric" << YAML::Value << true;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "comms" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const ir::Comm& c : p.comms) out << c.name;
  out << YAML::EndSeq;
  out << YAML::Key << "kernels" << YAML::Value << YAML::BeginSeq;
  for (const ir::Kernel& k : p.kernels) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << k.name << YAML::Key << "entry"
        << YAML::Value << k.entry << YAML::Key << "source" << YAML::Value
        << (k.inline_source ? std::string("inline") : k.source_path) << YAML::Key
        << "device_runtime" << YAML::Value << k.uses_device_runtime;
    out << YAML::Key << "params" << YAML::Value << YAML::BeginSeq;
    for (const ir::KernelParam& q : k.params) {
      std::string type;
      switch (q.kind) {
        case ir::KernelParamKind::Value: type = ir::to_string(q.elem); break;
        case ir::KernelParamKind::Scalar:
          type = std::string(ir::to_string(q.access)) + " " + ir::to_string(q.elem);
          break;
        case ir::KernelParamKind::Array:
          type = std::string(ir::to_string(q.access)) + " " + ir::to_string(q.elem) + "[]";
          break;
        case ir::KernelParamKind::Cond: type = "cond"; break;
        case ir::KernelParamKind::Graph: type = "graph"; break;
        case ir::KernelParamKind::GraphFamily:
          type = "graph[" + std::to_string(q.family_size) + "]";
          break;
        case ir::KernelParamKind::Status: type = "status"; break;
      }
      out << q.name + ": " + type;
    }
    out << YAML::EndSeq;
    if (!k.budgets.empty()) {
      out << YAML::Key << "launches" << YAML::Value << YAML::BeginSeq;
      for (const ir::LaunchBudget& b : k.budgets)
        out << k.params[b.param].name + " " + ir::to_string(b.mode) + " <= " +
                   std::to_string(b.limit);
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

void yaml_graph_start(YAML::Emitter& out, const std::string& name, bool device, uint32_t family_size,
                      uint64_t fire_and_forget, uint64_t tail, uint64_t self_tail) {
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << name;
  out << YAML::Key << "device" << YAML::Value << device;
  if (family_size) out << YAML::Key << "family" << YAML::Value << family_size;
  out << YAML::Key << "launches_per_execution" << YAML::Value << YAML::Flow << YAML::BeginMap
      << YAML::Key << "fire_and_forget" << YAML::Value << fire_and_forget
      << YAML::Key << "tail" << YAML::Value << tail << YAML::Key << "self_tail"
      << YAML::Value << self_tail << YAML::EndMap;
  out << YAML::Key << "body" << YAML::Value;
}

void yaml_bind_checks(YAML::Emitter& out, const ir::Declarations& p, const SourceManager& sources) {
  out << YAML::Key << "bind_checks" << YAML::Value << YAML::BeginSeq;
  for (const ir::BindCheck& c : p.bind_checks) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "code" << YAML::Value << to_string(c.code)
        << YAML::Key << "check" << YAML::Value << ir::to_string(c.condition, p) << YAML::Key
        << "at" << YAML::Value << location(sources, c.loc);
    if (c.family_size > 0)  // checked for every member
      out << YAML::Key << "members" << YAML::Value << c.family_size;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

}  // namespace emit_parts

std::string emit_yaml(const ir::Program& p, const SourceManager& sources) {
  YAML::Emitter out;
  emit_parts::yaml_declarations(out, p);
  out << YAML::Key << "graphs" << YAML::Value << YAML::BeginSeq;
  for (const ir::Graph& g : p.graphs) {
    emit_parts::yaml_graph_start(out, g.name, g.device, g.family_size, g.fire_and_forget_launches, g.tail_launches,
                                 g.self_tail_launches);
    region(out, p, sources, g.body);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  emit_parts::yaml_bind_checks(out, p, sources);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace orch

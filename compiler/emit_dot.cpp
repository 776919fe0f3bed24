#include <sstream>

#include "compiler/emit.h"
#include "support/node_name.h"
#include "support/overloaded.h"

namespace orch {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Conditionals are diamonds (boxes when they have no body), work that leaves the graph (a device
// launch, a collective) hexagons, the rest boxes.
const char* node_shape(ir::NodeKind k, bool no_bodies) {
  switch (k) {
    case ir::NodeKind::If:
    case ir::NodeKind::While:
    case ir::NodeKind::Switch:
      return no_bodies ? "box" : "diamond";
    case ir::NodeKind::LaunchGraph:
    case ir::NodeKind::Collective:
    case ir::NodeKind::Shmem:
      return "hexagon";
    case ir::NodeKind::Kernel:
    case ir::NodeKind::Copy:
    case ir::NodeKind::Fill:
    case ir::NodeKind::ScalarUpdate:
      break;
  }
  return "box";
}

class DotWriter {
 public:
  DotWriter(const ir::Program& p, const SourceManager& s) : p_(p), sources_(s) {}

  std::string run() {
    out_ << "digraph \"" << escape(p_.name) << "\" {\n"
         << "  compound=true;\n  rankdir=TB;\n"
         << "  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=10];\n"
         << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
    for (const ir::Graph& g : p_.graphs) {
      std::string label = "graph " + g.name;
      if (g.family_size) label += "[" + g.family_index + ": " + std::to_string(g.family_size) + "]";
      if (g.device) label += " (device)";
      out_ << "  subgraph cluster_" << cluster_++ << " {\n    label=\"" << escape(label)
           << "\";\n    style=" << (g.device ? "dashed" : "solid") << ";\n";
      region(g.body, "    ");
      out_ << "  }\n";
    }
    out_ << "}\n";
    return out_.str();
  }

 private:
  // Writes the nodes and edges of a region; returns the DOT ids of its nodes.
  std::vector<std::string> region(const ir::Region& r, const std::string& indent) {
    std::vector<std::string> ids;
    for (const ir::Node& n : r.nodes) {
      std::string id = "n" + std::to_string(next_id_++);
      ids.push_back(id);
      // The same name orch-run gives the node in its tables and traces.
      const std::string label = node_name(describe_node(p_, n), n.loc.file ? sources_.path(n.loc.file) : "",
                                          n.loc.begin.line, n.loc.begin.col);
      const ir::Bodies<const ir::Region> bodies = ir::bodies(n);
      const char* shape = node_shape(n.kind(), bodies.empty());
      out_ << indent << id << " [label=\"" << escape(label) << "\", shape=" << shape << "];\n";
      if (bodies.empty()) continue;
      for (size_t b = 0; b < bodies.size(); ++b) {
        out_ << indent << "subgraph cluster_" << cluster_++ << " {\n"
             << indent << "  label=\"" << escape(body_label(n, b)) << "\";\n"
             << indent << "  style=dotted;\n";
        std::vector<std::string> inner = region(bodies[b], indent + "  ");
        if (inner.empty()) {
          std::string empty = "n" + std::to_string(next_id_++);
          out_ << indent << "  " << empty << " [label=\"(empty)\", shape=plaintext];\n";
          inner.push_back(empty);
        }
        out_ << indent << "}\n";
        out_ << indent << id << " -> " << inner.front() << " [style=dashed, arrowhead=empty, label=\""
             << escape(body_label(n, b)) << "\"];\n";
      }
    }
    for (const ir::Edge& e : r.edges) {
      out_ << indent << ids[e.from] << " -> " << ids[e.to] << " [label=\""
           << escape(e.buffer >= 0 ? p_.buffers[e.buffer].name : std::string("condition"))
           << "\"" << (e.buffer >= 0 ? "" : ", style=dotted") << "];\n";
    }
    return ids;
  }

  std::string body_label(const ir::Node& n, size_t b) const {
    switch (n.kind()) {
      case ir::NodeKind::If: return b == 0 ? "then" : "else";
      case ir::NodeKind::While: return "body";
      case ir::NodeKind::Switch: {
        const ir::SwitchNode& sw = n.as<ir::SwitchNode>();
        if (sw.has_default && b + 1 == sw.bodies.size()) return "default";
        return "case " + std::to_string(sw.case_values[b]);
      }
      case ir::NodeKind::Kernel:
      case ir::NodeKind::Copy:
      case ir::NodeKind::Fill:
      case ir::NodeKind::ScalarUpdate:
      case ir::NodeKind::LaunchGraph:
      case ir::NodeKind::Collective:
      case ir::NodeKind::Shmem: break;  // no bodies
    }
    return "body";
  }

  const ir::Program& p_;
  const SourceManager& sources_;
  std::ostringstream out_;
  int next_id_ = 0;
  int cluster_ = 0;
};

}  // namespace

namespace emit_parts {

std::string describe_launch(const ir::Declarations& p, int kernel, const ir::Expr (&grid)[3], const ir::Expr (&block)[3],
                            const ir::Expr& shared_bytes) {
  auto shape = [&](const ir::Expr d[3]) {
    bool one_y = d[1].kind == ir::ExprKind::Const && d[1].value.magnitude() == 1;
    bool one_z = d[2].kind == ir::ExprKind::Const && d[2].value.magnitude() == 1;
    if (one_y && one_z) return ir::to_string(d[0], p);
    return "dim3(" + ir::to_string(d[0], p) + ", " + ir::to_string(d[1], p) + ", " +
           ir::to_string(d[2], p) + ")";
  };
  std::string s = p.kernels[kernel].name + "<<<" + shape(grid) + ", " + shape(block);
  if (!(shared_bytes.kind == ir::ExprKind::Const && shared_bytes.value.magnitude() == 0))
    s += ", " + ir::to_string(shared_bytes, p);
  return s + ">>>";
}

std::string describe(const ir::Declarations& p, const ir::CopyNode& c) {
  return "copy " + p.buffers[c.src].name + " -> " + p.buffers[c.dst].name;
}

std::string describe(const ir::Declarations& p, const ir::FillNode& f) {
  return "fill " + p.buffers[f.dst].name + " = " + ir::to_string(f.value, p);
}

std::string describe_scalar_update(const ir::Declarations& p, int dst, const ir::Expr& value) {
  return p.buffers[dst].name + " = " + ir::to_string(value, p);
}

std::string describe_conditional(const ir::Declarations& p, const char* keyword, const ir::Expr* cond) {
  return cond ? std::string(keyword) + " " + ir::to_string(*cond, p) : std::string(keyword) + " kernel";
}

std::string describe(const ir::Declarations& p, const ir::LaunchGraphNode& l, const std::string& graph_name) {
  std::string s = "launch " + graph_name;
  if (l.family_member) s += "[" + ir::to_string(*l.family_member, p) + "]";
  return s + " " + ir::to_string(l.mode);
}

std::string describe(const ir::Declarations& p, const ir::CollectiveNode& c) {
  std::string s = ir::to_string(c.collective);
  if (c.reduce_op != ir::ReduceOp::None) s += std::string(" ") + ir::to_string(c.reduce_op);
  s += " " + p.buffers[c.src].name;
  if (c.dst != c.src) s += " -> " + p.buffers[c.dst].name;
  return s + " on " + p.comms[c.comm].name;
}

std::string describe(const ir::Declarations& p, const ir::ShmemNode& s) {
  auto value = [&] { return s.value ? ir::to_string(*s.value, p) : std::string("?"); };
  auto peer = [&] { return s.peer ? ir::to_string(*s.peer, p) : std::string("?"); };
  auto sig = [&] {
    return p.buffers[s.signal].name + (s.signal_op == ir::SignalOp::Add ? " += " : " = ") + value();
  };
  switch (s.op) {
    case ir::ShmemOp::Put: {
      std::string out = "put " + p.buffers[s.src].name + " -> " + p.buffers[s.dst].name + " on " + peer();
      return s.signal >= 0 ? out + " signal " + sig() : out;
    }
    case ir::ShmemOp::Get: return "get " + p.buffers[s.src].name + " -> " + p.buffers[s.dst].name + " from " + peer();
    case ir::ShmemOp::Signal: return "signal " + sig() + " on " + peer();
    case ir::ShmemOp::Wait:
      return "wait " + p.buffers[s.signal].name + " " + ir::to_string(s.cmp) + " " + value();
    case ir::ShmemOp::Quiet: return "quiet";
    case ir::ShmemOp::Barrier: return "barrier";
  }
  return "?";
}

}  // namespace emit_parts

std::string describe_node(const ir::Program& p, const ir::Node& n) {
  using namespace emit_parts;
  return std::visit(
      overloaded{[&](const ir::KernelNode& k) { return describe_launch(p, k.kernel, k.grid, k.block, k.shared_bytes); },
                 [&](const ir::CopyNode& c) { return describe(p, c); },
                 [&](const ir::FillNode& f) { return describe(p, f); },
                 [&](const ir::ScalarUpdateNode& u) { return describe_scalar_update(p, u.dst, u.value); },
                 [&](const ir::IfNode& c) { return describe_conditional(p, "if", &*c.cond); },
                 [&](const ir::WhileNode& c) { return describe_conditional(p, "while", c.cond ? &*c.cond : nullptr); },
                 [&](const ir::SwitchNode& c) { return describe_conditional(p, "switch", &*c.cond); },
                 [&](const ir::LaunchGraphNode& l) { return describe(p, l, p.graphs[l.graph].name); },
                 [&](const ir::CollectiveNode& c) { return describe(p, c); },
                 [&](const ir::ShmemNode& s) { return describe(p, s); }},
      n.op);
}

std::string emit_dot(const ir::Program& program, const SourceManager& sources) {
  return DotWriter(program, sources).run();
}

}  // namespace orch

#include <sstream>

#include "compiler/emit.h"
#include "support/node_name.h"

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
      const char* shape = n.bodies.empty() ? "box" : "diamond";
      if (n.kind == ir::NodeKind::LaunchGraph || n.kind == ir::NodeKind::Collective)
        shape = "hexagon";
      out_ << indent << id << " [label=\"" << escape(label) << "\", shape=" << shape << "];\n";
      if (n.bodies.empty()) continue;
      for (size_t b = 0; b < n.bodies.size(); ++b) {
        out_ << indent << "subgraph cluster_" << cluster_++ << " {\n"
             << indent << "  label=\"" << escape(body_label(n, b)) << "\";\n"
             << indent << "  style=dotted;\n";
        std::vector<std::string> inner = region(n.bodies[b], indent + "  ");
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
    switch (n.kind) {
      case ir::NodeKind::If: return b == 0 ? "then" : "else";
      case ir::NodeKind::While: return "body";
      case ir::NodeKind::Switch:
        if (n.has_default && b + 1 == n.bodies.size()) return "default";
        return "case " + std::to_string(n.case_values[b]);
      case ir::NodeKind::Kernel:
      case ir::NodeKind::Copy:
      case ir::NodeKind::Fill:
      case ir::NodeKind::ScalarUpdate:
      case ir::NodeKind::LaunchGraph:
      case ir::NodeKind::Collective:
      case ir::NodeKind::SetCondition: break;  // no bodies
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

std::string describe_node(const ir::Program& p, const ir::Node& n) {
  auto shape = [&](const ir::Expr d[3]) {
    bool one_y = d[1].kind == ir::ExprKind::Const && d[1].value.magnitude() == 1;
    bool one_z = d[2].kind == ir::ExprKind::Const && d[2].value.magnitude() == 1;
    if (one_y && one_z) return ir::to_string(d[0], p);
    return "dim3(" + ir::to_string(d[0], p) + ", " + ir::to_string(d[1], p) + ", " +
           ir::to_string(d[2], p) + ")";
  };
  switch (n.kind) {
    case ir::NodeKind::Kernel: {
      std::string s = p.kernels[n.kernel].name + "<<<" + shape(n.grid) + ", " + shape(n.block);
      if (!(n.shared_bytes.kind == ir::ExprKind::Const && n.shared_bytes.value.magnitude() == 0))
        s += ", " + ir::to_string(n.shared_bytes, p);
      return s + ">>>";
    }
    case ir::NodeKind::Copy: return "copy " + p.buffers[n.src].name + " -> " + p.buffers[n.dst].name;
    case ir::NodeKind::Fill:
      return "fill " + p.buffers[n.dst].name + " = " + ir::to_string(n.value, p);
    case ir::NodeKind::ScalarUpdate: {
      if (n.fused_updates.size() <= 1)
        return p.buffers[n.dst].name + " = " + ir::to_string(n.value, p);
      std::string s;
      for (const auto& [dst, value] : n.fused_updates)
        s += (s.empty() ? "" : "; ") + p.buffers[dst].name + " = " + ir::to_string(value, p);
      return s;
    }
    case ir::NodeKind::If: return "if " + ir::to_string(*n.cond, p);
    case ir::NodeKind::While:
      return n.cond ? "while " + ir::to_string(*n.cond, p) : std::string("while kernel");
    case ir::NodeKind::Switch: return "switch " + ir::to_string(*n.cond, p);
    case ir::NodeKind::LaunchGraph: {
      std::string s = "launch " + p.graphs[n.graph].name;
      if (n.family_member) s += "[" + ir::to_string(*n.family_member, p) + "]";
      return s + " " + ir::to_string(n.mode);
    }
    case ir::NodeKind::SetCondition: {
      std::string s;
      for (const auto& [dst, value] : n.fused_updates)
        s += p.buffers[dst].name + " = " + ir::to_string(value, p) + "; ";
      return s + "set condition " + std::to_string(n.handle) +
             (n.cond ? " = " + ir::to_string(*n.cond, p) : std::string());
    }
    case ir::NodeKind::Collective: {
      std::string s = ir::to_string(n.collective);
      if (n.reduce_op != ir::ReduceOp::None) s += std::string(" ") + ir::to_string(n.reduce_op);
      s += " " + p.buffers[n.src].name;
      if (n.dst != n.src) s += " -> " + p.buffers[n.dst].name;
      return s + " on " + p.comms[n.comm].name;
    }
  }
  return "?";
}

std::string emit_dot(const ir::Program& program, const SourceManager& sources) {
  return DotWriter(program, sources).run();
}

}  // namespace orch

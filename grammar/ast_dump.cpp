#include <sstream>

#include "grammar/parse.h"
#include "support/overloaded.h"

namespace orch {

namespace ast {
const char* to_string(Access a) {
  switch (a) {
    case Access::In: return "in";
    case Access::Out: return "out";
    case Access::InOut: return "inout";
    case Access::None: break;
  }
  return "value";
}
const char* to_string(LaunchMode m) {
  switch (m) {
    case LaunchMode::FireAndForget: return "fire_and_forget";
    case LaunchMode::Sibling: return "sibling";
    case LaunchMode::Tail: break;
  }
  return "tail";
}
const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::AllGather: return "allgather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllReduce: break;
  }
  return "allreduce";
}
const char* to_string(ShmemKind k) {
  switch (k) {
    case ShmemKind::Put: return "put";
    case ShmemKind::Get: return "get";
    case ShmemKind::Signal: return "signal";
    case ShmemKind::Wait: return "wait";
    case ShmemKind::Barrier: return "barrier";
    case ShmemKind::Quiet: break;
  }
  return "quiet";
}
}  // namespace ast

namespace {

class AstPrinter {
 public:
  explicit AstPrinter(const SourceManager& sources) : sources_(sources) {}
  std::string str() const { return out_.str(); }

  void module(const ast::Module& m) {
    line(0, "Module " + m.pipeline.name, m.pipeline.loc);
    for (const auto& t : m.targets) line(1, "Target " + t.name, t.loc);
    for (const auto& p : m.params) {
      line(1, "Param " + p.name.name + ": " + p.type.name, p.loc);
      if (p.default_value) expr(2, *p.default_value);
    }
    for (const auto& b : m.buffers) {
      line(1, "Buffer " + b.name.name + ": " + b.elem_type.name + (b.size ? "[]" : "") +
                  (b.host ? " host" : "") + (b.keep ? " keep" : "") + (b.symmetric ? " symmetric" : ""), b.loc);
      if (b.size) expr(2, *b.size);
    }
    for (const auto& c : m.comms) line(1, "Comm " + c.name.name, c.loc);
    for (const auto& k : m.kernels) kernel(k);
    for (const auto& g : m.graphs) {
      std::string head = "Graph " + g.name.name;
      if (g.family_index) head += "[" + g.family_index->name + "]";
      if (g.device) head += " device";
      line(1, head, g.loc);
      if (g.family_size) expr(2, *g.family_size);
      block(2, g.body);
    }
  }

 private:
  void line(int depth, const std::string& text, const SourceRange& loc) {
    out_ << std::string(depth * 2, ' ') << text << " <" << loc.begin.line << ":" << loc.begin.col
         << ">\n";
  }

  void kernel(const ast::Kernel& k) {
    std::string origin = k.from_file ? " from \"" + k.from_file->name + "\"" : " source";
    if (k.entry) origin += " entry \"" + k.entry->name + "\"";
    line(1, "Kernel " + k.name.name + origin, k.loc);
    for (const auto& p : k.params) {
      std::string type;
      switch (p.kind) {
        case ast::KernelParamKind::Cond: type = "cond"; break;
        case ast::KernelParamKind::Graph: type = "graph"; break;
        case ast::KernelParamKind::GraphFamily: type = "graph[]"; break;
        case ast::KernelParamKind::Data:
          type = std::string(ast::to_string(p.access)) + " " + p.elem_type.name +
                 (p.is_array ? "[]" : "");
          break;
      }
      line(2, "KernelParam " + p.name.name + ": " + type, p.loc);
      if (p.family_size) expr(3, *p.family_size);
    }
    for (const auto& b : k.budgets) {
      line(2, "Launches " + b.param.name + " " + ast::to_string(b.mode), b.loc);
      if (b.limit) expr(3, *b.limit);
    }
    for (const auto& c : k.costs) {
      line(2, "Cost " + c.what.name + (c.precision ? "[" + c.precision->name + "]" : std::string()), c.loc);
      if (c.value) expr(3, *c.value);
    }
  }

  void block(int depth, const ast::Block& b) {
    for (const auto& s : b) stmt(depth, s);
  }

  void stmt(int d, const ast::Stmt& s) {
    std::visit(overloaded{
                   [&](const ast::KernelLaunch& n) {
                     line(d, "KernelLaunch " + n.kernel.name, s.loc);
                     if (n.grid) expr(d + 1, *n.grid, "grid: ");
                     if (n.block) expr(d + 1, *n.block, "block: ");
                     if (n.shared_bytes) expr(d + 1, *n.shared_bytes, "shared: ");
                     for (const auto& a : n.args) expr(d + 1, *a, "arg: ");
                   },
                   [&](const ast::Copy& n) { line(d, "Copy " + n.src.name + " -> " + n.dst.name, s.loc); },
                   [&](const ast::Fill& n) {
                     line(d, "Fill " + n.dst.name, s.loc);
                     expr(d + 1, *n.value);
                   },
                   [&](const ast::Assign& n) {
                     line(d, "Assign " + n.target.name + " " + n.op, s.loc);
                     expr(d + 1, *n.value);
                   },
                   [&](const ast::If& n) {
                     line(d, "If", s.loc);
                     expr(d + 1, *n.cond, "cond: ");
                     line(d + 1, "Then", s.loc);
                     block(d + 2, n.then_body);
                     if (n.has_else) {
                       line(d + 1, "Else", n.else_loc);
                       block(d + 2, n.else_body);
                     }
                   },
                   [&](const ast::While& n) {
                     line(d, n.cond ? "While" : "WhileKernel", s.loc);
                     if (n.cond) expr(d + 1, *n.cond, "cond: ");
                     block(d + 1, n.body);
                   },
                   [&](const ast::Switch& n) {
                     line(d, "Switch", s.loc);
                     expr(d + 1, *n.subject, "subject: ");
                     for (const auto& c : n.cases) {
                       line(d + 1, "Case", c.loc);
                       expr(d + 2, *c.value, "value: ");
                       block(d + 2, c.body);
                     }
                     if (n.default_body) {
                       line(d + 1, "Default", n.default_loc);
                       block(d + 2, *n.default_body);
                     }
                   },
                   [&](const ast::Call& n) { line(d, "Call " + n.graph.name, s.loc); },
                   [&](const ast::LaunchGraph& n) {
                     line(d, std::string("Launch ") + n.graph.name + " " + ast::to_string(n.mode), s.loc);
                     if (n.index) expr(d + 1, *n.index, "index: ");
                   },
                   [&](const ast::Collective& n) {
                     std::string text = std::string(ast::to_string(n.kind));
                     if (!n.op.name.empty()) text += " " + n.op.name;
                     text += " " + n.src.name;
                     if (n.dst) text += " -> " + n.dst->name;
                     text += " on " + n.comm.name;
                     line(d, "Collective " + text, s.loc);
                     if (n.root) expr(d + 1, *n.root, "root: ");
                   },
                   [&](const ast::Shmem& n) {
                     std::string text = ast::to_string(n.kind);
                     if (!n.src.name.empty()) text += " " + n.src.name + " -> " + n.dst.name;
                     if (!n.signal.name.empty()) text += " signal " + n.signal.name + " " + n.op;
                     line(d, "Shmem " + text, s.loc);
                     if (n.peer) expr(d + 1, *n.peer, "peer: ");
                     if (n.value) expr(d + 1, *n.value, "value: ");
                   },
               },
               s.node);
  }

  void expr(int d, const ast::Expr& e, const std::string& label = "") {
    std::string text;
    switch (e.kind) {
      case ast::ExprKind::Int: text = "Int " + std::to_string(e.int_value); break;
      case ast::ExprKind::Float: {
        std::ostringstream f;
        f << e.float_value;
        text = "Float " + f.str();
        break;
      }
      case ast::ExprKind::Bool: text = e.int_value ? "Bool true" : "Bool false"; break;
      case ast::ExprKind::Name: text = "Name " + e.text; break;
      case ast::ExprKind::Unary: text = "Unary " + e.text; break;
      case ast::ExprKind::Binary: text = "Binary " + e.text; break;
      case ast::ExprKind::Call: text = "Call " + e.text; break;
    }
    line(d, label + text, e.loc);
    for (const auto& o : e.operands) expr(d + 1, *o);
  }

  const SourceManager& sources_;
  std::ostringstream out_;
};

}  // namespace

std::string dump_ast(const ast::Module& module, const SourceManager& sources) {
  AstPrinter p(sources);
  p.module(module);
  return p.str();
}

}  // namespace orch

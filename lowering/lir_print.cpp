// The lowered program as text (--print-passes, --emit=ir): declarations, then each graph with
// one line per node, its dependencies, and a comment line naming the statement, where it is and
// what it reads and writes. Stable: the same program prints the same bytes.
#include <cstdio>
#include <string>
#include <vector>

#include "lowering/lir.h"

namespace orch::lir {

namespace {

// `digits` at most 16.
std::string hex(uint64_t v, int digits) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits & 31, static_cast<unsigned long long>(v));
  return buf;
}

std::string param_type(const KernelParam& q) {
  switch (q.kind) {
    case KernelParamKind::Value: return expr::to_string(q.elem);
    case KernelParamKind::Scalar:
      return std::string(mir::to_string(q.access)) + " " + expr::to_string(q.elem);
    case KernelParamKind::Array:
      return std::string(mir::to_string(q.access)) + " " + expr::to_string(q.elem) + "[]";
    case KernelParamKind::Cond: return "cond";
    case KernelParamKind::Graph: return "graph";
    case KernelParamKind::GraphFamily: return "graph[" + std::to_string(q.family_size) + "]";
    case KernelParamKind::Status: return "status";
  }
  return "?";
}

std::string images(const std::vector<Image>& images, const std::string& ptx,
                   const std::string& ptx_arch) {
  std::string s;
  for (const Image& i : images)
    s += (s.empty() ? "" : ", ") + i.arch + " " + std::to_string(i.cubin.size()) + " bytes";
  if (!ptx.empty())
    s += (s.empty() ? "" : ", ") + std::string("ptx ") + ptx_arch + " " +
         std::to_string(ptx.size()) + " bytes";
  return s;
}

class Printer {
 public:
  Printer(const Program& p, const SourceManager& sources) : p_(p), sources_(sources) {}

  std::string run() {
    std::string targets;
    for (const std::string& t : p_.targets) targets += (targets.empty() ? "" : ", ") + t;
    line("pipeline " + p_.name + "  targets " + targets + (p_.uses_rank ? "  uses rank" : ""));
    for (const Param& x : p_.params) {
      std::string s = "param " + x.name + ": " + expr::to_string(x.type);
      if (!x.default_text.empty()) s += " = " + x.default_text;
      if (x.default_value) s += "  [" + x.default_value->to_string() + "]";
      line(s);
    }
    for (const Buffer& b : p_.buffers)
      line("buffer " + b.name + ": " + expr::to_string(b.elem) +
           (b.count ? "[" + b.count->text + "]" : "") + (b.host ? " host" : "") + (b.symmetric ? " symmetric" : b.keep ? " keep" : ""));
    for (const Comm& c : p_.comms) line("comm " + c.name);
    for (size_t i = 0; i < p_.kernels.size(); ++i) kernel(i);
    for (size_t i = 0; i < p_.modules.size(); ++i) {
      const Module& m = p_.modules[i];
      line("module " + std::to_string(i) + ": " + images(m.images, m.ptx, m.ptx_arch));
    }
    for (size_t h = 0; h < p_.handles.size(); ++h) {
      const ConditionalHandle& x = p_.handles[h];
      line("handle " + std::to_string(h) + ": graph " + graph_name(x.graph) + ", default " +
           std::to_string(x.default_value) + (x.set_default ? ", reset at every launch" : ""));
    }
    for (const BindCheck& c : p_.bind_checks)
      line("bind check " + c.code + " " + c.condition.text +
           (c.family_size ? "  for members 0.." + std::to_string(c.family_size - 1) : "") +
           (c.always_holds ? "  (always holds)" : "") + "  at " + at(c.loc) + ": " + c.message);
    for (size_t i = 0; i < p_.status_sites.size(); ++i)
      line("status site " + std::to_string(i) + ": " + p_.status_sites[i].what + "  at " +
           at(p_.status_sites[i].loc));
    if (p_.collective_hash) line("collective hash " + hex(p_.collective_hash, 16));
    memory_plan();
    std::string segments;
    for (int s : p_.segments) segments += (segments.empty() ? "" : ", ") + graph_name(s);
    line("segments " + segments);
    if (!p_.device_order.empty()) {
      std::string order;
      for (int g : p_.device_order) order += (order.empty() ? "" : ", ") + graph_name(g);
      line("device order " + order);
    }
    for (size_t g = 0; g < p_.graphs.size(); ++g) graph(g);
    return out_;
  }

 private:
  void line(const std::string& s) {
    out_ += std::string(indent_ * 2, ' ') + s + "\n";
  }
  std::string at(const SourceRange& r) const { return sources_.describe(r); }
  std::string graph_name(int g) const {
    return g >= 0 && static_cast<size_t>(g) < p_.graphs.size() ? p_.graphs[g].name
                                                               : "#" + std::to_string(g);
  }
  std::string buffer_name(int b) const {
    return b >= 0 && static_cast<size_t>(b) < p_.buffers.size() ? p_.buffers[b].name
                                                                : "#" + std::to_string(b);
  }

  // The arena, when buffers share one: each buffer's place at the defaults and the buffers it may
  // share bytes with (every one it has no conflict with), then device memory with and without.
  void memory_plan() {
    const MemoryPlan& m = p_.memory_plan;
    if (m.slots.empty()) return;
    uint64_t separate = 0;
    for (const MemoryPlan::Slot& s : m.slots) separate += s.bytes;
    line("memory plan: " + std::to_string(m.slots.size()) + " buffers in one arena" +
         (m.laid_out ? " of " + std::to_string(m.arena_bytes) + " bytes at the defaults (" + std::to_string(separate) +
                           " one by one)"
                     : ", laid out at instantiate (some size needs a value known only then)"));
    ++indent_;
    std::vector<std::vector<bool>> conflict(m.slots.size(), std::vector<bool>(m.slots.size(), false));
    for (const auto& [a, b] : m.conflicts) conflict[a][b] = conflict[b][a] = true;
    for (size_t i = 0; i < m.slots.size(); ++i) {
      std::string with;
      for (size_t j = 0; j < m.slots.size(); ++j)
        if (j != i && !conflict[i][j]) with += (with.empty() ? "" : ", ") + buffer_name(m.slots[j].buffer);
      line(buffer_name(m.slots[i].buffer) +
           (m.laid_out ? ": " + std::to_string(m.slots[i].bytes) + " bytes at " + std::to_string(m.slots[i].offset)
                       : std::string()) +
           (with.empty() ? "; in use beside every other" : "; may share with " + with));
    }
    if (m.sized)
      line("device memory at the defaults: " + std::to_string(m.device_bytes_planned) + " bytes, " +
           std::to_string(m.device_bytes_separate) + " without the plan");
    --indent_;
  }

  void kernel(size_t i) {
    const Kernel& k = p_.kernels[i];
    std::string params;
    for (const KernelParam& q : k.params)
      params += (params.empty() ? "" : ", ") + q.name + ": " + param_type(q);
    std::string from = k.generated ? "generated"
                       : k.inline_source ? "inline source"
                                         : "from " + k.source_path;
    line("kernel " + std::to_string(i) + " " + k.name + "(" + params + ")  " + from +
         (k.entry != k.name ? ", entry " + k.entry : "") +
         (k.uses_device_runtime ? ", device runtime" : "") +
         (k.launches_kernels ? ", launches kernels" : "") + (k.waits_at_entry ? ", waits at entry" : "") +
         (k.guard ? ", guard of loop " + std::to_string(k.guard->loop) +
                        (k.guard->copy ? " copy " + std::to_string(k.guard->copy) : std::string()) + " (" +
                        mir::to_string(k.guard->role) + ")"
                  : "") +
         (k.guard_of >= 0 ? ", guarded variant of kernel " + std::to_string(k.guard_of) : "") +
         (k.code_choice.empty() ? "" : ", shared-memory code " + k.code_choice));
    ++indent_;
    if (k.module >= 0)
      line("code: module " + std::to_string(k.module) + ", symbol " + k.lowered_name);
    else if (!k.lowered_name.empty())
      line("code: symbol " + k.lowered_name + ", " + images(k.images, k.ptx, k.ptx_arch));
    --indent_;
  }

  void graph(size_t g) {
    const Graph& x = p_.graphs[g];
    std::string s = "graph " + std::to_string(g) + " " + x.name;
    if (x.family_size) s += "[" + x.family_index + ": " + std::to_string(x.family_size) + "]";
    if (x.device) s += " device";
    if (x.fire_and_forget_launches || x.tail_launches)
      s += "  launches " + std::to_string(x.fire_and_forget_launches) + " fire-and-forget, " +
           std::to_string(x.tail_launches) + " tail";
    line(s + "  at " + at(x.loc));
    ++indent_;
    body(x.body);
    --indent_;
  }

  void body(const Body& b) {
    if (b.nodes.empty()) line("(empty)");
    for (size_t i = 0; i < b.nodes.size(); ++i) node(b.nodes[i], i);
  }

  std::string arg(const KernelArg& a) const {
    switch (a.kind) {
      case ArgKind::Value: return a.value.text;
      case ArgKind::Buffer: return buffer_name(a.ref);
      case ArgKind::CondHandle: return "handle " + std::to_string(a.ref);
      case ArgKind::GraphExec:
        return (a.self ? "exec self" : "exec " + graph_name(a.ref)) + (a.late ? " (late)" : "");
      case ArgKind::GraphTable: return "table " + graph_name(a.ref);
      case ArgKind::Status: return "status";
    }
    return "?";
  }

  static std::string dims(const Expr d[3]) {
    return "(" + d[0].text + ", " + d[1].text + ", " + d[2].text + ")";
  }

  void node(const Node& n, size_t i) {
    std::string deps;
    for (const Dep& d : n.deps)
      deps += (deps.empty() ? "" : ", ") + std::string("%") + std::to_string(d.from) +
              (d.kind == DepKind::Full ? "" : std::string(":") + to_string(d.kind));
    const ConditionalNode* conditional = nullptr;
    std::string op = std::visit(
        overloaded{
            [&](const KernelNode& k) {
              std::string args;
              for (const KernelArg& a : k.args) args += (args.empty() ? "" : ", ") + arg(a);
              const std::string name = k.kernel >= 0 && static_cast<size_t>(k.kernel) < p_.kernels.size()
                                           ? p_.kernels[k.kernel].name
                                           : "#" + std::to_string(k.kernel);
              return "kernel " + name + "<<<" + dims(k.grid) + ", " + dims(k.block) + ", " +
                     k.shared_bytes.text + ">>>(" + args + ")";
            },
            [&](const MemcpyNode& m) {
              return "memcpy " + buffer_name(m.src) + " -> " + buffer_name(m.dst);
            },
            [&](const MemsetNode& m) {
              return "memset " + buffer_name(m.dst) + " = " + hex(m.value, 2 * m.element_size) +
                     " x" + std::to_string(m.element_size) + " bytes";
            },
            [&](const EmptyNode&) { return std::string("empty"); },
            [&](const ConditionalNode& c) {
              conditional = &c;
              std::string s = std::string(to_string(c.type)) + " handle " + std::to_string(c.handle);
              if (c.set_by_kernel) s += ", set by its body's kernel";
              if (c.type == ConditionalType::Switch) {
                std::string cases;
                for (const expr::Value& v : c.cases) cases += (cases.empty() ? "" : ", ") + v.to_string();
                s += ", cases [" + cases + "]" + (c.has_default ? " and default" : "");
              }
              return s;
            },
            [&](const CollectiveNode& c) {
              std::string s = mir::to_string(c.kind);
              if (c.op != ReduceOp::None) s += std::string(" ") + mir::to_string(c.op);
              s += " " + buffer_name(c.src) + " -> " + buffer_name(c.dst) + " on " +
                   (c.comm >= 0 && static_cast<size_t>(c.comm) < p_.comms.size() ? p_.comms[c.comm].name
                                                                                  : "#" + std::to_string(c.comm));
              if (c.root) s += " root " + c.root->text;
              if (c.high_priority) s += ", high priority";
              return s;
            },
        },
        n.op);
    line("%" + std::to_string(i) + " = " + op + (deps.empty() ? "" : "  after " + deps));
    std::string reads, writes;
    for (const BufferAccess& a : n.accesses) {
      if (a.read) reads += (reads.empty() ? "" : ", ") + buffer_name(a.buffer);
      if (a.write) writes += (writes.empty() ? "" : ", ") + buffer_name(a.buffer);
    }
    ++indent_;
    line("  # " + n.what + "  at " + at(n.loc) + (reads.empty() ? "" : "; reads " + reads) +
         (writes.empty() ? "" : "; writes " + writes));
    if (!n.edge_note.empty()) line("  # " + n.edge_note);
    if (!n.order_note.empty()) line("  # " + n.order_note);
    if (conditional) {
      for (size_t b = 0; b < conditional->bodies.size(); ++b) {
        std::string label = "body " + std::to_string(b);
        if (conditional->type == ConditionalType::Switch)
          label += b < conditional->cases.size() ? " (case " + conditional->cases[b].to_string() + ")"
                                                 : " (default)";
        else if (conditional->type == ConditionalType::If)
          label += b == 0 ? " (then)" : " (else)";
        line(label + ":");
        ++indent_;
        body(conditional->bodies[b]);
        --indent_;
      }
    }
    --indent_;
  }

  const Program& p_;
  const SourceManager& sources_;
  std::string out_;
  int indent_ = 0;
};

}  // namespace

std::string print(const Program& program, const SourceManager& sources) {
  return Printer(program, sources).run();
}

}  // namespace orch::lir

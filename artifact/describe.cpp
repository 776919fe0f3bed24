// describe_pipeline() and expr_to_string(): what orch-inspect prints. Written for a pipeline
// that open_pipeline() accepted, but every lookup is still bounds-checked so that a bug
// elsewhere shows up as "#7?" in the text rather than as a crash.
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/expr_code.h"
#include "artifact/detail.h"

namespace orch::artifact {

namespace {

using detail::in_range;
using detail::printable;
using detail::size_of;
using detail::type_name;


template <class E>
std::string enum_name(E value, const char* (*name_of)(E)) {
  if (!in_range(value)) return "#" + std::to_string(static_cast<unsigned>(value));
  return name_of(value);
}

std::string count(uint64_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

class Describer {
 public:
  explicit Describer(const fb::Pipeline& p) : p_(p) {}

  std::string run() {
    header();
    params();
    buffers();
    memory_plan();
    comms();
    kernels();
    graphs();
    handles();
    bind_checks();
    line(0, "collective hash: " + hex(p_.collective_hash()));
    if (p_.nvshmem_version()) line(0, "NVSHMEM: kernels linked with " + printable(p_.nvshmem_version()));
    return out_;
  }

 private:
  void line(int indent, const std::string& text) {
    out_.append(static_cast<size_t>(indent) * 2, ' ');
    out_ += text;
    out_ += '\n';
  }

  static std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "0x%016" PRIx64, v);
    return buf;
  }

  template <class Table>
  std::string name_at(const flatbuffers::Vector<flatbuffers::Offset<Table>>* v, int64_t i) const {
    if (i < 0 || i >= static_cast<int64_t>(size_of(v))) return "#" + std::to_string(i) + "?";
    const flatbuffers::String* name = v->Get(static_cast<uint32_t>(i))->name();
    if (name == nullptr || name->size() == 0) return "#" + std::to_string(i);
    return printable(name);
  }

  std::string loc(const fb::SourceLoc* l) const {
    if (l == nullptr) return std::string();
    const auto* files = p_.source_files();
    std::string file = l->file() < size_of(files) ? printable(files->Get(l->file()), 200)
                                                  : "file#" + std::to_string(l->file());
    return file + ":" + std::to_string(l->line()) + ":" + std::to_string(l->column());
  }
  std::string at(const fb::SourceLoc* l) const {
    return l == nullptr ? std::string() : "  at " + loc(l);
  }

  std::string expr(const fb::Expr* e) const { return expr_to_string(e, p_); }

  void header() {
    line(0, "pipeline '" + printable(p_.name(), 200) + "'");
    line(1, "format version " + std::to_string(kFormatVersion) +
                (p_.compiler_version() ? ", compiled by orchc " + printable(p_.compiler_version())
                                       : std::string()));
    const auto* files = p_.source_files();
    std::string text = "source files:";
    for (uint32_t i = 0; i < size_of(files); ++i) {
      text += " [" + std::to_string(i) + "] " + printable(files->Get(i), 200);
    }
    line(1, size_of(files) ? text : "source files: none");
    const auto* targets = p_.targets();
    text = "targets:";
    for (uint32_t i = 0; i < size_of(targets); ++i) {
      text += (i ? ", " : " ") + printable(targets->Get(i));
    }
    line(1, size_of(targets) ? text : "targets: none");
  }

  void params() {
    const auto* v = p_.params();
    line(0, "params (" + std::to_string(size_of(v)) + "):");
    for (uint32_t i = 0; i < size_of(v); ++i) {
      const fb::Param* q = v->Get(i);
      std::string text =
          "[" + std::to_string(i) + "] " + printable(q->name()) + ": " + type_name(q->type());
      if (!q->has_default()) {
        text += " (no default, set at bind)";
      } else {
        const expr::Value v = default_of(*q);
        text += " = " + v.to_string();
        if (v.is_float() && text.find_first_of(".ein", text.rfind('=')) == std::string::npos) text += ".0";
      }
      line(1, text + at(q->loc()));
    }
  }

  void buffers() {
    const auto* v = p_.buffers();
    line(0, "buffers (" + std::to_string(size_of(v)) + "):");
    for (uint32_t i = 0; i < size_of(v); ++i) {
      const fb::Buffer* b = v->Get(i);
      std::string text =
          "[" + std::to_string(i) + "] " + printable(b->name()) + ": " + type_name(b->type());
      text += b->count() ? "[" + expr(b->count()) + "]" : " (scalar)";
      text += b->host() ? " host (pinned, mapped)" : b->symmetric() ? " symmetric (NVSHMEM's heap)" : " device";
      line(1, text + at(b->loc()));
    }
  }

  // Bytes of buffer `i` with the params' defaults, or -1 where some value is known only at bind
  // time (a param without a default, world_size).
  int64_t bytes_at_defaults(uint32_t i) const {
    const fb::Buffer* b = p_.buffers()->Get(i);
    const uint64_t size = scalar_size(b->type());
    if (!b->count()) return static_cast<int64_t>(size);
    expr::Evaluation v = expr::evaluate(to_expr(b->count()), [&](const expr::Instr& in) -> std::optional<expr::Value> {
      if (in.kind != expr::InstrKind::Param || !p_.params() || in.ref < 0 ||
          static_cast<uint32_t>(in.ref) >= p_.params()->size())
        return std::nullopt;
      const fb::Param* q = p_.params()->Get(static_cast<uint32_t>(in.ref));
      if (!q->has_default()) return std::nullopt;
      return default_of(*q);
    });
    if (!v.known() || v.value.negative() || size == 0 || v.value.magnitude() > (uint64_t(1) << 62) / size) return -1;
    return static_cast<int64_t>(v.value.magnitude() * size);
  }

  // Which buffers share the arena, each one's place at the defaults and the buffers it may share
  // bytes with; device memory at the defaults with and without the plan.
  void memory_plan() {
    const fb::MemoryPlan* m = p_.memory_plan();
    const uint32_t n = m ? size_of(m->slots()) : 0;
    if (n == 0) {
      line(0, "memory plan: none (every buffer the runtime allocates is allocated alone)");
      return;
    }
    std::vector<std::vector<bool>> conflict(n, std::vector<bool>(n, false));
    for (uint32_t i = 0; i < size_of(m->conflicts()); ++i) {
      const fb::SlotPair* c = m->conflicts()->Get(i);
      if (c->a() < n && c->b() < n) conflict[c->a()][c->b()] = conflict[c->b()][c->a()] = true;
    }
    uint64_t alone = 0;
    std::vector<bool> in_arena(size_of(p_.buffers()), false);
    for (uint32_t i = 0; i < n; ++i) {
      alone += m->slots()->Get(i)->bytes();
      if (m->slots()->Get(i)->buffer() < in_arena.size()) in_arena[m->slots()->Get(i)->buffer()] = true;
    }
    line(0, "memory plan: " + count(n, "buffer") + " in one arena" +
                (m->laid_out() ? " of " + std::to_string(m->arena_bytes()) + " bytes at the defaults (" +
                                     std::to_string(alone) + " bytes alone)"
                               : ", laid out at instantiate (some size is known only then)") +
                ", alignment " + std::to_string(m->alignment()));
    for (uint32_t i = 0; i < n; ++i) {
      const fb::ArenaSlot* s = m->slots()->Get(i);
      std::string with;
      for (uint32_t j = 0; j < n; ++j)
        if (j != i && !conflict[i][j]) with += (with.empty() ? "" : ", ") + name_at(p_.buffers(), m->slots()->Get(j)->buffer());
      line(1, "[" + std::to_string(s->buffer()) + "] " + name_at(p_.buffers(), s->buffer()) +
                  (m->laid_out() ? ": " + std::to_string(s->bytes()) + " bytes at " + std::to_string(s->offset()) : "") +
                  (with.empty() ? "; in use beside every other" : "; may share with " + with));
    }
    if (!m->laid_out()) return;
    // Device memory the runtime allocates at the defaults (the application binds none).
    uint64_t separate = 0, planned = m->arena_bytes();
    for (uint32_t i = 0; i < size_of(p_.buffers()); ++i) {
      if (p_.buffers()->Get(i)->host()) continue;
      const int64_t b = bytes_at_defaults(i);
      if (b < 0) return;
      separate += static_cast<uint64_t>(b);
      if (!in_arena[i]) planned += static_cast<uint64_t>(b);
    }
    line(1, "device memory at the defaults: " + std::to_string(planned) + " bytes, " + std::to_string(separate) +
                " without the plan");
  }

  void comms() {
    const auto* v = p_.comms();
    line(0, "comms (" + std::to_string(size_of(v)) + "):");
    for (uint32_t i = 0; i < size_of(v); ++i) {
      line(1, "[" + std::to_string(i) + "] " + printable(v->Get(i)->name()));
    }
  }

  void kernels() {
    const auto* v = p_.kernels();
    line(0, "kernels (" + std::to_string(size_of(v)) + "):");
    for (uint32_t i = 0; i < size_of(v); ++i) {
      const fb::Kernel* k = v->Get(i);
      std::string text = "[" + std::to_string(i) + "] " + printable(k->name()) +
                         (k->generated() ? "  generated" : "  user") + "  symbol " +
                         printable(k->lowered_name(), 200);
      if (k->uses_device_runtime()) text += "  uses the device runtime";
      if (k->launches_kernels()) text += "  launches kernels from the device";
      if (k->waits_at_entry()) text += "  waits at entry";
      line(1, text + at(k->loc()));
      const auto* params = k->params();
      text = "params:";
      for (uint32_t j = 0; j < size_of(params); ++j) {
        const fb::KernelParam* q = params->Get(j);
        text += (j ? ", " : " ") + printable(q->name()) + ": ";
        if (q->access() != fb::Access::None) {
          text += lower(enum_name(q->access(), fb::EnumNameAccess)) + " ";
        }
        text +=
            type_name(q->type()) + " " + lower(enum_name(q->kind(), fb::EnumNameKernelParamKind));
        if (q->family_size() > 0) text += "[" + std::to_string(q->family_size()) + "]";
      }
      line(3, size_of(params) ? text : "params: none");
      if (k->in_module() >= 0)
        line(3, "code: module " + std::to_string(k->in_module()));
      else
        line(3, code_text(k->images(), k->ptx(), k->ptx_arch()));
    }
    const auto* modules = p_.modules();
    if (size_of(modules) == 0) return;
    line(0, "modules (" + std::to_string(size_of(modules)) + "):");
    for (uint32_t m = 0; m < size_of(modules); ++m) {
      std::string users;
      uint32_t count = 0;
      for (uint32_t i = 0; i < size_of(v); ++i)
        if (v->Get(i)->in_module() == static_cast<int>(m)) ++count;
      users = std::to_string(count) + (count == 1 ? " kernel" : " kernels");
      line(1, "[" + std::to_string(m) + "] " + users);
      const fb::Module* mod = modules->Get(m);
      line(3, code_text(mod->images(), mod->ptx(), mod->ptx_arch()));
    }
  }

  static std::string code_text(const flatbuffers::Vector<flatbuffers::Offset<fb::KernelImage>>* images,
                               const flatbuffers::Vector<uint8_t>* ptx, const flatbuffers::String* ptx_arch) {
    std::string text = "images:";
    for (uint32_t j = 0; j < size_of(images); ++j) {
      const fb::KernelImage* image = images->Get(j);
      text += (j ? ", " : " ") + printable(image->arch()) + " CUBIN " +
              std::to_string(size_of(image->cubin())) + " bytes";
    }
    if (size_of(ptx) > 0) {
      text += (size_of(images) ? ", PTX " : " PTX ") + printable(ptx_arch) + " " +
              std::to_string(size_of(ptx)) + " bytes";
    }
    return text;
  }

  void graphs() {
    const auto* v = p_.graphs();
    line(0, "graphs (" + std::to_string(size_of(v)) + "):");
    const auto* segments = p_.segments();
    for (uint32_t i = 0; i < size_of(v); ++i) {
      const fb::Graph* g = v->Get(i);
      std::string text = "[" + std::to_string(i) + "] " + name_at(v, i);
      if (static_cast<int64_t>(i) == p_.main_graph()) text += "  main";
      for (uint32_t s = 0; s < size_of(segments); ++s) {
        if (segments->Get(s) == static_cast<int>(i)) text += "  segment " + std::to_string(s);
      }
      if (g->device()) text += "  device";
      if (g->family_size() > 0) text += "  family of " + std::to_string(g->family_size());
      text += "  (" + count(size_of(g->nodes()), "node") + ")";
      line(1, text);
      line(2, "launch budget: " + std::to_string(g->fire_and_forget_launches()) +
                  " fire-and-forget, " + std::to_string(g->tail_launches()) + " tail");
      nodes(g, 2, 0);
    }
    if (size_of(segments) > 0) {
      std::string text = "segments (launched in order):";
      for (uint32_t s = 0; s < size_of(segments); ++s) {
        text += " " + name_at(v, segments->Get(s));
      }
      line(0, text);
    }
    if (const auto* order = p_.device_order(); size_of(order) > 0) {
      std::string text = "device graphs (instantiated in order):";
      for (uint32_t i = 0; i < size_of(order); ++i) text += " " + name_at(v, order->Get(i));
      line(0, text);
    }
  }

  void nodes(const fb::Graph* g, int indent, uint32_t depth) {
    const auto* v = g->nodes();
    uint32_t first = 0;
    for (uint32_t i = 0; i < size_of(v); ++i) {
      node(g, i, first, indent, depth);
      first = v->Get(i)->deps_end();
    }
  }

  std::string shape(const flatbuffers::Vector<flatbuffers::Offset<fb::Expr>>* v) const {
    std::string text = "(";
    for (uint32_t j = 0; j < size_of(v); ++j) text += (j ? ", " : "") + expr(v->Get(j));
    return text + ")";
  }

  std::string arg(const fb::KernelArg* a) const {
    switch (a->kind()) {
      case fb::ArgKind::Value:
        return expr(a->value()) + " as " + type_name(a->type());
      case fb::ArgKind::Buffer:
        return "buffer " + name_at(p_.buffers(), a->ref());
      case fb::ArgKind::CondHandle:
        return "handle " + std::to_string(a->ref());
      case fb::ArgKind::GraphExec:
        return (a->ref() == -1 ? std::string("exec of this graph")
                               : "exec of graph " + name_at(p_.graphs(), a->ref())) +
               (a->late() ? " (set after instantiation)" : "");
      case fb::ArgKind::GraphTable:
        return "execs of family " + name_at(p_.graphs(), a->ref());
      case fb::ArgKind::Status:
        return "device status record";
    }
    return "arg kind #" + std::to_string(static_cast<unsigned>(a->kind()));
  }

  // Node `index` of `g`, whose dependencies begin at deps()[first].
  void node(const fb::Graph* g, uint32_t index, uint32_t first, int indent, uint32_t depth) {
    const fb::Node* at_node = g->nodes()->Get(index);
    const fb::Op* op = p_.ops()->Get(at_node->op());
    const NodeKind kind = op_kind(*op);
    std::string text = "node " + std::to_string(index) + ": " + lower(node_kind_name(kind));
    if (op->what() && op->what()->size() > 0) text += "  \"" + printable(op->what(), 200) + "\"";
    text += "  deps [";
    const auto* deps = g->deps();
    const auto* kinds = g->dep_kinds();
    for (uint32_t j = first; j < at_node->deps_end(); ++j) {
      text += (j > first ? ", " : "") + std::to_string(deps->Get(j));
      if (j < size_of(kinds) && kinds->Get(j) != fb::EdgeKind::Full)
        text += " " + lower(enum_name(kinds->Get(j), fb::EnumNameEdgeKind));
    }
    text += "]" + at(&at_node->loc());
    line(indent, text);

    switch (kind) {
      case NodeKind::Kernel: {
        const fb::KernelOp* n = op->body_as_KernelOp();
        if (const fb::LaunchShape* l = n->launch()) {
          // The same text as for constant expressions.
          auto three = [](uint32_t x, uint32_t y, uint32_t z) {
            return "(" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) + ")";
          };
          text = "kernel " + name_at(p_.kernels(), n->kernel()) + "  grid " +
                 three(l->grid_x(), l->grid_y(), l->grid_z()) + "  block " +
                 three(l->block_x(), l->block_y(), l->block_z());
          if (l->shared_bytes()) text += "  shared " + std::to_string(l->shared_bytes()) + " bytes";
        } else {
          text = "kernel " + name_at(p_.kernels(), n->kernel()) + "  grid " + shape(n->grid()) +
                 "  block " + shape(n->block());
          if (n->shared_bytes()) text += "  shared " + expr(n->shared_bytes()) + " bytes";
        }
        line(indent + 2, text);
        const auto* args = n->args();
        text = "args:";
        for (uint32_t j = 0; j < size_of(args); ++j) text += (j ? ", " : " ") + arg(args->Get(j));
        line(indent + 2, size_of(args) ? text : "args: none");
        if (n->cost_bytes() || n->cost_flops()) {
          text = "cost:";
          if (n->cost_bytes()) text += " bytes " + expr(n->cost_bytes());
          if (n->cost_flops()) {
            const fb::Kernel* k = p_.kernels() && n->kernel() >= 0 && static_cast<uint32_t>(n->kernel()) < p_.kernels()->size()
                                      ? p_.kernels()->Get(n->kernel())
                                      : nullptr;
            std::string type = k ? fb::EnumNameScalarType(k->cost_flops_type()) : "F32";
            for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            text += std::string(n->cost_bytes() ? "," : "") + " flops[" + type + "] " + expr(n->cost_flops());
          }
          line(indent + 2, text);
        }
        break;
      }
      case NodeKind::Memcpy: {
        const fb::MemcpyOp* n = op->body_as_MemcpyOp();
        line(indent + 2, "buffer " + name_at(p_.buffers(), n->src()) + " -> buffer " +
                             name_at(p_.buffers(), n->dst()));
        break;
      }
      case NodeKind::Memset: {
        const fb::MemsetOp* n = op->body_as_MemsetOp();
        char value[16];
        std::snprintf(value, sizeof(value), "0x%x", n->value());
        line(indent + 2, "buffer " + name_at(p_.buffers(), n->dst()) + " = " + value + " (" +
                             std::to_string(n->element_size()) + "-byte pattern)");
        break;
      }
      case NodeKind::Empty:
        break;
      case NodeKind::Conditional: {
        const fb::ConditionalOp* n = op->body_as_ConditionalOp();
        line(indent + 2, lower(enum_name(n->type(), fb::EnumNameConditionalType)) +
                             "  handle " + std::to_string(n->handle()));
        const auto* bodies = n->bodies();
        for (uint32_t b = 0; b < size_of(bodies); ++b) {
          const fb::Graph* body = bodies->Get(b);
          std::string label = "body " + std::to_string(b);
          if (n->type() == fb::ConditionalType::If) label += b == 0 ? " (then)" : " (else)";
          if (n->type() == fb::ConditionalType::Switch)
            label += " (case " + std::to_string(b) + ")";
          if (body->name() && body->name()->size() > 0)
            label += " '" + printable(body->name()) + "'";
          line(indent + 2, label + " (" + count(size_of(body->nodes()), "node") + "):");
          if (depth + 1 > kMaxGraphDepth) {
            line(indent + 3, "... nested too deep to print");
            continue;
          }
          nodes(body, indent + 3, depth + 1);
        }
        break;
      }
      case NodeKind::Collective: {
        const fb::CollectiveOp* n = op->body_as_CollectiveOp();
        text = lower(enum_name(n->collective(), fb::EnumNameCollectiveKind));
        if (n->collective() == fb::CollectiveKind::AllReduce ||
            n->collective() == fb::CollectiveKind::ReduceScatter) {
          text += " " + lower(enum_name(n->reduce_op(), fb::EnumNameReduceOp));
        }
        text += " on comm " + name_at(p_.comms(), n->comm()) + ": buffer " +
                name_at(p_.buffers(), n->src()) + " -> buffer " + name_at(p_.buffers(), n->dst());
        if (n->root()) text += "  root " + expr(n->root());
        line(indent + 2, text);
        break;
      }
    }
  }

  void handles() {
    const auto* v = p_.handles();
    line(0, "conditional handles (" + std::to_string(size_of(v)) + "):");
    for (uint32_t i = 0; i < size_of(v); ++i) {
      const fb::ConditionalHandle* h = v->Get(i);
      line(1, "[" + std::to_string(i) + "] graph " + name_at(p_.graphs(), h->graph()) +
                  "  default " + std::to_string(h->default_value()) +
                  (h->set_default() ? " (assigned at every launch)" : ""));
    }
  }

  void bind_checks() {
    const auto* v = p_.bind_checks();
    line(0, "bind checks (" + std::to_string(size_of(v)) + "):");
    for (uint32_t i = 0; i < size_of(v); ++i) {
      const fb::BindCheck* c = v->Get(i);
      line(1, "[" + std::to_string(i) + "] " + printable(c->code()) + ": require " +
                  expr(c->condition()) +
                  (c->family_size() > 0
                       ? " for each of " + std::to_string(c->family_size()) + " members"
                       : std::string()) +
                  "  else \"" + printable(c->message(), 200) + "\"" + at(c->loc()));
    }
  }

  const fb::Pipeline& p_;
  std::string out_;
};

}  // namespace

std::string expr_to_string(const fb::Expr* e, const fb::Pipeline& p) {
  static const char kInvalid[] = "<invalid expression>";
  if (e == nullptr || e->code() == nullptr || e->code()->size() == 0) return kInvalid;
  const auto* code = e->code();
  if (code->size() > kMaxExprLength ||
      reinterpret_cast<uintptr_t>(code->Data()) % alignof(fb::ExprInstr) != 0) {
    return kInvalid;
  }
  for (const fb::ExprInstr* in : *code)
    if (!in_range(in->op())) return kInvalid;
  bool bad = false;
  std::string text = expr::to_source(to_expr(e), [&](const expr::Instr& in, size_t) -> std::string {
    switch (in.kind) {
      case expr::InstrKind::Param: {
        const auto* params = p.params();
        if (in.ref < 0 || in.ref >= static_cast<int>(size_of(params))) {
          bad = true;
          return {};
        }
        return printable(params->Get(static_cast<uint32_t>(in.ref))->name());
      }
      case expr::InstrKind::FamilyIndex: return "family_index";
      case expr::InstrKind::Rank: return "rank";
      case expr::InstrKind::WorldSize: return "world_size";
      case expr::InstrKind::DeviceScalar:
      case expr::InstrKind::Const:
      case expr::InstrKind::Operator: break;
    }
    return "?";
  });
  if (bad || text.empty()) return kInvalid;
  return text;
}

std::string describe_pipeline(const fb::Pipeline& pipeline) {
  try {
    return Describer(pipeline).run();
  } catch (const std::exception& e) {
    return std::string("cannot describe the pipeline: ") + e.what() + "\n";
  }
}

}  // namespace orch::artifact

// validate(): the semantic checks that run after the FlatBuffers verifier. The verifier proves
// that every offset stays inside the buffer; this proves that every index, expression and node
// is something the runtime can build without tripping. docs/format.md lists the rules; each
// message is one line saying what is wrong and where.
#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
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


std::string_view view(const flatbuffers::String* s) {
  return s ? std::string_view(s->c_str(), s->size()) : std::string_view();
}

bool empty(const flatbuffers::String* s) { return s == nullptr || s->size() == 0; }

std::string plural(uint64_t n, const char* noun, const char* nouns = nullptr) {
  if (n == 1) return "1 " + std::string(noun);
  return std::to_string(n) + " " + (nouns ? std::string(nouns) : std::string(noun) + "s");
}

// Operands an expression instruction pops; each pushes one value.
int arity(fb::ExprOp op) {
  if (static_cast<int>(op) < kFirstOperator) return 0;
  return expr::arity(static_cast<expr::Op>(static_cast<int>(op) - kFirstOperator));
}

// Which argument kind binds which kernel parameter kind.
fb::ArgKind arg_kind_for(fb::KernelParamKind kind) {
  switch (kind) {
    case fb::KernelParamKind::Value:
      return fb::ArgKind::Value;
    case fb::KernelParamKind::Scalar:
    case fb::KernelParamKind::Array:
      return fb::ArgKind::Buffer;
    case fb::KernelParamKind::Cond:
      return fb::ArgKind::CondHandle;
    case fb::KernelParamKind::Graph:
      return fb::ArgKind::GraphExec;
    case fb::KernelParamKind::GraphFamily:
      return fb::ArgKind::GraphTable;
    case fb::KernelParamKind::Status:
      return fb::ArgKind::Status;
  }
  return fb::ArgKind::Value;
}

class Validator {
 public:
  Validator(const fb::Pipeline& p, size_t payload_size)
      : p_(p),
        // Shared sub-tables let a small file describe a huge tree. Every table, instruction,
        // dependency and string walked below is charged the bytes it would take unshared; a file
        // may expand to 4x its size (generous for deliberate sharing), no more.
        budget_(4 * static_cast<uint64_t>(payload_size) + 65536),
        params_(p.params()),
        buffers_(p.buffers()),
        comms_(p.comms()),
        kernels_(p.kernels()),
        graphs_(p.graphs()),
        handles_(p.handles()),
        ops_(p.ops()),
        n_params_(size_of(params_)),
        n_buffers_(size_of(buffers_)),
        n_comms_(size_of(comms_)),
        n_kernels_(size_of(kernels_)),
        n_graphs_(size_of(graphs_)),
        n_handles_(size_of(handles_)),
        n_ops_(size_of(ops_)),
        n_files_(size_of(p.source_files())),
        targets_problem_(pdl_targets_problem(p)) {}

  std::string run() {
    check_pipeline();
    return error_;
  }

 private:
  enum class FrameKind { Graph, Node, Body, Arg };
  struct Frame {
    FrameKind kind;
    uint32_t index;
  };

  // Every check returns false once it has recorded the first error.
  bool fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }
  // For problems inside a graph: prefixes the current path ("graph 'main' node 3 body 0").
  bool fail_here(const std::string& message) { return fail(where() + ": " + message); }

  bool charge(uint64_t bytes) {
    if (bytes <= budget_) {
      budget_ -= bytes;
      return true;
    }
    budget_ = 0;
    return fail(
        "the pipeline expands to more than 4 times its size through shared sub-tables; refusing "
        "to walk it");
  }

  std::string named(const char* what, const flatbuffers::String* name, uint32_t index) const {
    if (empty(name)) return std::string(what) + " " + std::to_string(index);
    return std::string(what) + " '" + printable(name) + "'";
  }
  std::string graph_label(uint32_t i) const { return named("graph", graphs_->Get(i)->name(), i); }
  std::string buffer_label(uint32_t i) const {
    return named("buffer", buffers_->Get(i)->name(), i);
  }
  std::string kernel_label(uint32_t i) const {
    return named("kernel", kernels_->Get(i)->name(), i);
  }

  // The path to the current graph, node or argument. Deep paths keep their first and last
  // kHeadTail frames, so a message stays one readable line.
  static constexpr size_t kHeadTail = 6;
  std::string where() const {
    std::string out;
    const size_t n = frames_.size();
    for (size_t i = 0; i < n; ++i) {
      if (n > 3 * kHeadTail && i >= kHeadTail && i < n - kHeadTail) {
        if (i == kHeadTail) out += " ... (" + std::to_string(n - 2 * kHeadTail) + " more) ...";
        continue;
      }
      const Frame& f = frames_[i];
      if (!out.empty()) out += ' ';
      switch (f.kind) {
        case FrameKind::Graph:
          out += graph_label(f.index);
          break;
        case FrameKind::Node:
          out += "node " + std::to_string(f.index);
          break;
        case FrameKind::Body:
          out += "body " + std::to_string(f.index);
          break;
        case FrameKind::Arg:
          out += "arg " + std::to_string(f.index);
          break;
      }
    }
    return out;
  }

  // RAII push of a path frame.
  class Scope {
   public:
    Scope(Validator& v, FrameKind kind, uint32_t index) : v_(v) {
      v_.frames_.push_back({kind, index});
    }
    ~Scope() { v_.frames_.pop_back(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Validator& v_;
  };

  // Absent, or line 0 (a node's location is a struct, always there: line 0 says it has none).
  bool loc_ok(const fb::SourceLoc* loc) const {
    return loc == nullptr || loc->line() == 0 || loc->file() < n_files_;
  }
  static bool in_table(int64_t index, uint32_t n) { return index >= 0 && index < static_cast<int64_t>(n); }

  // "" when `index` is a valid index into a table of `n` `noun`s, else the complaint.
  static std::string range_problem(const char* what, int64_t index, uint32_t n, const char* noun) {
    if (index >= 0 && index < static_cast<int64_t>(n)) return std::string();
    return std::string(what) + " " + std::to_string(index) + " is out of range (the pipeline has " +
           plural(n, noun) + ")";
  }

  std::string loc_problem(const fb::SourceLoc* loc) const {
    if (loc_ok(loc)) return std::string();
    return "source location refers to file " + std::to_string(loc->file()) +
           ", but the pipeline lists " + plural(n_files_, "source file");
  }

  // True when a present expression is well formed and well typed; otherwise false, with the
  // complaint in *problem (for the caller to label), or in error_ when the budget ran out.
  // Charges its size first.
  bool expr_ok(const fb::Expr* e, std::string* problem) {
    const auto* code = e->code();
    const uint32_t n = size_of(code);
    if (!charge(8 + 24 * static_cast<uint64_t>(n))) return false;
    if (proven(code, n)) return true;
    *problem = expr_problem(code, n);
    return problem->empty();
  }

  // "" or what is wrong with the `n` instructions of a present, charged expression.
  std::string expr_problem(const flatbuffers::Vector<const fb::ExprInstr*>* code, uint32_t n) {
    if (n == 0) return "expression has no instructions";
    if (n > kMaxExprLength) {
      return "expression has " + std::to_string(n) + " instructions, more than the limit of " +
             std::to_string(kMaxExprLength);
    }
    if (!detail::structs_aligned(code)) {
      return "expression code is not 8-byte aligned";
    }
    int64_t depth = 0;
    for (uint32_t k = 0; k < n; ++k) {
      const fb::ExprInstr* in = code->Get(k);
      const fb::ExprOp op = in->op();
      if (!in_range(op)) {
        return "expression instruction " + std::to_string(k) + " has unknown op " +
               std::to_string(static_cast<unsigned>(op));
      }
      const int pops = arity(op);
      if (depth < pops) {
        return "expression instruction " + std::to_string(k) + " (" + fb::EnumNameExprOp(op) +
               ") needs " + plural(pops, "operand") + ", the stack holds " + std::to_string(depth);
      }
      if (!in_range(in->type())) {
        return "expression instruction " + std::to_string(k) + " has unknown type " +
               std::to_string(static_cast<unsigned>(in->type()));
      }
      if (op == fb::ExprOp::Param &&
          (in->ref() < 0 || in->ref() >= static_cast<int64_t>(n_params_))) {
        return "expression instruction " + std::to_string(k) + " refers to param " +
               std::to_string(in->ref()) + ", but the pipeline has " + plural(n_params_, "param");
      }
      if (op == fb::ExprOp::Param && in->type() != p_.params()->Get(static_cast<uint32_t>(in->ref()))->type()) {
        return "expression instruction " + std::to_string(k) + " reads param " + std::to_string(in->ref()) +
               " as " + fb::EnumNameScalarType(in->type()) + ", but it is " +
               fb::EnumNameScalarType(p_.params()->Get(static_cast<uint32_t>(in->ref()))->type());
      }
      if ((op == fb::ExprOp::FamilyIndex || op == fb::ExprOp::Rank || op == fb::ExprOp::WorldSize) &&
          in->type() != fb::ScalarType::U32) {
        return "expression instruction " + std::to_string(k) + " (" + fb::EnumNameExprOp(op) + ") must be U32";
      }
      depth = depth - pops + 1;
    }
    if (depth != 1) {
      return "expression leaves " + std::to_string(depth) + " values on the stack instead of 1";
    }
    // Types: every operator's by the rules, every constant a value of its type. Short code is
    // decoded in place: a pipeline holds several expressions per kernel node.
    constexpr uint32_t kInPlace = 8;
    expr::Instr in_place[kInPlace];
    std::vector<expr::Instr> on_heap;
    expr::Instr* decoded = in_place;
    if (n > kInPlace) {
      on_heap.resize(n);
      decoded = on_heap.data();
    }
    for (uint32_t k = 0; k < n; ++k) decoded[k] = to_expr(*code->Get(k));
    std::string typing = expr::verify(decoded, n);
    if (!typing.empty()) return "expression " + typing;
    remember(reinterpret_cast<const fb::ExprInstr*>(code->Data()), n);
    return std::string();
  }

  // Short expressions already proved well formed and well typed in this pipeline, by their
  // bytes: launch shapes and arguments repeat from node to node ({1}, {256}, {n}), so each
  // distinct one is typed once (a 1,000-kernel chain has 7,000 such expressions and 3 distinct).
  // A direct-mapped table: the bytes pick one slot, which holds the last expression proved
  // there; a collision only means typing an expression again.
  static constexpr uint32_t kProvenLength = 4, kProvenSlots = 64;
  static constexpr size_t kInstrWords = sizeof(fb::ExprInstr) / 8;
  static_assert(sizeof(fb::ExprInstr) % 8 == 0 && alignof(fb::ExprInstr) == 8, "ExprInstr is whole words");
  struct Proven {
    uint32_t n = 0;  // 0: empty
    uint64_t words[kProvenLength * kInstrWords];
  };
  Proven proven_[kProvenSlots];

  static uint64_t word(const uint8_t* at) {
    uint64_t w;
    std::memcpy(&w, at, 8);
    return w;
  }
  static uint32_t proven_slot(const uint8_t* bytes, uint32_t n) {
    uint64_t h = n;
    for (size_t k = 0; k < n * kInstrWords; ++k) h = (h ^ word(bytes + 8 * k)) * 0x9E3779B97F4A7C15ull;
    return static_cast<uint32_t>(h >> 58) % kProvenSlots;
  }

  // Whether the `n` instructions of `code` (charged, not yet looked at) are bytes proved before.
  bool proven(const flatbuffers::Vector<const fb::ExprInstr*>* code, uint32_t n) const {
    if (n < 1 || n > kProvenLength) return false;
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(code->Data());
    const Proven& p = proven_[proven_slot(bytes, n)];
    if (p.n != n) return false;
    for (size_t k = 0; k < n * kInstrWords; ++k)
      if (p.words[k] != word(bytes + 8 * k)) return false;
    return true;
  }
  void remember(const fb::ExprInstr* code, uint32_t n) {
    if (n < 1 || n > kProvenLength) return;
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(code);
    Proven& slot = proven_[proven_slot(bytes, n)];
    slot.n = n;
    std::memcpy(slot.words, bytes, n * sizeof(fb::ExprInstr));
  }

  // Top-level expressions: `label` is e.g. "buffer 'u' count".
  bool check_expr(const fb::Expr* e, bool required, const std::string& label) {
    if (e == nullptr) return required ? fail(label + " is missing") : true;
    std::string problem;
    if (expr_ok(e, &problem)) return true;
    return error_.empty() ? fail(label + ": " + problem) : false;
  }
  // Expressions inside a graph: the message starts with the path, then `label` ("grid[1]").
  // `index` >= 0 makes the label "<label>[<index>]"; it is built only for a message.
  // The common case (absent, or proved before) is decided inline, without a string.
  bool check_node_expr(const fb::Expr* e, bool required, const char* label, int index = -1) {
    if (e == nullptr) return !required || node_expr_failed(label, index, "is missing");
    const auto* code = e->code();
    const uint32_t n = size_of(code);
    if (!charge(8 + 24 * static_cast<uint64_t>(n))) return false;
    return proven(code, n) || node_expr_typed(code, n, label, index);
  }
  [[gnu::noinline]] bool node_expr_typed(const flatbuffers::Vector<const fb::ExprInstr*>* code, uint32_t n,
                                         const char* label, int index) {
    const std::string problem = expr_problem(code, n);
    return problem.empty() || node_expr_failed(label, index, ": " + problem);
  }
  [[gnu::noinline]] bool node_expr_failed(const char* label, int index, const std::string& what) {
    return fail_here(std::string(label) + (index >= 0 ? "[" + std::to_string(index) + "]" : "") +
                     (what[0] == ':' ? "" : " ") + what);
  }

  template <class Table>
  bool check_unique_names(const flatbuffers::Vector<flatbuffers::Offset<Table>>* v,
                          const char* what) {
    std::unordered_map<std::string_view, uint32_t> seen;
    for (uint32_t i = 0; i < size_of(v); ++i) {
      const flatbuffers::String* name = v->Get(i)->name();
      if (!charge(8 + 4 + name->size())) return false;
      if (name->size() == 0)
        return fail(std::string(what) + " " + std::to_string(i) + " has an empty name");
      auto [it, inserted] = seen.emplace(view(name), i);
      if (!inserted) {
        return fail(std::string(what) + " '" + printable(name) + "' is declared twice (" + what +
                    "s " + std::to_string(it->second) + " and " + std::to_string(i) + ")");
      }
    }
    return true;
  }

  bool check_pipeline() {
    if (empty(p_.name())) return fail("the pipeline has an empty name");
    if (!charge(8 * (1 + uint64_t{size_of(p_.source_files())} + size_of(p_.targets()))))
      return false;

    if (!check_unique_names(params_, "param")) return false;
    for (uint32_t i = 0; i < n_params_; ++i) {
      const fb::Param* q = params_->Get(i);
      const std::string label = named("param", q->name(), i);
      if (!in_range(q->type())) {
        return fail(label + " has unknown type " +
                    std::to_string(static_cast<unsigned>(q->type())));
      }
      if (q->has_default()) {
        const expr::Value v = default_of(*q);
        const expr::Outcome o = expr::convert(v, v.type);
        if (!o.ok() || o.value != v)
          return fail(label + " has a default that is not a value of " + fb::EnumNameScalarType(q->type()));
      }
      std::string problem = loc_problem(q->loc());
      if (!problem.empty()) return fail(label + ": " + problem);
    }

    if (!check_unique_names(buffers_, "buffer")) return false;
    for (uint32_t i = 0; i < n_buffers_; ++i) {
      const fb::Buffer* b = buffers_->Get(i);
      const std::string label = buffer_label(i);
      if (!in_range(b->type())) {
        return fail(label + " has unknown type " +
                    std::to_string(static_cast<unsigned>(b->type())));
      }
      if (!check_expr(b->count(), false, label + " count")) return false;
      std::string problem = loc_problem(b->loc());
      if (!problem.empty()) return fail(label + ": " + problem);
      // NVSHMEM's symmetric heap is device memory (orchc's E0706).
      if (b->symmetric() && b->host()) return fail(label + " is both symmetric and host memory");
    }

    if (!check_unique_names(comms_, "comm")) return false;

    const auto* modules = p_.modules();
    for (uint32_t m = 0; m < size_of(modules); ++m) {
      const fb::Module* mod = modules->Get(m);
      if (!charge(8)) return false;
      if (!check_code(mod->images(), mod->ptx(), mod->ptx_arch(), "module " + std::to_string(m)))
        return false;
    }
    std::vector<bool> module_used(size_of(modules), false);
    for (uint32_t i = 0; i < n_kernels_; ++i) {
      if (!check_kernel(i)) return false;
      const int module = kernels_->Get(i)->in_module();
      if (module >= 0 && static_cast<uint32_t>(module) < module_used.size()) module_used[module] = true;
    }
    for (uint32_t m = 0; m < module_used.size(); ++m)
      if (!module_used[m]) return fail("module " + std::to_string(m) + " holds no kernel's code");

    for (uint32_t i = 0; i < n_handles_; ++i) {
      const fb::ConditionalHandle* h = handles_->Get(i);
      if (!charge(8)) return false;
      const std::string label = "handle " + std::to_string(i);
      std::string problem = range_problem("graph index", h->graph(), n_graphs_, "graph");
      if (!problem.empty()) return fail(label + ": " + problem);
      if (graphs_->Get(h->graph())->device()) {
        return fail(label + ": " + graph_label(h->graph()) +
                    " is a device graph, which cannot hold conditional nodes");
      }
    }
    if (!check_device_order()) return false;
    handle_users_.assign(n_handles_, 0);
    op_proved_.assign(n_ops_, OpProved());
    op_used_.assign(n_ops_, false);

    for (uint32_t i = 0; i < n_graphs_; ++i) {
      if (!check_top_graph(i)) return false;
    }

    {
      const int main = p_.main_graph();
      std::string problem = range_problem("main_graph", main, n_graphs_, "graph");
      if (!problem.empty()) return fail(problem);
      if (graphs_->Get(main)->device()) {
        return fail("main_graph " + std::to_string(main) + " (" + graph_label(main) +
                    ") is a device graph; the host launches main");
      }
    }

    const auto* segments = p_.segments();
    std::vector<bool> in_segments(n_graphs_, false);
    if (!charge(4 * uint64_t{size_of(segments)})) return false;
    for (uint32_t i = 0; i < size_of(segments); ++i) {
      const int g = segments->Get(i);
      const std::string label = "segments[" + std::to_string(i) + "]";
      std::string problem = range_problem("graph index", g, n_graphs_, "graph");
      if (!problem.empty()) return fail(label + ": " + problem);
      if (graphs_->Get(g)->device()) {
        return fail(label + ": " + graph_label(g) +
                    " is a device graph; segments are launched by the host");
      }
      if (in_segments[g]) return fail(label + ": " + graph_label(g) + " is listed twice");
      in_segments[g] = true;
    }

    for (uint32_t i = 0; i < n_handles_; ++i) {
      if (handle_users_[i] == 0) {
        return fail(
            "handle " + std::to_string(i) + " (" + graph_label(handles_->Get(i)->graph()) +
            ") is not used by any conditional node; CUDA may refuse to instantiate the graph");
      }
    }

    for (uint32_t i = 0; i < n_ops_; ++i)
      if (!op_used_[i]) return fail("op " + std::to_string(i) + " is used by no node");

    const auto* checks = p_.bind_checks();
    for (uint32_t i = 0; i < size_of(checks); ++i) {
      const fb::BindCheck* c = checks->Get(i);
      if (!charge(8)) return false;
      const std::string label = "bind check " + std::to_string(i);
      if (empty(c->code())) return fail(label + " has an empty code");
      if (empty(c->message()))
        return fail(label + " (" + printable(c->code()) + ") has an empty message");
      if (!check_expr(c->condition(), true, label + " (" + printable(c->code()) + ") condition"))
        return false;
      std::string problem = loc_problem(c->loc());
      if (!problem.empty()) return fail(label + ": " + problem);
      // The runtime evaluates a check once per member with the family index set, and once
      // without one otherwise (where the family index has no value).
      bool uses_index = false;
      for (const fb::ExprInstr* in : *c->condition()->code())
        uses_index |= in->op() == fb::ExprOp::FamilyIndex;
      if (uses_index && c->family_size() == 0)
        return fail(label + " (" + printable(c->code()) +
                    ") uses the family index but has no family_size to check it for");
      if (c->family_size() > kMaxFamilySize)
        return fail(label + " (" + printable(c->code()) + ") has family_size " +
                    std::to_string(c->family_size()) + ", more than the limit of " +
                    std::to_string(kMaxFamilySize));
    }
    const auto* sites = p_.status_sites();
    for (uint32_t i = 0; i < size_of(sites); ++i) {
      const fb::StatusSite* site = sites->Get(i);
      if (!charge(8 + (site->what() ? site->what()->size() : 0))) return false;
      std::string problem = loc_problem(site->loc());
      if (!problem.empty()) return fail("status site " + std::to_string(i) + ": " + problem);
    }
    if (std::string problem = memory_plan_problem(p_); !problem.empty()) return fail(problem);
    return true;
  }

  // Pipeline.device_order: exactly the device graphs, each once (the runtime instantiates them
  // in it); device_pos_ is each graph's place in it, for the late arguments' rule (check_arg).
  bool check_device_order() {
    const auto* order = p_.device_order();
    const uint32_t n = size_of(order);
    if (!charge(4 * uint64_t{n})) return false;
    device_pos_.assign(n_graphs_, -1);
    for (uint32_t i = 0; i < n; ++i) {
      const int g = order->Get(i);
      const std::string label = "device_order[" + std::to_string(i) + "]";
      std::string problem = range_problem("graph index", g, n_graphs_, "graph");
      if (!problem.empty()) return fail(label + ": " + problem);
      if (!graphs_->Get(g)->device())
        return fail(label + ": " + graph_label(g) + " is not a device graph; only device graphs are ordered");
      if (device_pos_[g] >= 0)
        return fail(label + ": " + graph_label(g) + " is listed twice (also at device_order[" +
                    std::to_string(device_pos_[g]) + "])");
      device_pos_[g] = static_cast<int>(i);
    }
    for (uint32_t g = 0; g < n_graphs_; ++g)
      if (graphs_->Get(g)->device() && device_pos_[g] < 0)
        return fail(graph_label(g) + " is a device graph missing from device_order");
    return true;
  }

  // Whether a GraphExec argument of `ref` in the top-level graph being walked must be late: in a
  // device graph, the graph it names is not instantiated before this one (itself, or later).
  bool must_be_late(int ref) const {
    if (!top_device_) return false;  // host graphs are built after every device graph
    return ref == -1 || ref == static_cast<int>(top_) || device_pos_[ref] > device_pos_[top_];
  }

  // The compiled code of a kernel or a module: at least a CUBIN or PTX, one CUBIN per arch.
  bool check_code(const flatbuffers::Vector<flatbuffers::Offset<fb::KernelImage>>* images,
                  const flatbuffers::Vector<uint8_t>* ptx, const flatbuffers::String* ptx_arch,
                  const std::string& label) {
    std::unordered_set<std::string_view> archs;
    for (uint32_t j = 0; j < size_of(images); ++j) {
      const fb::KernelImage* image = images->Get(j);
      if (!charge(8)) return false;
      if (image->arch()->size() == 0) {
        return fail(label + " image " + std::to_string(j) + " has an empty arch");
      }
      if (image->cubin()->size() == 0) {
        return fail(label + " image " + std::to_string(j) + " (" + printable(image->arch()) +
                    ") has an empty CUBIN");
      }
      if (!archs.insert(view(image->arch())).second) {
        return fail(label + " has two images for " + printable(image->arch()));
      }
    }
    const bool has_ptx = size_of(ptx) > 0;
    if (has_ptx && empty(ptx_arch)) return fail(label + " has PTX but no ptx_arch");
    if (size_of(images) == 0 && !has_ptx) return fail(label + " has neither a CUBIN nor PTX");
    return true;
  }

  bool check_kernel(uint32_t i) {
    const fb::Kernel* k = kernels_->Get(i);
    if (!charge(8)) return false;
    if (empty(k->name())) return fail("kernel " + std::to_string(i) + " has an empty name");
    const std::string label = kernel_label(i);
    if (empty(k->lowered_name())) return fail(label + " has an empty lowered_name");
    const fb::ScalarType ft = k->cost_flops_type();
    if (ft != fb::ScalarType::F16 && ft != fb::ScalarType::F32 && ft != fb::ScalarType::F64)
      return fail(label + " has cost_flops_type " + std::to_string(static_cast<unsigned>(ft)) +
                  "; FLOPs are F16, F32 or F64");

    if (k->in_module() != -1) {
      // The code is the module's: a kernel with code of its own as well would be ambiguous.
      std::string problem = range_problem("module index", k->in_module(), size_of(p_.modules()), "module");
      if (!problem.empty()) return fail(label + ": " + problem);
      if (size_of(k->images()) > 0 || size_of(k->ptx()) > 0 || !empty(k->ptx_arch()))
        return fail(label + " is in module " + std::to_string(k->in_module()) +
                    " but also has images or PTX of its own");
    } else if (!check_code(k->images(), k->ptx(), k->ptx_arch(), label)) {
      return false;
    }

    const auto* params = k->params();
    for (uint32_t j = 0; j < size_of(params); ++j) {
      const fb::KernelParam* q = params->Get(j);
      if (!charge(8)) return false;
      const std::string param = label + " param " + std::to_string(j);
      if (q->name()->size() == 0) return fail(param + " has an empty name");
      const std::string named_param = label + " param '" + printable(q->name()) + "'";
      if (!in_range(q->kind())) {
        return fail(named_param + " has unknown kind " +
                    std::to_string(static_cast<unsigned>(q->kind())));
      }
      if (!in_range(q->type())) {
        return fail(named_param + " has unknown type " +
                    std::to_string(static_cast<unsigned>(q->type())));
      }
      if (!in_range(q->access())) {
        return fail(named_param + " has unknown access " +
                    std::to_string(static_cast<unsigned>(q->access())));
      }
    }
    std::string problem = loc_problem(k->loc());
    if (!problem.empty()) return fail(label + ": " + problem);
    return true;
  }

  bool check_top_graph(uint32_t i) {
    const fb::Graph* g = graphs_->Get(i);
    Scope scope(*this, FrameKind::Graph, i);
    if (g->family_size() > 0 && !g->device()) {
      return fail_here("family size " + std::to_string(g->family_size()) +
                       " but not a device graph (families are instantiated for device launch)");
    }
    if (g->family_size() > kMaxFamilySize) {
      return fail_here("family size " + std::to_string(g->family_size()) + " is more than " +
                       std::to_string(kMaxFamilySize));
    }
    if (g->device() && size_of(g->nodes()) == 0) return fail_here("a device graph has no nodes");
    if (g->device()) {
      // "The graph cannot be empty and must contain at least one kernel, memcpy, or memset
      // node" (doc comment of cudaGraphInstantiate, device launch).
      bool work = false;
      for (uint32_t k = 0; k < size_of(g->nodes()); ++k) {
        const uint32_t op = g->nodes()->Get(k)->op();
        if (op >= n_ops_) continue;  // its node's check says so
        const fb::OpBody type = ops_->Get(op)->body_type();
        work |= type == fb::OpBody::KernelOp || type == fb::OpBody::MemcpyOp || type == fb::OpBody::MemsetOp;
      }
      if (!work) return fail_here("a device graph has no kernel, memcpy or memset node");
    }
    if (g->fire_and_forget_launches() > kMaxFireAndForgetLaunches) {
      return fail_here(std::to_string(g->fire_and_forget_launches()) +
                       " fire-and-forget launches, more than CUDA's " +
                       std::to_string(kMaxFireAndForgetLaunches));
    }
    if (g->tail_launches() > kMaxTailLaunches) {
      return fail_here(std::to_string(g->tail_launches()) + " tail launches, more than CUDA's " +
                       std::to_string(kMaxTailLaunches));
    }
    top_ = i;
    top_device_ = g->device();
    top_conditional_ = top_launcher_ = top_collective_ = false;
    if (!check_graph(g, 0, false)) return false;
    // One executable graph never holds conditional nodes together with device graph launches
    // (measured to hang, docs/diagnostics.md E0402), kernels that launch kernels, or NCCL work
    // (NVIDIA/nccl#1986): the lowering splits main into segments where it has both.
    if (top_conditional_ && (top_launcher_ || top_collective_)) {
      return fail_here(std::string("holds conditional nodes and ") +
                       (top_launcher_ ? "kernels that launch from the device" : "collectives") +
                       "; one executable graph cannot hold both");
    }
    return true;
  }

  // A top-level graph (depth 0) or a conditional body (depth >= 1, in_body).
  bool check_graph(const fb::Graph* g, uint32_t depth, bool in_body) {
    const auto* nodes = g->nodes();
    const uint32_t n = size_of(nodes), n_deps = size_of(g->deps()), n_kinds = size_of(g->dep_kinds());
    if (!charge(8 + 4 + (g->name() ? g->name()->size() : 0) + sizeof(fb::Node) * uint64_t{n} + 4 * uint64_t{n_deps} +
                n_kinds))
      return false;
    if (n_kinds != 0 && n_kinds != n_deps) {
      return fail_here("dep_kinds has " + plural(n_kinds, "entry", "entries") + " for " +
                       plural(n_deps, "dependency", "dependencies"));
    }
    // The layout first, in one pass over the structs: each node's dependencies end at or after
    // the node before it ends them and within deps, so every range read below is in bounds.
    uint32_t end = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t e = nodes->Get(i)->deps_end();
      if (e < end || e > n_deps) {
        Scope scope(*this, FrameKind::Node, i);
        return fail_here("dependencies end at " + std::to_string(e) + ", outside " + std::to_string(end) + ".." +
                         std::to_string(n_deps) + " (where the node before ends them, and deps' length)");
      }
      end = e;
    }
    if (end != n_deps) {
      return fail_here("deps has " + plural(n_deps, "entry", "entries") + ", but the nodes' dependencies end at " +
                       std::to_string(end));
    }
    uint32_t first = 0;  // where node i's dependencies begin in g->deps()
    for (uint32_t i = 0; i < n; ++i) {
      if (!node_known_good(g, i, first, in_body)) {
        Scope scope(*this, FrameKind::Node, i);
        if (!check_node(g, i, first, depth, in_body)) return false;
      }
      first = nodes->Get(i)->deps_end();
    }
    return true;
  }

  // The common node, decided without a path frame: its op already proved in this context, at
  // most one dependency (an earlier node, by a Full edge or a programmatic one both ends allow),
  // its location in range. False sends the node to check_node, which decides it in full and says
  // what is wrong. Every rule here is one check_node enforces. (check_graph proved the range
  // [first, end) within deps.)
  bool node_known_good(const fb::Graph* g, uint32_t index, uint32_t first, bool in_body) {
    const fb::Node* node = g->nodes()->Get(index);
    const uint32_t end = node->deps_end(), op = node->op();
    if (end - first > 1 || op >= n_ops_) return false;
    const OpProved& proved = op_proved_[op];
    if (proved.top_plus_one != top_ + 1 || proved.in_body != in_body || !loc_ok(&node->loc())) return false;
    if (end == first + 1) {
      const uint32_t d = g->deps()->Get(first);
      if (d >= index) return false;
      if (const auto* kinds = g->dep_kinds(); kinds && kinds->size() > 0) {
        const fb::EdgeKind k = kinds->Get(first);
        if (k != fb::EdgeKind::Full &&
            (k != fb::EdgeKind::Programmatic || !proved.pdl_into ||
             !op_proved_[g->nodes()->Get(d)->op()].pdl_from || !targets_problem_.empty()))
          return false;
      }
    }
    op_used_[op] = true;
    top_launcher_ |= proved.launcher;
    return true;
  }

  // Node `index` of `g`, whose dependencies are deps()[first, its deps_end) (in bounds:
  // check_graph).
  bool check_node(const fb::Graph* g, uint32_t index, uint32_t first, uint32_t depth, bool in_body) {
    const fb::Node* node = g->nodes()->Get(index);
    const uint32_t end = node->deps_end();
    if (node->op() >= n_ops_) return fail_here(range_problem("op index", node->op(), n_ops_, "op"));
    const auto* deps = g->deps();
    if (end - first == 1) {
      if (deps->Get(first) >= index)
        return fail_here("dependency " + std::to_string(deps->Get(first)) + " is not an earlier node");
    } else if (end - first > 1) {
      std::vector<uint32_t> sorted(deps->begin() + first, deps->begin() + end);
      for (uint32_t d : sorted) {
        if (d >= index)
          return fail_here("dependency " + std::to_string(d) + " is not an earlier node");
      }
      std::sort(sorted.begin(), sorted.end());
      auto dup = std::adjacent_find(sorted.begin(), sorted.end());
      if (dup != sorted.end())
        return fail_here("dependency " + std::to_string(*dup) + " is listed twice");
    }
    if (!loc_ok(&node->loc())) return fail_here(loc_problem(&node->loc()));
    // Last: the edge rules look at this node's kernel, proved valid by check_op.
    return check_op(node->op(), depth, in_body) && check_edge_kinds(g, index, first, end);
  }

  // The op a node runs, in the graph being walked: proved once per context (top-level graph and
  // whether in a body), which is all its rules depend on. A conditional is proved at its one
  // use (its bodies are walked there); so is a collective.
  bool check_op(uint32_t index, uint32_t depth, bool in_body) {
    op_used_[index] = true;
    const OpProved& proved = op_proved_[index];
    if (proved.top_plus_one == top_ + 1 && proved.in_body == in_body) {
      top_launcher_ |= proved.launcher;
      return true;
    }
    return prove_op(index, depth, in_body);
  }
  [[gnu::noinline]] bool prove_op(uint32_t index, uint32_t depth, bool in_body) {
    OpProved& proved = op_proved_[index];
    const fb::Op* op = ops_->Get(index);
    const flatbuffers::String* what = op->what();
    if (!charge(16 + (what ? what->size() + 4 : 0))) return false;  // the op and its body
    // The verifier passes a union of a type it does not know, or of a type without its table.
    const fb::OpBody type = op->body_type();
    if (type == fb::OpBody::NONE) return fail_here("op " + std::to_string(index) + " has no body (type NONE)");
    if (!in_range(type))
      return fail_here("op " + std::to_string(index) + " has unknown body type " +
                       std::to_string(static_cast<unsigned>(type)));
    if (op->body() == nullptr)
      return fail_here("op " + std::to_string(index) + " is a " + fb::EnumNameOpBody(type) + " without its table");
    const NodeKind kind = node_kind(type);

    const bool launcher_before = top_launcher_;
    top_launcher_ = false;
    bool ok = true;
    switch (kind) {
      case NodeKind::Kernel:
        ok = check_kernel_node(op->body_as_KernelOp(), in_body);
        break;
      case NodeKind::Memcpy:
        ok = check_memcpy(op->body_as_MemcpyOp());
        break;
      case NodeKind::Memset:
        ok = check_memset(op->body_as_MemsetOp());
        break;
      case NodeKind::Empty:
        // Device graphs hold "only kernel nodes, memcpy nodes, memset nodes, and child graph
        // nodes" (doc comment of cudaGraphInstantiate); conditional bodies may hold empty nodes.
        if (top_device_) return fail_here("a device graph cannot hold an empty node");
        break;
      case NodeKind::Conditional:
        top_conditional_ = true;
        ok = check_conditional(op->body_as_ConditionalOp(), depth);
        break;
      case NodeKind::Collective:
        top_collective_ = true;
        ok = check_collective(op->body_as_CollectiveOp(), in_body);
        break;
    }
    const bool launcher = top_launcher_;
    top_launcher_ = launcher_before || launcher;
    if (ok && kind != NodeKind::Conditional && kind != NodeKind::Collective) {
      const fb::KernelOp* k = op->body_as_KernelOp();
      proved.top_plus_one = top_ + 1;
      proved.in_body = in_body;
      proved.launcher = launcher;
      proved.pdl_from = k && !launches_from_device(k);
      proved.pdl_into = proved.pdl_from && kernels_->Get(k->kernel())->waits_at_entry();
    }
    return ok;
  }

  const fb::Op* op_of(const fb::Graph* g, uint32_t node) const { return ops_->Get(g->nodes()->Get(node)->op()); }

  // Graph.dep_kinds: absent, or one valid kind per dependency; a Programmatic edge joins two
  // kernel nodes whose kernels launch nothing from the device, into a kernel that waits at
  // entry, in a pipeline whose every target has programmatic dependent launch (sm_90 on).
  // Node `index`'s dependencies are deps()[first, end), each an earlier node (checked).
  bool check_edge_kinds(const fb::Graph* g, uint32_t index, uint32_t first, uint32_t end) {
    const auto* kinds = g->dep_kinds();
    if (size_of(kinds) == 0) return true;
    const uint32_t op_index = g->nodes()->Get(index)->op();
    const fb::Op* op = ops_->Get(op_index);
    for (uint32_t j = first; j < end; ++j) {
      const fb::EdgeKind k = kinds->Get(j);
      const uint32_t d = g->deps()->Get(j);
      if (!in_range(k)) {
        return fail_here("dependency " + std::to_string(d) + " has unknown edge kind " +
                         std::to_string(static_cast<unsigned>(k)));
      }
      if (k != fb::EdgeKind::Programmatic) continue;
      // Both ops are proved (the dependency is an earlier node); the common case is decided
      // from what their proofs found, the rest below spells out what is wrong.
      if (op_proved_[op_index].pdl_into && op_proved_[g->nodes()->Get(d)->op()].pdl_from && targets_problem_.empty())
        continue;
      // Only a failure spells the edge out: this runs for every edge of every load.
      auto edge = [d] { return "programmatic dependency on node " + std::to_string(d) + ": "; };
      const fb::KernelOp* from = op_of(g, d)->body_as_KernelOp();
      const fb::KernelOp* to = op->body_as_KernelOp();
      if (!from || !to) {
        const NodeKind other = op_kind(to ? *op_of(g, d) : *op);
        return fail_here(edge() + (to ? "node " + std::to_string(d) : std::string("this node")) + " is " +
                         (other == NodeKind::Empty ? "an " : "a ") + lower(node_kind_name(other)) +
                         " node; a programmatic edge joins two kernel nodes");
      }
      const fb::Kernel* to_kernel = kernels_->Get(to->kernel());
      if (!to_kernel->waits_at_entry()) {
        return fail_here(edge() + kernel_label(to->kernel()) +
                         " does not wait at entry (waits_at_entry), so it could read what node " +
                         std::to_string(d) + " writes before it is written");
      }
      for (const fb::KernelOp* end_op : {from, to}) {
        if (launches_from_device(end_op)) {
          return fail_here(edge() + kernel_label(end_op->kernel()) +
                           " launches work from the device; a programmatic edge cannot join it");
        }
      }
      if (!targets_problem_.empty()) return fail_here(edge() + targets_problem_);
    }
    return true;
  }

  bool launches_from_device(const fb::KernelOp* n) const {
    if (kernels_->Get(n->kernel())->launches_kernels()) return true;
    for (uint32_t j = 0; j < size_of(n->args()); ++j) {
      const fb::ArgKind k = n->args()->Get(j)->kind();
      if (k == fb::ArgKind::GraphExec || k == fb::ArgKind::GraphTable) return true;
    }
    return false;
  }

  static std::string lower(const char* s) {
    std::string out = s ? s : "";
    for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return out;
  }

  // Programmatic dependent launch needs compute capability 9.0: "" when every target has it,
  // else why not (computed once; only a programmatic edge asks).
  static std::string pdl_targets_problem(const fb::Pipeline& p) {
    const auto* targets = p.targets();
    if (size_of(targets) == 0) {
      return "programmatic edges need compute capability 9.0 or newer, and the pipeline lists "
             "no targets";
    }
    for (uint32_t i = 0; i < targets->size(); ++i) {
      const std::string_view t = view(targets->Get(i));
      int cc = 0;
      size_t digits = 0;
      if (t.substr(0, 3) == "sm_")
        for (size_t c = 3; c < t.size() && t[c] >= '0' && t[c] <= '9' && digits < 4; ++c, ++digits)
          cc = cc * 10 + (t[c] - '0');
      if (digits == 0 || cc < 90) {
        return "programmatic edges need compute capability 9.0 or newer, but the pipeline "
               "targets " + printable(targets->Get(i));
      }
    }
    return std::string();
  }

  bool check_buffer_ref(const char* what, int ref) {
    return in_table(ref, n_buffers_) || fail_here(range_problem(what, ref, n_buffers_, "buffer"));
  }

  bool check_kernel_node(const fb::KernelOp* node, bool in_body) {
    const int kernel_index = node->kernel();
    if (!in_table(kernel_index, n_kernels_))
      return fail_here(range_problem("kernel index", kernel_index, n_kernels_, "kernel"));
    const fb::Kernel* kernel = kernels_->Get(kernel_index);
    // CUDA dynamic parallelism is not permitted in a graph instantiated for device launch (doc
    // comment of cudaGraphInstantiate) nor in a conditional body (CUDA C++ Programming Guide,
    // "Conditional Node Body Graph Requirements", which also forbids device graph launch).
    if (kernel->launches_kernels()) {
      if (top_device_)
        return fail_here(kernel_label(node->kernel()) +
                         " launches kernels from the device, which a device graph cannot hold");
      if (in_body)
        return fail_here(kernel_label(node->kernel()) +
                         " launches kernels from the device, which a conditional body cannot hold");
      top_launcher_ = true;
    }
    bool launches_graphs = false;
    const auto* args = node->args();
    for (uint32_t j = 0; j < size_of(args); ++j) {
      const fb::ArgKind k = args->Get(j)->kind();
      launches_graphs |= k == fb::ArgKind::GraphExec || k == fb::ArgKind::GraphTable;
    }
    if (launches_graphs) {
      if (in_body)
        return fail_here(kernel_label(node->kernel()) +
                         " launches graphs from the device, which a conditional body cannot hold");
      top_launcher_ = true;
    }
    // A launch shape of constants (any u32 is well formed; the runtime checks the ranges when
    // it builds the node, as it does an expression's value), or the expressions.
    if (node->launch()) {
      if (!charge(sizeof(fb::LaunchShape))) return false;
      if (node->grid() || node->block() || node->shared_bytes())
        return fail_here("a kernel node has both a launch shape and grid, block or shared_bytes expressions");
    } else {
      const struct {
        const char* name;
        const flatbuffers::Vector<flatbuffers::Offset<fb::Expr>>* exprs;
      } shapes[] = {{"grid", node->grid()}, {"block", node->block()}};
      for (const auto& shape : shapes) {
        const uint32_t n = size_of(shape.exprs);
        if (n != 3) {
          return fail_here(std::string(shape.name) + " has " + plural(n, "expression") +
                           ", expected 3");
        }
        for (uint32_t j = 0; j < 3; ++j) {
          if (!check_node_expr(shape.exprs->Get(j), true, shape.name, static_cast<int>(j))) {
            return false;
          }
        }
      }
      if (!check_node_expr(node->shared_bytes(), false, "shared_bytes")) return false;
    }
    if (!check_node_expr(node->cost_bytes(), false, "cost_bytes")) return false;
    if (!check_node_expr(node->cost_flops(), false, "cost_flops")) return false;

    const auto* params = kernel->params();
    const uint32_t n_params = size_of(params);
    const uint32_t n_args = size_of(args);
    if (n_args != n_params) {
      return fail_here(kernel_label(node->kernel()) + " takes " + plural(n_params, "argument") +
                       ", the node passes " + std::to_string(n_args));
    }
    for (uint32_t j = 0; j < n_args; ++j) {
      Scope scope(*this, FrameKind::Arg, j);
      if (!check_arg(args->Get(j), params->Get(j))) return false;
    }
    return true;
  }

  bool check_arg(const fb::KernelArg* arg, const fb::KernelParam* param) {
    if (!charge(8)) return false;
    const fb::ArgKind kind = arg->kind();
    if (!in_range(kind)) {
      return fail_here("unknown argument kind " + std::to_string(static_cast<unsigned>(kind)));
    }
    if (kind != arg_kind_for(param->kind())) {
      return fail_here(std::string("a ") + fb::EnumNameArgKind(kind) +
                       " argument cannot bind kernel param '" + printable(param->name()) +
                       "' of kind " + fb::EnumNameKernelParamKind(param->kind()));
    }
    const int ref = arg->ref();
    if (arg->late() && kind != fb::ArgKind::GraphExec)
      return fail_here(std::string("a ") + fb::EnumNameArgKind(kind) +
                       " argument is marked late; only a GraphExec argument can be set after instantiation");
    switch (kind) {
      case fb::ArgKind::Value: {
        if (!in_range(arg->type())) {
          return fail_here("unknown argument type " +
                           std::to_string(static_cast<unsigned>(arg->type())));
        }
        if (arg->type() != param->type()) {
          return fail_here("argument type " + type_name(arg->type()) +
                           " does not match kernel param '" + printable(param->name()) +
                           "' of type " + type_name(param->type()));
        }
        return check_node_expr(arg->value(), true, "value");
      }
      case fb::ArgKind::Buffer:
        return check_buffer_ref("buffer index", ref);
      case fb::ArgKind::CondHandle: {
        std::string problem = range_problem("handle index", ref, n_handles_, "handle");
        if (!problem.empty()) return fail_here(problem);
        // cudaGraphSetConditional: the handle must belong to the graph the kernel runs in.
        const int owner = handles_->Get(ref)->graph();
        if (owner != static_cast<int>(top_)) {
          return fail_here("conditional handle " + std::to_string(ref) + " belongs to " +
                           graph_label(owner) + ", not to " + graph_label(top_) +
                           " which holds this kernel");
        }
        return true;
      }
      case fb::ArgKind::GraphExec: {
        if (ref == -1) {
          if (!top_device_)
            return fail_here("a graph exec of the graph itself (ref -1) is only valid in a device graph");
          return check_late(arg, ref);
        }
        std::string problem = range_problem("graph index", ref, n_graphs_, "graph");
        if (!problem.empty()) return fail_here(problem);
        const fb::Graph* g = graphs_->Get(ref);
        if (!g->device()) {
          return fail_here(graph_label(ref) +
                           " is not a device graph, so a kernel cannot launch it");
        }
        if (g->family_size() > 0) {
          return fail_here(graph_label(ref) + " is a graph family; pass it as a GraphTable");
        }
        return check_late(arg, ref);
      }
      case fb::ArgKind::GraphTable: {
        std::string problem = range_problem("graph index", ref, n_graphs_, "graph");
        if (!problem.empty()) return fail_here(problem);
        if (graphs_->Get(ref)->family_size() == 0) {
          return fail_here(graph_label(ref) + " is not a graph family (family_size 0)");
        }
        return true;
      }
      case fb::ArgKind::Status:
        return true;  // the runtime's record; nothing to look up
    }
    return true;
  }

  // A GraphExec argument is late exactly where its graph is not instantiated before the one
  // being walked (Pipeline.device_order): the runtime builds the node with a null exec there and
  // sets the exec after instantiation, and only there.
  bool check_late(const fb::KernelArg* arg, int ref) {
    const bool late = must_be_late(ref);
    if (arg->late() == late) return true;
    const bool self = ref == -1 || ref == static_cast<int>(top_);
    const std::string target = self ? "the graph itself" : graph_label(ref);
    if (late) {
      return fail_here("the exec of " + target +
                       (self ? " exists only once it is instantiated"
                             : " is not instantiated before " + graph_label(top_) + " (device_order)") +
                       ", so the argument must be marked late");
    }
    return fail_here("the argument is marked late, but " +
                     (top_device_ ? "the exec of " + target + " is instantiated before " + graph_label(top_) +
                                        " (device_order)"
                                  : graph_label(top_) + " is a host graph, built after every device graph"));
  }

  bool check_memcpy(const fb::MemcpyOp* node) {
    if (!check_buffer_ref("memcpy source buffer index", node->src())) return false;
    if (!check_buffer_ref("memcpy destination buffer index", node->dst())) return false;
    if (node->src() == node->dst()) {
      return fail_here("memcpy source and destination are the same " + buffer_label(node->src()));
    }
    return true;
  }

  bool check_memset(const fb::MemsetOp* node) {
    if (!check_buffer_ref("memset buffer index", node->dst())) return false;
    const unsigned size = node->element_size();
    if (size != 1 && size != 2 && size != 4) {
      return fail_here("memset element size " + std::to_string(size) + " is not 1, 2 or 4");
    }
    if (size < 4 && node->value() >> (8 * size) != 0) {
      return fail_here("memset value " + std::to_string(node->value()) +
                       " does not fit in " + plural(size, "byte"));
    }
    const size_t element = scalar_size(buffers_->Get(node->dst())->type());
    if (element % size != 0) {
      return fail_here("memset element size " + std::to_string(size) + " does not divide the " +
                       std::to_string(element) + "-byte elements of " + buffer_label(node->dst()));
    }
    return true;
  }

  bool check_conditional(const fb::ConditionalOp* node, uint32_t depth) {
    if (top_device_) return fail_here("a device graph cannot hold a conditional node");
    const fb::ConditionalType type = node->type();
    if (!in_range(type)) {
      return fail_here("unknown conditional type " + std::to_string(static_cast<unsigned>(type)));
    }
    const uint32_t n = size_of(node->bodies());
    switch (type) {
      case fb::ConditionalType::If:
        if (n < 1 || n > 2)
          return fail_here("If conditional has " + plural(n, "body", "bodies") +
                           ", expected 1 or 2");
        break;
      case fb::ConditionalType::While:
        if (n != 1)
          return fail_here("While conditional has " + plural(n, "body", "bodies") + ", expected 1");
        break;
      case fb::ConditionalType::Switch:
        if (n < 1) return fail_here("Switch conditional has no bodies, expected at least 1");
        break;
    }
    const int h = node->handle();
    std::string problem = range_problem("conditional handle index", h, n_handles_, "handle");
    if (!problem.empty()) return fail_here(problem);
    const int owner = handles_->Get(h)->graph();
    if (owner != static_cast<int>(top_)) {
      return fail_here("conditional handle " + std::to_string(h) + " belongs to " +
                       graph_label(owner) + ", not to " + graph_label(top_) +
                       " which holds this node");
    }
    if (handle_users_[h]++ > 0) {
      return fail_here("conditional handle " + std::to_string(h) +
                       " is already used by another conditional node (a handle drives one node)");
    }
    for (uint32_t b = 0; b < n; ++b) {
      Scope scope(*this, FrameKind::Body, b);
      const fb::Graph* body = node->bodies()->Get(b);
      if (depth + 1 > kMaxGraphDepth) {
        return fail_here("conditional bodies are nested more than " +
                         std::to_string(kMaxGraphDepth) + " deep");
      }
      if (body->device()) return fail_here("a conditional body cannot be a device graph");
      if (body->family_size() > 0) return fail_here("a conditional body cannot be a graph family");
      if (!check_graph(body, depth + 1, true)) return false;
    }
    return true;
  }

  bool check_collective(const fb::CollectiveOp* node, bool in_body) {
    if (top_device_) return fail_here("a device graph cannot hold a collective");
    if (in_body) {
      return fail_here("a collective cannot be inside a conditional body (ranks could diverge)");
    }
    if (!in_range(node->collective())) {
      return fail_here("unknown collective kind " +
                       std::to_string(static_cast<unsigned>(node->collective())));
    }
    if (!in_range(node->reduce_op())) {
      return fail_here("unknown reduce op " +
                       std::to_string(static_cast<unsigned>(node->reduce_op())));
    }
    std::string problem = range_problem("comm index", node->comm(), n_comms_, "comm");
    if (!problem.empty()) return fail_here(problem);
    if (!check_buffer_ref("collective source buffer index", node->src())) return false;
    if (!check_buffer_ref("collective destination buffer index", node->dst())) return false;
    const bool needs_root = node->collective() == fb::CollectiveKind::Broadcast;
    return check_node_expr(node->root(), needs_root, "root");
  }

  const fb::Pipeline& p_;
  uint64_t budget_;
  std::string error_;
  std::vector<Frame> frames_;
  std::vector<uint32_t> handle_users_;
  std::vector<int> device_pos_;  // per graph: its place in device_order, -1 for host graphs
  uint32_t top_ = 0;         // the top-level graph being walked
  bool top_device_ = false;  // whether it is a device graph
  // What its top level holds (bodies do not count: they have their own rules).
  bool top_conditional_ = false, top_launcher_ = false, top_collective_ = false;

  const flatbuffers::Vector<flatbuffers::Offset<fb::Param>>* params_;
  const flatbuffers::Vector<flatbuffers::Offset<fb::Buffer>>* buffers_;
  const flatbuffers::Vector<flatbuffers::Offset<fb::Comm>>* comms_;
  const flatbuffers::Vector<flatbuffers::Offset<fb::Kernel>>* kernels_;
  const flatbuffers::Vector<flatbuffers::Offset<fb::Graph>>* graphs_;
  const flatbuffers::Vector<flatbuffers::Offset<fb::ConditionalHandle>>* handles_;
  const flatbuffers::Vector<flatbuffers::Offset<fb::Op>>* ops_;
  uint32_t n_params_, n_buffers_, n_comms_, n_kernels_, n_graphs_, n_handles_, n_ops_, n_files_;
  // Per op: the context it was last proved valid in (nodes of one graph mostly share their ops,
  // so each op is checked once, not once per node), and whether it is used at all.
  struct OpProved {
    uint32_t top_plus_one = 0;  // 0: not yet
    bool in_body = false;
    bool launcher = false;  // it makes its top-level graph launch from the device
    // A programmatic edge may leave it (a kernel that launches nothing from the device), and
    // enter it too (such a kernel that waits at entry): decided once, asked for every edge.
    bool pdl_from = false, pdl_into = false;
  };
  std::vector<OpProved> op_proved_;
  std::vector<bool> op_used_;
  std::string targets_problem_;  // why the targets have no programmatic edges, or ""
};

}  // namespace

std::string validate(const fb::Pipeline& pipeline, size_t payload_size) {
  try {
    return Validator(pipeline, payload_size).run();
  } catch (const std::exception& e) {  // std::bad_alloc, at worst
    return std::string("cannot validate the pipeline: ") + e.what();
  }
}

}  // namespace orch::artifact

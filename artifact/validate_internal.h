// The validator behind validate(): its state, and the helpers its files share. Not part of the
// library's interface. validate.cpp holds validate() and the pipeline-level checks; the others
// are named for what they check (validate_expr, validate_kernels, validate_graph, validate_ops,
// validate_device_order); validate_plan.cpp is the memory plan's part.
#pragma once

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/detail.h"
#include "artifact/expr_code.h"

namespace orch::artifact::detail {

inline std::string_view view(const flatbuffers::String* s) {
  return s ? std::string_view(s->c_str(), s->size()) : std::string_view();
}

inline bool empty(const flatbuffers::String* s) { return s == nullptr || s->size() == 0; }

inline std::string plural(uint64_t n, const char* noun, const char* nouns = nullptr) {
  if (n == 1) return "1 " + std::string(noun);
  return std::to_string(n) + " " + (nouns ? std::string(nouns) : std::string(noun) + "s");
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
  std::string where() const;

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

  // Expressions (validate_expr.cpp).
  bool expr_ok(const fb::Expr* e, std::string* problem);
  std::string expr_problem(const flatbuffers::Vector<const fb::ExprInstr*>* code, uint32_t n);

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

  bool check_expr(const fb::Expr* e, bool required, const std::string& label);
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
                                         const char* label, int index);
  [[gnu::noinline]] bool node_expr_failed(const char* label, int index, const std::string& what);

  // The pipeline's tables (validate.cpp).
  template <class Table>
  bool check_unique_names(const flatbuffers::Vector<flatbuffers::Offset<Table>>* v,
                          const char* what);
  bool check_pipeline();

  // device_order, and which graph arguments are late (validate_device_order.cpp).
  bool check_device_order();
  bool must_be_late(int ref) const;
  bool check_late(const fb::KernelArg* arg, int ref);

  // Kernels and modules (validate_kernels.cpp).
  bool check_code(const flatbuffers::Vector<flatbuffers::Offset<fb::KernelImage>>* images,
                  const flatbuffers::Vector<uint8_t>* ptx, const flatbuffers::String* ptx_arch,
                  const std::string& label);
  bool check_kernel(uint32_t i);

  // Graphs, nodes, their dependencies and the ops they run (validate_graph.cpp).
  bool check_top_graph(uint32_t i);
  bool check_graph(const fb::Graph* g, uint32_t depth, bool in_body);
  bool node_known_good(const fb::Graph* g, uint32_t index, uint32_t first, bool in_body);
  bool check_node(const fb::Graph* g, uint32_t index, uint32_t first, uint32_t depth, bool in_body);
  bool check_op(uint32_t index, uint32_t depth, bool in_body);
  [[gnu::noinline]] bool prove_op(uint32_t index, uint32_t depth, bool in_body);
  const fb::Op* op_of(const fb::Graph* g, uint32_t node) const { return ops_->Get(g->nodes()->Get(node)->op()); }
  bool check_edge_kinds(const fb::Graph* g, uint32_t index, uint32_t first, uint32_t end);
  bool launches_from_device(const fb::KernelOp* n) const;
  static std::string pdl_targets_problem(const fb::Pipeline& p);

  // Each op kind's table, and a kernel node's arguments (validate_ops.cpp).
  bool check_buffer_ref(const char* what, int ref) {
    return in_table(ref, n_buffers_) || fail_here(range_problem(what, ref, n_buffers_, "buffer"));
  }
  bool check_kernel_node(const fb::KernelOp* node, bool in_body);
  bool check_arg(const fb::KernelArg* arg, const fb::KernelParam* param);
  bool check_memcpy(const fb::MemcpyOp* node);
  bool check_memset(const fb::MemsetOp* node);
  bool check_conditional(const fb::ConditionalOp* node, uint32_t depth);
  bool check_collective(const fb::CollectiveOp* node, bool in_body);

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

}  // namespace orch::artifact::detail

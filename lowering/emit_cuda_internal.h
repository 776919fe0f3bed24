// The ejector's internals (lowering/emit_cuda.h is its interface): the text helpers
// (emit_cuda_text.cpp) and the Emitter, one class whose member functions live by section in
// emit_cuda.cpp (output, naming, host expressions), emit_cuda_sections.cpp (the file's header,
// kernels, structs, allocation, bind checks), emit_cuda_graphs.cpp (graph bodies, node by node)
// and emit_cuda_main.cpp (build, launch, destroy, main()). Not included outside those files.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lowering/codegen.h"
#include "lowering/lir.h"
#include "support/source.h"

namespace orch::eject {

using lowering::cuda_type;

bool reserved_word(const std::string& s);
// A C++ identifier for an orch name: other characters become `_`, reserved words get a `_`.
std::string ident(const std::string& name);
// `dp_step` -> `DpStep`.
std::string camel(const std::string& name);
std::string c_string(const std::string& s);
// Text safe inside a `//` comment: one line, no trailing backslash.
std::string comment_text(std::string s);
std::string double_literal(double d);
std::string float_literal(double d);
// A param's default (a value of its type) as an initializer of its C++ type.
std::string literal(const expr::Value& v, lir::ScalarType t);
const char* nccl_type(lir::ScalarType t);
const char* nccl_op(lir::ReduceOp op);
// Node indices in an order that puts every dependency first: program order, unless a
// dependency says otherwise.
std::vector<int> topological_order(const lir::Body& r);

// Hands out identifiers unique within one scope (a struct's members).
class Names {
 public:
  // Names the kernel sources #define are taken too: a member `p.N` must survive `#define N 64`.
  explicit Names(const std::set<std::string>* macros = nullptr) : macros_(macros) {}
  std::string take(const std::string& wanted) {
    std::string s = ident(wanted);
    if (macros_ && macros_->count(s)) s += "_";
    std::string candidate = s;
    for (int i = 2; used_.count(candidate); ++i) candidate = s + "_" + std::to_string(i);
    used_.insert(candidate);
    return candidate;
  }

 private:
  const std::set<std::string>* macros_;
  std::set<std::string> used_;
};

class Emitter {
 public:
  Emitter(const lir::Program& p, const SourceManager& sources) : p_(p), sources_(sources) {}

  std::string run();

 private:
  // ---- output ----
  void line(const std::string& s = "");
  void open(const std::string& s);
  void close(const std::string& s = "}");

  // Functions take (p, b, out) whatever their body uses: a marker line becomes `(void)x;` for
  // each parameter the finished body does not mention, so the file compiles without warnings.
  static constexpr const char* kUnused = "@@orch-unused@@";
  void unused_guard() { line(kUnused); }
  void resolve_unused();

  // ---- source positions ----
  std::string at(const SourceRange& r) const;
  // The statement as the user wrote it (its first line).
  std::string statement(const SourceRange& r) const;
  // "file:line:col: what", as a C string literal for ORCH_CHECK.
  std::string where(const SourceRange& r, const std::string& what) const;
  void node_comment(const lir::Node& n);

  // ---- naming ----
  void name_things();

  bool built(int g) const;

  // The kernel nodes of a region (recursively) with a late graph argument, into late_nodes_.
  void collect_late(const lir::Body& r, int graph);

  void find_handles(const lir::Body& r);

  bool has_collectives() const { return !p_.comms.empty(); }

  std::string params_type() const { return type_ + "Params"; }
  std::string buffers_type() const { return type_ + "Buffers"; }
  std::string graphs_type() const { return type_ + "Graphs"; }

  // ---- host expressions ----
  // Printed by expr/ (the same code the generated kernels use, from the preamble), so the host
  // computes exactly what the runtime's evaluator computes, or fails with the same error.
  std::string leaf_code(const expr::Instr& in) const;

  // Emits a line that evaluates `e` converted to `t` (as the runtime converts values) and
  // returns from the function on an error; returns the C++ that holds the value.
  std::string eval(const lir::Expr& e, lir::ScalarType t, const std::string& where);

  // A value argument of a kernel orchc wrote: the storage of type t (f16 and bf16 as bits).
  std::string generated_arg(const lir::Expr& e, lir::ScalarType t, const std::string& where);

  // `e` as a value of C++ type cuda_type(t); a plain param of that very type is written as it is.
  std::string host_as(const lir::Expr& e, lir::ScalarType t, const std::string& where);

  std::string dim(const lir::Expr& e, const std::string& where);

  // Elements of a buffer, as a size_t expression (may emit the line that computes it).
  std::string count_of(int buffer, const std::string& where);
  std::string bytes_of(int buffer, const std::string& where);

  // ---- sections ----
  void header();

  void kernels();

  std::string generated_role(const lir::Kernel& k) const;

  void host_helpers();

  void structs();

  void allocate();

  void alloc_device_helper();

  void alloc_mapped_helper();

  void allocate_function();

  void bind_checks();

  // ---- graph bodies ----
  struct Scope {
    int graph = -1;         // top-level graph being built
    std::string graph_var;  // the cudaGraph_t variable of this region
    int depth = 0;
    bool device = false;
  };

  void graph_builders();

  std::string member_index(int g) const { return p_.graphs[g].family_size > 0 ? "[member]" : ""; }

  void device_builder(int g);

  void patcher(int g);

  void host_builder(int g);

  void region(const lir::Body& r, const Scope& s);

  void node(const lir::Node& n, const Scope& s, const std::string& slot, const std::string& deps,
            bool programmatic = false);

  void kernel_params(const lir::Node& n, const lir::KernelNode& kn, const Scope& s);

  void conditional(const lir::ConditionalNode& n, const Scope& s, const std::string& slot,
                   const std::string& deps, const std::string& w);

  void collective(const lir::CollectiveNode& n, const Scope& s, const std::string& slot,
                  const std::string& deps, const std::string& w);

  void build();

  void launch_and_destroy();

  // How main parses a param's value: integers exactly (decimal, 0x hex), floats rounded to
  // nearest, bool as 0, 1, true or false.
  std::string param_parser(const lir::Param& x, const std::string& member) const;

  // main(): a harness that runs the graph on given inputs and writes every buffer, so that the
  // ejected program can be compared with the orch runtime (orch-run --fill NAME=file:PATH
  // --warmup 0 --repeat N --dump NAME=PATH does the same).
  void main_function();

  const lir::Program& p_;
  const SourceManager& sources_;
  std::string out_;
  int indent_ = 0;

  std::string type_, fn_;
  std::set<std::string> macros_;  // declared before the scopes that point at it
  Names param_scope_{&macros_}, buffer_scope_{&macros_}, graph_scope_{&macros_};
  std::vector<std::string> param_names_, comm_names_, buffer_names_, host_names_;
  std::vector<std::string> graph_names_, exec_names_, table_names_, patch_names_;
  std::string rank_, world_size_;
  std::vector<int> device_order_;
  std::vector<std::vector<const lir::Node*>> late_nodes_;
  std::vector<const lir::Node*> handle_nodes_;
  std::set<int> used_kernels_;
  bool uses_status_ = false;  // some kernel reports device-side errors (OrchDeviceStatus)
  bool in_family_ = false;
  bool patching_ = false;
  int evals_ = 0;  // names the values ORCH_EVAL computes
};

}  // namespace orch::eject

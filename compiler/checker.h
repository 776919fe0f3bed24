// Internal to compiler/: the state of one check_module() run, split by area over
// check_decls.cpp, check_expr.cpp, the statement checkers (check_stmts.cpp and the files it
// dispatches to) and check_rules.cpp.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/check.h"

namespace orch::detail {

enum class SymbolKind { Param, Buffer, Comm, Kernel, Graph, Builtin };

struct Symbol {
  SymbolKind kind;
  int index = -1;
  SourceRange loc;
};

// What an expression may read, by where it appears.
enum class ExprContext {
  Constant,      // literals only: case values, budgets, family sizes
  ParamDefault,  // literals and earlier params
  Size,          // literals, params, world_size: buffer sizes
  Host,          // + rank and the family index: launch shapes, value arguments
  Device,        // + device scalars: conditions and scalar updates (evaluated on the GPU)
};

struct BodyContext {
  int graph = -1;  // the graph whose body is being built
  bool device = false;
  std::string family_index;
  uint32_t family_size = 0;
  int conditional_depth = 0;
  SourceRange conditional_loc;  // innermost if/while/switch
  SourceRange outermost_conditional_loc;
  bool nesting_reported = false;  // E0412 was reported for an enclosing conditional
  int loop_depth = 0;
  SourceRange loop_loc;  // innermost while
  int while_kernel_depth = 0;  // `cond` is meaningful inside `while kernel`
  bool* cond_used = nullptr;   // set when a kernel in the innermost `while kernel` takes `cond`
  bool helper = false;  // a graph only `call`ed, checked alone: launched from where it is called
  std::vector<SourceRange> call_stack;
  std::vector<int> inlining;  // graphs being inlined by `call`, to catch cycles
};

class Checker {
 public:
  Checker(const ast::Module& module, SourceManager& sources, const CheckOptions& options,
          DiagnosticEngine& diags);
  std::unique_ptr<ir::Program> run();

  // ---- check_decls.cpp
  void load_target();
  void declare(const std::string& name, SymbolKind kind, int index, SourceRange loc);
  void check_params();
  void check_buffers();
  void check_comms();
  void check_kernels();
  void check_kernel(const ast::Kernel& k, ir::Kernel& out);
  void check_cost(const ast::Kernel& k, ir::Kernel& out);
  void check_graph_headers();
  const Symbol* lookup(const std::string& name) const;

  // ---- check_expr.cpp
  std::optional<ir::Expr> expr(const ast::Expr& e, ExprContext ctx, const BodyContext* body);
  // Gives an untyped literal expression type `t` (recursively); false after reporting why not.
  bool settle(ir::Expr& e, ir::ScalarType t);
  // The expression at its use site, which expects `expected` (nullopt: nothing, so untyped
  // literals keep i64 or f64): settles it, evaluates it with the defaults, and reports an error
  // (overflow, division by zero, ...) at the operator where it happens, with `code`, or E0109
  // when the expression depends on no param.
  expr::Evaluation finish(ir::Expr& e, std::optional<ir::ScalarType> expected, DiagCode code);
  // expr/'s evaluation with the params' defaults (and the family member, if given); reports
  // nothing. `origins` receives the node of each postfix instruction.
  expr::Evaluation evaluation(const ir::Expr& e, std::optional<uint32_t> member,
                              std::vector<const ir::Expr*>* origins);
  // The value, if the defaults determine it.
  std::optional<ir::Value> evaluate(const ir::Expr& e, std::optional<uint32_t> member = {});
  // A constant non-negative integer (E0115 otherwise), e.g. a budget or a family size.
  std::optional<uint64_t> constant_uint(const ast::Expr& e, const std::string& what);
  std::string default_values_note(const ir::Expr& e);

  // ---- the statements: check_stmts.cpp (dispatch, copies, fills, updates, placement),
  // check_kernel_launch.cpp, check_control_flow.cpp, check_calls.cpp, check_collective.cpp
  void build_graph(int g);
  void block(const ast::Block& b, BodyContext& ctx, ir::Region& out);
  void stmt(const ast::Stmt& s, BodyContext& ctx, ir::Region& out);
  void kernel_launch(const ast::Stmt& s, const ast::KernelLaunch& n, BodyContext& ctx,
                     ir::Region& out);
  bool launch_shape(const ast::Expr* e, const char* what, ir::Expr out[3], SourceRange* loc,
                    BodyContext& ctx);
  void check_shape_limits(const ast::Stmt& s, const ir::KernelNode& node, const BodyContext& ctx);
  // The kernel's `cost` for one launch: its value parameters replaced by the launch's arguments.
  void launch_cost(const ast::Kernel& decl, const ir::Kernel& k, ir::KernelNode& node, BodyContext& ctx);
  std::optional<ir::KernelArg> kernel_arg(const ast::Expr& arg, const ir::Kernel& k,
                                          const ir::KernelParam& p, BodyContext& ctx);
  void copy(const ast::Stmt& s, const ast::Copy& n, BodyContext& ctx, ir::Region& out);
  void fill(const ast::Stmt& s, const ast::Fill& n, BodyContext& ctx, ir::Region& out);
  void assign(const ast::Stmt& s, const ast::Assign& n, BodyContext& ctx, ir::Region& out);
  void if_stmt(const ast::Stmt& s, const ast::If& n, BodyContext& ctx, ir::Region& out);
  void while_stmt(const ast::Stmt& s, const ast::While& n, BodyContext& ctx, ir::Region& out);
  void switch_stmt(const ast::Stmt& s, const ast::Switch& n, BodyContext& ctx,
                   ir::Region& out);
  void call(const ast::Stmt& s, const ast::Call& n, BodyContext& ctx, ir::Region& out);
  void launch_graph(const ast::Stmt& s, const ast::LaunchGraph& n, BodyContext& ctx,
                    ir::Region& out);
  void collective(const ast::Stmt& s, const ast::Collective& n, BodyContext& ctx,
                  ir::Region& out);
  // check_nvshmem.cpp: put, get, signal, wait, quiet, barrier; and after every graph is built,
  // the rules that look at the whole pipeline (signals that nothing sends, conditions PEs may
  // compute differently, waits that can deadlock against a collective).
  void shmem(const ast::Stmt& s, const ast::Shmem& n, BodyContext& ctx, ir::Region& out);
  void check_nvshmem_rules();
  std::optional<ir::Expr> condition(const ast::Expr& e, BodyContext& ctx);
  int buffer_ref(const ast::Ident& name, const char* role);
  void device_launch_placement(const SourceRange& where, const std::string& what,
                               const BodyContext& ctx);
  void kernel_launch_placement(const ast::Stmt& s, const ir::Kernel& k, const BodyContext& ctx);
  // E0412: opens one more conditional level; false (reported once per chain) past the limit.
  void enter_conditional(const ast::Stmt& s, BodyContext& inner);
  ir::Node make_node(ir::NodeOp op, const ast::Stmt& s, const BodyContext& ctx) const;

  // ---- check_rules.cpp (after every graph is built)
  void compute_footprints();
  void check_budgets();
  // check_launches.cpp: ordering of device-launched work, pending launches per graph.
  void check_launches();
  void check_bind_checks_possible();
  void check_device_graphs();
  void check_loop_conditions();

  const ast::Module& module_;
  SourceManager& sources_;
  const CheckOptions& options_;
  DiagnosticEngine& diags_;
  std::unique_ptr<ir::Program> program_;
  std::map<std::string, Symbol> symbols_;
  std::vector<const ast::Graph*> graph_asts_;
  // Buffers each graph reads and writes in one execution, including graphs it launches.
  std::vector<std::vector<ir::BufferAccess>> footprints_;
  // Declarations that already failed (reported once): later uses skip them quietly, so one
  // mistake gives one error.
  std::vector<bool> param_broken_;
  std::vector<bool> buffer_broken_;
  std::vector<std::vector<bool>> kernel_param_broken_;
  bool profile_ok_ = false;
  // Per graph: the buffers its collectives so far write (a later `wait` reads them: check_nvshmem.cpp).
  std::map<int, std::vector<int>> collective_writes_;
  // Buffers a put or signal statement names as its signal word, checked or not (check_nvshmem.cpp).
  std::set<int> signal_words_named_;     // limits are checked only against a profile that loaded
  bool in_condition_ = false;
  // While a kernel's cost is checked for one launch: its value parameters' names, bound to the
  // launch's arguments (names resolve only here).
  const std::map<std::string, ir::Expr>* cost_names_ = nullptr;
  bool in_value_arg_ = false;   // E0108 can suggest an `in` parameter only for kernel arguments   // an array in an expression is E0406 in conditions, else E0109
  std::vector<std::vector<int>> reported_cycles_;
  // `while` loops whose body had errors: E0410 would only echo them (missing accesses).
  std::vector<SourceRange> loops_with_errors_;
  std::vector<SourceRange> reported_loops_;

  // `call` copies the called graph's statements, so calls that call other graphs several
  // times multiply them (31 graphs each calling the next twice: 2^31 statements). Before
  // inlining, each graph's fully inlined size is known (inline_sizes(), saturating), and a
  // call that would pass the program's budget is refused (E0805), as is nesting past
  // kMaxCallDepth (E0804). After either, no further call is inlined: one error, not one per
  // graph.
  // False (with E0806) if the file has more statements than the checker takes.
  bool compute_inline_sizes();
  std::vector<uint64_t> inline_size_;   // per graph: statements, calls expanded
  std::vector<uint64_t> inline_depth_;  // per graph: deepest nesting, calls expanded (a call is a level)
  uint64_t inlined_statements_ = 0;
  bool inlining_stopped_ = false;
};

// Limits on `call` (docs/diagnostics.md, E0804 and E0805).
constexpr size_t kMaxCallDepth = 64;
constexpr uint64_t kMaxInlinedDepth = 256;  // conditionals and calls; one graph alone may nest 200
constexpr uint64_t kMaxInlinedStatements = 50'000;
// Statements written in the file (docs/diagnostics.md, E0806): with the inlining budget, this
// keeps the checker's memory under 1 GB. Generated pipelines of 100,000 statements check.
constexpr uint64_t kMaxStatements = 150'000;

// A binary expression the checker writes itself (bind checks), typed by expr/'s rules.
ir::Expr make_binary(expr::Op op, ir::Expr a, ir::Expr b);

// Adds (buffer, read, write) to a set of accesses, merging with an existing entry.
void add_access(std::vector<ir::BufferAccess>& set, int buffer, bool read, bool write);

// Notes for the other places that add to a count (launch budgets, launches of one graph): at
// most kMaxSiteNotes, the last of which counts the rest, so that 121 launches give one error
// with 8 notes, not 120.
constexpr size_t kMaxSiteNotes = 8;
void add_site_notes(DiagnosticEngine& diags, Diagnostic& d, const std::vector<SourceRange>& sites,
                    const std::string& message);
// The same for notes that say different things: the last one shown gets the count.
void add_capped_notes(DiagnosticEngine& diags, Diagnostic& d, const std::vector<DiagnosticNote>& notes);

// Reports about a node that `call` inlined carry its call sites as context ("called from
// here", capped like every context: support/diagnostics.h), as if the node were being checked
// inside the calls.
class CallSites {
 public:
  CallSites(DiagnosticEngine& diags, const std::vector<SourceRange>& call_stack) : diags_(diags) {
    for (const SourceRange& r : call_stack) diags_.push_context(r, "called from here");
    n_ = call_stack.size();
  }
  ~CallSites() {
    for (size_t i = 0; i < n_; ++i) diags_.pop_context();
  }
  CallSites(const CallSites&) = delete;
  CallSites& operator=(const CallSites&) = delete;

 private:
  DiagnosticEngine& diags_;
  size_t n_ = 0;
};

}  // namespace orch::detail

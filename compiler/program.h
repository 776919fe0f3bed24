// The checked program: what compiler/ hands to lowering/. Names are resolved to indices,
// expressions are typed, calls are inlined, and every graph body is a DAG of nodes whose
// edges are exactly the orderings its reads and writes need (transitively reduced).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "compiler/target_profile.h"
#include "expr/expr.h"
#include "support/diagnostic_code.h"
#include "support/source.h"

namespace orch::ir {

// Limits a checked program stays within so that pipeline.bin can hold it; artifact/artifact.h
// has the loader's copies (kMaxGraphDepth, ...) and lowering/serialize.cpp asserts they agree.
constexpr uint32_t kMaxConditionalNesting = 64;  // conditional bodies inside conditional bodies
constexpr uint32_t kMaxFamilySize = 65536;       // members of one graph family

// One scalar type enum for the whole project: expr/'s.
using ScalarType = expr::ScalarType;
using expr::is_float;
using expr::is_signed;
using expr::parse_scalar_type;
using expr::size_of;
using expr::to_string;

// ---- expressions --------------------------------------------------------------------------

using Value = expr::Value;

enum class ExprKind : uint8_t {
  Const,         // value
  Param,         // ref = param index (host-set, known at launch)
  DeviceScalar,  // ref = buffer index of a device scalar (read on the GPU)
  FamilyIndex,   // the index of a graph family member (`name`)
  Rank,
  WorldSize,
  Unary,   // op, operands[0]
  Binary,  // op, operands[0..1]
  Call,    // op (min, max, ceil_div), operands[0..1]
};

struct Expr {
  ExprKind kind = ExprKind::Const;
  // The static type (docs/language.md, "Arithmetic"). For an untyped literal expression (made
  // only of literals, `is_literal`), the type it has until its use site settles it: i64 (u64
  // for integers past INT64_MAX) or f64.
  ScalarType type = ScalarType::I64;
  bool is_literal = false;
  Value value;
  int ref = -1;
  expr::Op op = expr::Op::Neg;
  std::string name;  // FamilyIndex: the index's name
  std::vector<Expr> operands;
  SourceRange loc;
  SourceRange op_loc;  // Unary/Binary: the operator token; Call: the function name
};

// A constant of a type (not an untyped literal).
Expr constant(Value v, SourceRange loc = {});
// `op` on two typed operands, typed by expr/'s rules (for expressions the compiler writes).
Expr operation(expr::Op op, Expr a, Expr b);

// True if the expression reads device memory (so it must be evaluated on the GPU).
bool reads_device(const Expr& e);
// True if the expression depends on params, rank, world_size or a family index.
bool depends_on_host_values(const Expr& e);
// Structural equality (same operators, names and constants), ignoring locations.
bool same_expr(const Expr& a, const Expr& b);
// Source-like text of an expression, for messages and the emitters.
std::string to_string(const Expr& e, const struct Declarations& program);
// The expression as expr/ postfix code (what the evaluator, the printer and the artifact take);
// `origins`, if given, receives the node each instruction comes from.
std::vector<expr::Instr> to_postfix(const Expr& e, std::vector<const Expr*>* origins = nullptr);

// ---- declarations -------------------------------------------------------------------------

struct Param {
  std::string name;
  ScalarType type;
  std::optional<Expr> default_value;
  std::optional<Value> default_evaluated;  // of the param's type
  SourceRange loc;
};

struct Buffer {
  std::string name;
  ScalarType elem;
  std::optional<Expr> count;  // elements; absent for a device scalar
  bool host = false;          // pinned, device-mapped host memory
  bool keep = false;          // `keep`: never shares memory (lowering/plan_memory.cpp)
  bool symmetric = false;     // on NVSHMEM's symmetric heap (docs/multi-gpu.md, "NVSHMEM")
  SourceRange loc;
  bool is_scalar() const { return !count.has_value(); }
};

struct Comm {
  std::string name;
  SourceRange loc;
};

enum class Access : uint8_t { None, In, Out, InOut };
// Status: the executable's device status record (generated kernels only; lowering/codegen.h).
enum class KernelParamKind : uint8_t { Value, Scalar, Array, Cond, Graph, GraphFamily, Status };
enum class LaunchMode : uint8_t { FireAndForget, Tail, Sibling };
const char* to_string(LaunchMode m);
const char* to_string(Access a);

struct KernelParam {
  std::string name;
  KernelParamKind kind = KernelParamKind::Value;
  Access access = Access::None;
  ScalarType elem = ScalarType::U32;
  uint32_t family_size = 0;  // GraphFamily
  SourceRange loc;
};

struct LaunchBudget {
  int param = -1;  // index into Kernel::params (a Graph or GraphFamily parameter)
  LaunchMode mode = LaunchMode::Tail;
  uint64_t limit = 0;
  SourceRange loc;
};

struct Kernel {
  std::string name;
  std::vector<KernelParam> params;
  std::vector<LaunchBudget> budgets;
  std::string entry;          // NVRTC name expression; the kernel's name unless `entry` given
  bool inline_source = false;
  std::string source;         // the code (inline) or the file's contents (`from`)
  std::string source_path;    // `from` file, resolved against the .orch file's folder
  uint32_t source_file = 0;   // SourceManager id holding the code: the .orch or the .cu file
  uint32_t source_first_line = 1;  // line in source_file of the code's first line
  uint32_t source_first_col = 1;
  bool uses_device_runtime = false;  // has cond or graph parameters
  SourceRange loc;
  // Device-side kernel launches (CUDA dynamic parallelism) seen in the source text by the
  // checker: `launch_in_source` is the first `<<<` or cudaLaunchDevice call inside the
  // kernel's own body (a certain launch; invalid when none), `may_launch_kernels` is any
  // mention in the whole code (helpers, other kernels of the file) and only steers the
  // lowering. The compiled PTX is the authority: lowering/inspect_ptx.cpp tells
  // check_compiled_kernels (lir::Kernel::launches_kernels).
  SourceRange launch_in_source;
  bool may_launch_kernels = false;
  SourceRange signature_in_source;  // the kernel's `__global__` function in the code, if found
  // `cost bytes ..., flops[f32] ...`: checked here (E0117); each launch gets its own expressions
  // (Node::cost_bytes, cost_flops), the kernel's value parameters replaced by the launch's
  // arguments. orch-run --roofline evaluates them where the GPU's counters cannot be read.
  bool has_cost = false;
  bool cost_ok = true;  // false: the clause had errors (reported), so launches get no cost
  ScalarType cost_precision = ScalarType::F32;
};

// ---- graph bodies -------------------------------------------------------------------------

// The kinds of Node::op's alternatives (KernelNode, ...), in the variant's order.
enum class NodeKind : uint8_t {
  Kernel,
  Copy,
  Fill,
  ScalarUpdate,
  If,
  While,
  Switch,
  LaunchGraph,
  Collective,
  Shmem,  // put, get, signal, wait, quiet, barrier (NVSHMEM)
};
const char* to_string(NodeKind k);

struct BufferAccess {
  int buffer = -1;
  bool read = false;
  bool write = false;
};

// Cond: the handle of the enclosing `while kernel`.
enum class ArgKind : uint8_t { Value, Buffer, Cond, Graph, GraphFamily };

struct KernelArg {
  ArgKind kind = ArgKind::Value;
  Expr value;      // Value
  int ref = -1;    // Buffer: buffer index; Graph/GraphFamily: graph index
  bool self = false;  // Graph: the graph being executed (`self`)
  SourceRange loc;
};

struct Region;

enum class CollectiveKind : uint8_t { AllReduce, Broadcast, AllGather, ReduceScatter };
const char* to_string(CollectiveKind k);
// The reduction of an allreduce or reduce_scatter; None for the other collectives.
enum class ReduceOp : uint8_t { None, Sum, Prod, Min, Max, Avg };
const char* to_string(ReduceOp op);  // "sum", ...; "" for None
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

// ---- node kinds: one struct per kind, alternatives of Node::op --------------------------------
// Node::op is a std::variant whose alternatives are in NodeKind's order, so Node::kind() is the
// variant's index and every `switch (n.kind())` (no `default:`, -Werror=switch) and every
// std::visit with an `overloaded` set is a compile error until it handles a new kind.

struct KernelNode {
  int kernel = -1;
  Expr grid[3], block[3];
  std::optional<Expr> cost_bytes, cost_flops;  // the kernel's `cost` for this launch
  SourceRange grid_loc, block_loc;  // the whole shape, `dim3(...)` included
  Expr shared_bytes;
  std::vector<KernelArg> args;
};

struct CopyNode {
  int src = -1, dst = -1;
};

struct FillNode {
  int dst = -1;
  Expr value;
};

// dst = value (op "=" after desugaring), evaluated by a generated kernel.
struct ScalarUpdateNode {
  int dst = -1;
  Expr value;
};

// What If, While and Switch share: a condition (absent only for `while kernel`) and bodies.
struct ConditionalParts {
  std::optional<Expr> cond;
  std::vector<Region> bodies;
};

struct IfNode : ConditionalParts {};        // bodies[0] then, bodies[1] else (if present)
struct WhileNode : ConditionalParts {};     // bodies[0]; cond absent for `while kernel`
struct SwitchNode : ConditionalParts {      // bodies[i] for case_values[i]; the default body last
  std::vector<int64_t> case_values;  // of the subject's type, as expr::Value bits
  bool has_default = false;
};

// `launch g mode`: a generated launcher kernel.
struct LaunchGraphNode {
  int graph = -1;
  std::optional<Expr> family_member;
  LaunchMode mode = LaunchMode::Tail;
};

struct CollectiveNode {
  CollectiveKind collective = CollectiveKind::AllReduce;
  ReduceOp reduce_op = ReduceOp::None;
  int src = -1, dst = -1, comm = -1;
  std::optional<Expr> root;
};

// NVSHMEM between kernels (docs/multi-gpu.md, "NVSHMEM"): lowering makes each a kernel orchc
// writes (lowering/generate_nvshmem_kernels.cpp), one block that calls NVSHMEM's device API.
enum class ShmemOp : uint8_t { Put, Get, Signal, Wait, Quiet, Barrier };
const char* to_string(ShmemOp op);
enum class SignalOp : uint8_t { Set, Add };  // NVSHMEM_SIGNAL_SET, NVSHMEM_SIGNAL_ADD
// NVSHMEM_CMP_EQ, ... in NVSHMEM's order (nvshmem_constants.h: EQ 0, NE, GT, LE, LT, GE).
enum class WaitCmp : uint8_t { Eq, Ne, Gt, Le, Lt, Ge };
const char* to_string(WaitCmp c);  // "==", ...

struct ShmemNode {
  ShmemOp op = ShmemOp::Quiet;
  int src = -1, dst = -1;  // Put: the local source and the symmetric destination; Get: the reverse
  int signal = -1;         // Put (with a signal), Signal, Wait: a symmetric u64 device scalar
  std::optional<Expr> peer;   // Put, Get, Signal: the PE, a host value (i32)
  std::optional<Expr> value;  // Put (with a signal), Signal: the signal value; Wait: the compared
                              // value; u64, evaluated on the GPU
  SignalOp signal_op = SignalOp::Set;
  WaitCmp cmp = WaitCmp::Eq;
};

using NodeOp = std::variant<KernelNode, CopyNode, FillNode, ScalarUpdateNode, IfNode, WhileNode, SwitchNode,
                            LaunchGraphNode, CollectiveNode, ShmemNode>;
// Each enumerator names its alternative (a kind added to one and not the other fails here).
template <NodeKind K>
using NodeOf = std::variant_alternative_t<static_cast<size_t>(K), NodeOp>;
static_assert(std::is_same_v<NodeOf<NodeKind::Kernel>, KernelNode> && std::is_same_v<NodeOf<NodeKind::Copy>, CopyNode> &&
                  std::is_same_v<NodeOf<NodeKind::Fill>, FillNode> &&
                  std::is_same_v<NodeOf<NodeKind::ScalarUpdate>, ScalarUpdateNode> &&
                  std::is_same_v<NodeOf<NodeKind::If>, IfNode> && std::is_same_v<NodeOf<NodeKind::While>, WhileNode> &&
                  std::is_same_v<NodeOf<NodeKind::Switch>, SwitchNode> &&
                  std::is_same_v<NodeOf<NodeKind::LaunchGraph>, LaunchGraphNode> &&
                  std::is_same_v<NodeOf<NodeKind::Collective>, CollectiveNode> &&
                  std::is_same_v<NodeOf<NodeKind::Shmem>, ShmemNode> &&
                  std::variant_size_v<NodeOp> == static_cast<size_t>(NodeKind::Shmem) + 1,
              "NodeOp's alternatives are NodeKind's enumerators, in order");

struct Node {
  NodeOp op;
  SourceRange loc;
  std::vector<SourceRange> call_stack;  // `call` sites this node was inlined through, outermost first
  std::vector<BufferAccess> accesses;   // for conditionals: the condition and all bodies

  NodeKind kind() const { return static_cast<NodeKind>(op.index()); }
  template <class T>
  bool is() const { return std::holds_alternative<T>(op); }
  // The kind's fields; the node must be of kind T (std::bad_variant_access otherwise).
  template <class T>
  T& as() { return std::get<T>(op); }
  template <class T>
  const T& as() const { return std::get<T>(op); }
};

// The condition and bodies of an If, While or Switch node; nullptr for every other kind.
ConditionalParts* conditional(Node& n);
const ConditionalParts* conditional(const Node& n);
// The bodies a node holds (a conditional's), or none: `for (Region& b : bodies(n))`.
template <class R>
struct Bodies {
  R* first = nullptr;
  R* last = nullptr;
  R* begin() const { return first; }
  R* end() const { return last; }
  size_t size() const { return static_cast<size_t>(last - first); }
  bool empty() const { return first == last; }
  R& operator[](size_t i) const { return first[i]; }
};
Bodies<Region> bodies(Node& n);
Bodies<const Region> bodies(const Node& n);

// Condition: a condition kernel before the conditional node whose handle it sets.
enum class DepKind : uint8_t { RAW, WAR, WAW, Condition };
const char* to_string(DepKind k);

struct Edge {
  int from = -1, to = -1;  // node indices within the region
  int buffer = -1;         // a buffer that orders them; -1 for a Condition edge
  DepKind kind = DepKind::RAW;
};

struct Region {
  std::vector<Node> nodes;  // in program order
  std::vector<Edge> edges;  // transitively reduced
};

struct Graph {
  std::string name;
  bool device = false;
  uint32_t family_size = 0;  // 0: not a family
  std::string family_index;  // the index name inside the body
  Region body;
  SourceRange loc;
  // Per execution, summed over the body: what the validator checked against the profile.
  uint64_t fire_and_forget_launches = 0;
  uint64_t tail_launches = 0;
  uint64_t self_tail_launches = 0;
};

// A check that depends on param values: proven with the defaults at compile time, and
// recorded so the runtime can check it again with the values the application binds.
struct BindCheck {
  DiagCode code;        // the diagnostic code it would raise
  std::string message;  // e.g. "block of `scale` has at most 1024 threads"
  Expr condition;       // must be true (non-zero)
  SourceRange loc;
  // > 0: the condition uses a family's index; it must hold for every member 0..family_size-1.
  uint32_t family_size = 0;
};

// What a program declares, besides its graphs: the checker's, and shared unchanged by lowering's
// program (lowering/mir.h), whose graphs are of its own types.
struct Declarations {
  std::string name;
  uint32_t file = 0;
  std::vector<std::string> targets;  // arch names, e.g. {"sm_90"}
  TargetProfile profile;             // of the first target: the limits that were checked
  // Every target's profile says programmatic_dependent_launch (lowering may then make
  // programmatic edges; lowering/programmatic_edges.cpp).
  bool targets_have_pdl = false;
  std::vector<Param> params;
  std::vector<Buffer> buffers;
  std::vector<Comm> comms;
  std::vector<Kernel> kernels;
  int main_graph = -1;
  std::vector<BindCheck> bind_checks;
  bool uses_rank = false;
};

// Lowering reads it and leaves it as it is: its passes rewrite a program of their own
// (lowering/mir.h, to_mir).
struct Program : Declarations {
  std::vector<Graph> graphs;
};

}  // namespace orch::ir

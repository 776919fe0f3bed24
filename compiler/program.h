// The checked program: what compiler/ hands to lowering/. Names are resolved to indices,
// expressions are typed, calls are inlined, and every graph body is a DAG of nodes whose
// edges are exactly the orderings its reads and writes need (transitively reduced).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/target_profile.h"
#include "support/source.h"

namespace orch::ir {

enum class ScalarType : uint8_t { U8, U16, U32, U64, I8, I16, I32, I64, F16, BF16, F32, F64, Bool };

std::optional<ScalarType> parse_scalar_type(const std::string& name);
const char* to_string(ScalarType t);
uint32_t size_of(ScalarType t);
bool is_float(ScalarType t);
bool is_signed(ScalarType t);

// ---- expressions --------------------------------------------------------------------------

// The type of an expression: a scalar type, or an untyped literal that takes the type of what
// it meets (as `n * 2` keeps n's type).
enum class ExprType : uint8_t { Int, Float, Bool, Literal_Int, Literal_Float, Error };

struct Value {
  bool is_float = false;
  int64_t i = 0;  // integers are held as 64-bit two's complement
  double f = 0;
  double as_double() const { return is_float ? f : static_cast<double>(i); }
};

enum class ExprKind : uint8_t {
  Const,         // value
  Param,         // ref = param index (host-set, known at launch)
  DeviceScalar,  // ref = buffer index of a device scalar (read on the GPU)
  FamilyIndex,   // the index of a graph family member
  Rank,
  WorldSize,
  Unary,   // op, operands[0]
  Binary,  // op, operands[0..1]
  Call,    // op = min | max | ceil_div | dim3
};

struct Expr {
  ExprKind kind = ExprKind::Const;
  ScalarType type = ScalarType::I64;  // for Param / DeviceScalar / Const: the declared type
  bool is_literal = false;            // an untyped literal: adapts to the other operand
  Value value;
  int ref = -1;
  std::string op;
  std::vector<Expr> operands;
  SourceRange loc;
};

// True if the expression reads device memory (so it must be evaluated on the GPU).
bool reads_device(const Expr& e);
// True if the expression depends on params, rank, world_size or a family index.
bool depends_on_host_values(const Expr& e);
// Structural equality (same operators, names and constants), ignoring locations.
bool same_expr(const Expr& a, const Expr& b);
// Source-like text of an expression, for messages and the emitters.
std::string to_string(const Expr& e, const struct Program& program);

// ---- declarations -------------------------------------------------------------------------

struct Param {
  std::string name;
  ScalarType type;
  std::optional<Expr> default_value;
  std::optional<Value> default_evaluated;
  SourceRange loc;
};

struct Buffer {
  std::string name;
  ScalarType elem;
  std::optional<Expr> count;  // elements; absent for a device scalar
  bool host = false;          // pinned, device-mapped host memory
  SourceRange loc;
  bool is_scalar() const { return !count.has_value(); }
};

struct Comm {
  std::string name;
  SourceRange loc;
};

enum class Access : uint8_t { None, In, Out, InOut };
enum class KernelParamKind : uint8_t { Value, Scalar, Array, Cond, Graph, GraphFamily };
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

  // Set by lowering: kernels orchc writes itself (conditions, scalar updates, fills that a
  // memset cannot do, device launchers), and the compiled images of every kernel.
  bool generated = false;
  std::string lowered_name;
  std::vector<std::pair<std::string, std::string>> cubins;  // (arch, ELF bytes)
  std::string ptx;
  std::string ptx_arch;
  int module = -1;  // >= 0: the code is Program::modules[module] (cubins and ptx stay empty)
};

// Compiled code several kernels share (lowering puts every generated kernel in one).
struct Module {
  std::vector<std::pair<std::string, std::string>> cubins;  // (arch, ELF bytes)
  std::string ptx;
  std::string ptx_arch;
};

// ---- graph bodies -------------------------------------------------------------------------

enum class NodeKind : uint8_t {
  Kernel,
  Copy,
  Fill,
  ScalarUpdate,  // device scalar = expr, evaluated by a generated kernel
  If,            // bodies[0] then, bodies[1] else (if present)
  While,         // bodies[0]; cond absent for `while kernel`
  Switch,        // bodies[i] for case_values[i]; the default body last if has_default
  LaunchGraph,   // `launch g mode`: a generated launcher kernel
  Collective,
  // Introduced by lowering: evaluate a condition on the GPU and set handle `handle` (for
  // Switch, mapped through case_values onto CUDA's dense body index).
  SetCondition,
};
const char* to_string(NodeKind k);

struct BufferAccess {
  int buffer = -1;
  bool read = false;
  bool write = false;
};

// Cond: the handle of the enclosing `while kernel` until lowering resolves it to
// CondHandle with `ref` set to the handle's index.
enum class ArgKind : uint8_t { Value, Buffer, Cond, Graph, GraphFamily, CondHandle };

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

struct Node {
  NodeKind kind = NodeKind::Kernel;
  SourceRange loc;
  std::vector<SourceRange> call_stack;  // `call` sites this node was inlined through, outermost first
  std::vector<BufferAccess> accesses;   // for conditionals: the condition and all bodies

  // Kernel
  int kernel = -1;
  Expr grid[3], block[3];
  SourceRange grid_loc, block_loc;  // the whole shape, `dim3(...)` included
  Expr shared_bytes;
  std::vector<KernelArg> args;
  // Copy (src, dst), Fill (dst, value), ScalarUpdate (dst, value; op "=" after desugaring)
  int src = -1, dst = -1;
  Expr value;
  // If / While / Switch
  std::optional<Expr> cond;
  std::vector<Region> bodies;
  std::vector<int64_t> case_values;
  bool has_default = false;
  int handle = -1;  // set by lowering: the conditional handle of If/While/Switch/SetCondition
  NodeKind condition_of = NodeKind::If;  // SetCondition: the kind of conditional it feeds
  // ScalarUpdate and SetCondition after fusion: device scalar updates run first, in order,
  // by the same generated kernel. A ScalarUpdate's own update is the first entry.
  std::vector<std::pair<int, Expr>> fused_updates;
  // Fill lowered to a memset node: the pattern and its width (1, 2 or 4 bytes).
  uint32_t memset_value = 0;
  uint8_t memset_element_size = 0;
  // LaunchGraph
  int graph = -1;
  std::optional<Expr> family_member;
  LaunchMode mode = LaunchMode::Tail;
  // Collective (src, dst, comm, op, root)
  CollectiveKind collective = CollectiveKind::AllReduce;
  std::string reduce_op;
  int comm = -1;
  std::optional<Expr> root;
};

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
  std::string code;     // the diagnostic code it would raise
  std::string message;  // e.g. "block of `scale` has at most 1024 threads"
  Expr condition;       // must be true (non-zero)
  SourceRange loc;
};

// A CUDA conditional handle, created on the top-level graph that holds its node.
struct ConditionalHandle {
  int graph = -1;
  uint32_t default_value = 0;
  bool set_default = false;
};

struct Program {
  std::string name;
  uint32_t file = 0;
  std::vector<std::string> targets;  // arch names, e.g. {"sm_90"}
  TargetProfile profile;             // of the first target: the limits that were checked
  std::vector<Param> params;
  std::vector<Buffer> buffers;
  std::vector<Comm> comms;
  std::vector<Kernel> kernels;
  std::vector<Graph> graphs;
  int main_graph = -1;
  std::vector<BindCheck> bind_checks;
  bool uses_rank = false;

  // Set by lowering.
  std::vector<ConditionalHandle> handles;
  std::vector<int> segments;  // host graphs launched in order; {main_graph} unless split
  uint64_t collective_hash = 0;
  std::vector<Module> modules;
};

}  // namespace orch::ir

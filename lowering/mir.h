// The program as lowering's IR-to-IR passes rewrite it (lowering/passes.h, drop_helper_graphs
// to rebuild_edges) and build_lir reads it. to_mir makes it from the checker's program
// (compiler/program.h), which lowering leaves as it is: what the passes compute (conditional
// handles, unrolled copies and their guards, fused updates, condition kernels) lives only here.
// The leaf types lowering does not change are the checker's, re-exported; the recursive ones
// (nodes, regions, graphs, the program) are this stage's own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "compiler/program.h"

namespace orch::mir {

// ---- the checker's types, unchanged by lowering ---------------------------------------------

using ir::Access;
using ir::BindCheck;
using ir::Buffer;
using ir::BufferAccess;
using ir::CollectiveKind;
using ir::CollectiveNode;
using ir::Comm;
using ir::constant;
using ir::CopyNode;
using ir::Declarations;
using ir::depends_on_host_values;
using ir::DepKind;
using ir::Edge;
using ir::Expr;
using ir::ExprKind;
using ir::FillNode;
using ir::is_float;
using ir::is_signed;
using ir::Kernel;
using ir::KernelParam;
using ir::KernelParamKind;
using ir::kMaxConditionalNesting;
using ir::kMaxFamilySize;
using ir::LaunchBudget;
using ir::LaunchGraphNode;
using ir::LaunchMode;
using ir::operation;
using ir::Param;
using ir::reads_device;
using ir::ReduceOp;
using ir::same_expr;
using ir::ScalarType;
using ir::ShmemNode;
using ir::ShmemOp;
using ir::SignalOp;
using ir::size_of;
using ir::to_postfix;
using ir::to_string;  // every enum's, and an expression's (of any program's Declarations)
using ir::Value;
using ir::WaitCmp;

// ---- what lowering adds ---------------------------------------------------------------------

// The kinds of Node::op's alternatives, in the variant's order: the checker's and SetCondition.
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
  Shmem,         // put, get, signal, wait, quiet, barrier (NVSHMEM); generated kernels once lowered
  SetCondition,  // lower_conditions' condition kernel
};
const char* to_string(NodeKind k);

// How a node of an unrolled loop's copy learns whether it runs (lowering/unroll_loops.cpp):
// Alone: the copy's only node, which writes none of the condition's buffers or runs one block:
// each block evaluates the condition itself. Decide: a source of the copy (no node of its copy
// before it) that writes none of the condition's buffers, or the copy's only source, of one
// block: each block evaluates and stores the decision in the copy's slot (every block sees the
// condition as the copy found it, so all store the same). Race: the copy's only source, of
// several blocks, writing a buffer the condition reads (its early blocks may write it before
// its late ones start): the first block to reach it claims the slot (atomicCAS), evaluates and
// publishes; the others wait for it. Follow: a node after another node of its copy: it reads the
// decided slot.
// Each: a decider that writes none of the condition's buffers, so every thread decides for itself
// (lowering/unroll_loops.cpp, assign_guards); Alone and Decide: thread 0 of each block decides, the
// block learns it at a barrier (a source that writes the condition, one block).
enum class GuardRole : uint8_t { Alone, Decide, Race, Follow, Each };
const char* to_string(GuardRole r);

// unroll_loops: the node belongs to copy `copy` (2 and up) of unrolled loop `loop`
// (Program::unrolled_loops) and does nothing unless the loop's condition holds on what the copy
// before it left. The role is settled on the lowered program, from its edges.
struct Guard {
  int loop = -1;
  uint32_t copy = 0;
  GuardRole role = GuardRole::Race;
};

struct Region;

// ir::ArgKind's kinds and lowering's: CondHandle, a `cond` argument lower_conditions bound to
// handle `ref`; Status, the executable's device status record, where generated kernels report
// errors.
enum class ArgKind : uint8_t { Value, Buffer, Cond, Graph, GraphFamily, CondHandle, Status };

struct KernelArg {
  ArgKind kind = ArgKind::Value;
  Expr value;         // Value
  int ref = -1;       // Buffer: buffer index; Graph/GraphFamily: graph index; CondHandle: handle
  bool self = false;  // Graph: the graph being executed (`self`)
  SourceRange loc;
};

// ir::KernelNode, with lowering's arguments.
struct KernelNode {
  int kernel = -1;
  Expr grid[3], block[3];
  std::optional<Expr> cost_bytes, cost_flops;  // the kernel's `cost` for this launch
  SourceRange grid_loc, block_loc;             // the whole shape, `dim3(...)` included
  Expr shared_bytes;
  std::vector<KernelArg> args;
};

// dst = value, evaluated by a generated kernel.
struct ScalarUpdateNode {
  int dst = -1;
  Expr value;
  // fuse_generated_kernels: device scalar updates run first, in order, by the same generated
  // kernel; this node's own update is the first entry.
  std::vector<std::pair<int, Expr>> fused_updates;
};

// What If, While and Switch share: a condition (absent only for `while kernel`) and bodies.
struct ConditionalParts {
  std::optional<Expr> cond;
  std::vector<Region> bodies;
  int handle = -1;  // lower_conditions: its CUDA conditional handle
};

struct IfNode : ConditionalParts {};     // bodies[0] then, bodies[1] else (if present)
struct WhileNode : ConditionalParts {};  // bodies[0]; cond absent for `while kernel`
struct SwitchNode : ConditionalParts {   // bodies[i] for case_values[i]; the default body last
  std::vector<int64_t> case_values;      // of the subject's type, as expr::Value bits
  bool has_default = false;
};

// lower_conditions: evaluate a condition on the GPU and set handle `handle` (for Switch, mapped
// through case_values onto CUDA's dense body index).
struct SetConditionNode {
  Expr cond;
  int handle = -1;
  NodeKind condition_of = NodeKind::If;  // the kind of conditional it feeds
  std::vector<int64_t> case_values;      // Switch
  bool has_default = false;              // Switch
  // fuse_generated_kernels: device scalar updates this kernel runs first, in order.
  std::vector<std::pair<int, Expr>> fused_updates;
  // unroll_loops: unrolled loops whose guard slots this kernel resets (before the loop and at
  // the end of each iteration).
  std::vector<int> reset_guards;
};

// As ir::NodeOp: alternatives in NodeKind's order, so every switch and `overloaded` visit is a
// compile error until it handles a new kind.
using NodeOp =
    std::variant<KernelNode, CopyNode, FillNode, ScalarUpdateNode, IfNode, WhileNode, SwitchNode,
                 LaunchGraphNode, CollectiveNode, ShmemNode, SetConditionNode>;
template <NodeKind K>
using NodeOf = std::variant_alternative_t<static_cast<size_t>(K), NodeOp>;
static_assert(std::is_same_v<NodeOf<NodeKind::Kernel>, KernelNode> &&
                  std::is_same_v<NodeOf<NodeKind::Copy>, CopyNode> &&
                  std::is_same_v<NodeOf<NodeKind::Fill>, FillNode> &&
                  std::is_same_v<NodeOf<NodeKind::ScalarUpdate>, ScalarUpdateNode> &&
                  std::is_same_v<NodeOf<NodeKind::If>, IfNode> &&
                  std::is_same_v<NodeOf<NodeKind::While>, WhileNode> &&
                  std::is_same_v<NodeOf<NodeKind::Switch>, SwitchNode> &&
                  std::is_same_v<NodeOf<NodeKind::LaunchGraph>, LaunchGraphNode> &&
                  std::is_same_v<NodeOf<NodeKind::Collective>, CollectiveNode> &&
                  std::is_same_v<NodeOf<NodeKind::Shmem>, ShmemNode> &&
                  std::is_same_v<NodeOf<NodeKind::SetCondition>, SetConditionNode> &&
                  std::variant_size_v<NodeOp> == static_cast<size_t>(NodeKind::SetCondition) + 1,
              "NodeOp's alternatives are NodeKind's enumerators, in order");

struct Node {
  NodeOp op;
  SourceRange loc;
  std::vector<SourceRange>
      call_stack;  // `call` sites this node was inlined through, outermost first
  std::vector<BufferAccess> accesses;  // for conditionals: the condition and all bodies
  std::optional<Guard> guard;          // unroll_loops: the unrolled copy it belongs to (2 and up)

  NodeKind kind() const { return static_cast<NodeKind>(op.index()); }
  template <class T>
  bool is() const {
    return std::holds_alternative<T>(op);
  }
  template <class T>
  T& as() {
    return std::get<T>(op);
  }
  template <class T>
  const T& as() const {
    return std::get<T>(op);
  }
};

// The condition and bodies of an If, While or Switch node; nullptr for every other kind.
ConditionalParts* conditional(Node& n);
const ConditionalParts* conditional(const Node& n);
using ir::Bodies;
Bodies<Region> bodies(Node& n);
Bodies<const Region> bodies(const Node& n);

struct Region {
  std::vector<Node> nodes;  // in program order
  std::vector<Edge> edges;  // transitively reduced
};

// True if `from` must finish before `to` starts: a path of edges leads from one to the other.
bool is_ordered(const Region& region, int from, int to);

struct Graph {
  std::string name;
  bool device = false;
  uint32_t family_size = 0;  // 0: not a family
  std::string family_index;  // the index name inside the body
  Region body;
  SourceRange loc;
  uint64_t fire_and_forget_launches = 0;
  uint64_t tail_launches = 0;
  uint64_t self_tail_launches = 0;
};

// A place a generated kernel reports a device-side error from (a failed device graph launch,
// a family index out of range, an expression that cannot be evaluated): the number is compiled
// into the kernel, and the runtime turns it back into the statement.
struct StatusSite {
  SourceRange loc;
  std::vector<SourceRange> call_stack;
  std::string what;  // e.g. "launch child tail"
};

// A `while` loop whose body lowering repeated (lowering/unroll_loops.cpp): `copies` copies per
// WHILE iteration, copies 2 and up guarded. Guard slots live in buffer `slots` (u32, one per
// copy from 2 on, at index copy - 2): 0 undecided, 1 being decided, 2 run, 3 do not run.
struct UnrolledLoop {
  Expr cond;
  int handle = -1;
  uint32_t copies = 0;
  int slots = -1;
  int status_site = -1;  // where a guard reports a condition that cannot be evaluated
  SourceRange loc;
  // The guard function a user kernel of a copy calls at entry, per GuardRole: a translation unit
  // defining `extern "C" __device__ unsigned orch_guard(unsigned long long...)`, and what the
  // kernel passes it (appended to its parameters and arguments; the copy's slot index is the
  // first, a u32 value).
  struct Function {
    std::string code;
    std::vector<KernelParam> params;
    std::vector<KernelArg> args;
  };
  std::vector<Function> functions;  // by GuardRole
};

// A CUDA conditional handle, created on the top-level graph that holds its node.
struct ConditionalHandle {
  int graph = -1;
  uint32_t default_value = 0;
  bool set_default = false;
};

struct Program : Declarations {
  std::vector<Graph> graphs;
  // The passes' results, which the lowered program (lowering/lir.h) takes from here.
  std::vector<ConditionalHandle> handles;
  std::vector<int> segments;  // host graphs launched in order; {main_graph} unless split
  std::vector<StatusSite> status_sites;
  std::vector<UnrolledLoop> unrolled_loops;
};

// The checker's program as lowering's first pass takes it (lowering/to_mir.cpp).
Program to_mir(const ir::Program& checked);

// --print-passes' view: the YAML of `orchc --emit=yaml` with what the passes added (mir_print.cpp).
std::string print(const Program& program, const SourceManager& sources);
// One-line description of a node, as the checker's emitters write it (lir::Node::what).
std::string describe_node(const Program& program, const Node& node);

}  // namespace orch::mir

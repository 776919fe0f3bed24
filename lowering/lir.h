// The lowered program (lir): exactly what becomes CUDA graph nodes, and what both back ends
// read. build_lir.cpp makes it from lowering's program (lowering/mir.h) after its IR-to-IR
// passes; serialize.cpp writes it to pipeline.bin and emit_cuda.cpp prints it as one
// .cu file, so the artifact and the ejected program cannot drift apart. It mirrors
// artifact/pipeline.fbs (a node kind, an argument kind, a dependency per entry of the
// artifact's), with expressions as expr/'s postfix code. Declarations and kernels reuse the
// checker's types where nothing about them is lowered (ir::KernelParam, ir::Kernel).
//
// Node kinds are alternatives of a std::variant, visited with an `overloaded` set of lambdas and
// no default: a new kind is a compile error everywhere it is not handled.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "lowering/mir.h"
#include "expr/expr.h"
#include "lowering/cubin_resources.h"
#include "support/overloaded.h"
#include "support/source.h"

namespace orch::lir {

// std::visit(overloaded{[](const KernelNode&) {...}, ...}, node.op)
using ::orch::overloaded;

using expr::ScalarType;

// An expression as postfix code (what the artifact stores, expr/ evaluates and prints), with
// its source text for comments and messages ("ceil_div(n, 256)").
struct Expr {
  std::vector<expr::Instr> code;
  std::string text;
  ScalarType type() const { return code.empty() ? ScalarType::I64 : code.back().type; }
  // The single leaf of a one-instruction expression, or nullptr.
  const expr::Instr* leaf() const { return code.size() == 1 ? &code.front() : nullptr; }
};

// ---- declarations -------------------------------------------------------------------------

struct Param {
  std::string name;
  ScalarType type = ScalarType::U32;
  std::optional<expr::Value> default_value;  // of the param's type
  std::string default_text;                  // the default as written; empty when none
  SourceRange loc;
};

struct Buffer {
  std::string name;
  ScalarType elem = ScalarType::U8;
  std::optional<Expr> count;  // elements; absent for a device scalar
  bool host = false;          // pinned, device-mapped host memory
  bool keep = false;          // `keep`: never shares memory (the memory plan leaves it alone)
  bool symmetric = false;     // on NVSHMEM's symmetric heap: never shares memory either
  SourceRange loc;
  bool is_scalar() const { return !count.has_value(); }
};

struct Comm {
  std::string name;
  SourceRange loc;
};

using KernelParamKind = mir::KernelParamKind;
using Access = mir::Access;
using KernelParam = mir::KernelParam;

struct Image {
  std::string arch;   // "sm_90"
  std::string cubin;  // ELF bytes
};

// Compiled code several kernels share (every generated kernel is in one).
struct Module {
  std::vector<Image> images;
  std::string ptx;
  std::string ptx_arch;
};

// A kernel as the checker declared it (its parameters, its code and where that came from, what
// the source text showed), with the code lowering compiled for it.
struct Kernel : mir::Kernel {
  // orchc wrote it (conditions, scalar updates, fills that a memset cannot do, device
  // launchers, NVSHMEM statements): build_lir, from IrLowering::user_kernels.
  bool generated = false;
  // Every block executes griddepcontrol.wait before it touches memory (orchc's kernels have it in
  // their source: generate_kernels, through build_lir; a user kernel gets it at its PTX entry,
  // lowering/ptx_entry.h: programmatic_edges), so a programmatic edge may enter its nodes.
  bool waits_at_entry = false;
  // Set by compile_all_kernels and check_compiled_kernels.
  std::string lowered_name;  // the symbol to load
  std::vector<Image> images;
  std::string ptx;
  std::string ptx_arch;
  int module = -1;  // >= 0: the code is Program::modules[module] (images and ptx stay empty)
  bool launches_kernels = false;  // its PTX calls the device runtime's kernel launch
  // Which of nvcc's code its unit took where --shared-memory-code=auto chose, and why
  // (CompiledKernel::code_choice); printed with the program after compile_all_kernels.
  std::string code_choice;
  // What each block takes of an SM (registers, static shared memory), once its images are read
  // (check_compiled_kernels), for the speed passes' one-wave test after compiling.
  lowering::BlockDemand demand;
  // Set by assign_guards for a kernel of an unrolled copy (lowering/unroll_loops.cpp), with its
  // role. A user kernel's guarded variant (a kernel of its own: `guard_of` is the user's kernel)
  // takes the guard function's parameters after its own and calls `guard_code`'s orch_guard at
  // its PTX entry; guard_param_sizes are those parameters' sizes in bytes.
  std::optional<mir::Guard> guard;
  int guard_of = -1;
  std::string guard_code;
  // A generated kernel of an unrolled copy holds kGuardPlaceholder where its guard goes, and here
  // the guard's code for each GuardRole (index), all on its parameters (generate_kernels writes
  // them, build_lir brings them here, assign_guards picks one once the edges are known).
  std::vector<std::string> guard_variants;
  std::vector<uint32_t> guard_param_sizes;
};

// ---- nodes --------------------------------------------------------------------------------

// The artifact's fb::ArgKind, in its order.
enum class ArgKind : uint8_t { Value, Buffer, CondHandle, GraphExec, GraphTable, Status };
const char* to_string(ArgKind k);

struct KernelArg {
  ArgKind kind = ArgKind::Value;
  Expr value;         // Value: converted to the parameter's type
  int ref = -1;       // Buffer: buffer; CondHandle: handle; GraphExec, GraphTable: graph
  bool self = false;  // GraphExec: the graph being executed (`self`)
  // GraphExec in a device graph: the graph it names is not instantiated before this one
  // (itself, or later in Program::device_order), so the exec is set on the executable graph
  // after every device graph is instantiated (order_device_graphs).
  bool late = false;
};

struct KernelNode {
  int kernel = -1;
  Expr grid[3], block[3];
  Expr shared_bytes;
  std::vector<KernelArg> args;  // one per kernel parameter
  std::optional<Expr> cost_bytes, cost_flops;  // the kernel's declared `cost` for this launch
};

// The whole of buffer `src` (its bytes) into `dst`.
struct MemcpyNode {
  int src = -1, dst = -1;
};

// Every element of device buffer `dst` set to a 1, 2 or 4-byte pattern repeated.
struct MemsetNode {
  int dst = -1;
  uint32_t value = 0;
  uint8_t element_size = 0;  // 1, 2 or 4
};

// Orders its dependencies and does nothing (a node kind lowering left: a compiler bug).
struct EmptyNode {};

struct Node;
struct Body {
  std::vector<Node> nodes;  // in program order; every dependency points at an earlier node
};

enum class ConditionalType : uint8_t { If, While, Switch };  // fb::ConditionalType
const char* to_string(ConditionalType t);

struct ConditionalNode {
  ConditionalType type = ConditionalType::If;
  int handle = -1;
  // If: then (and else). While: the body. Switch: one per case, the default body last.
  std::vector<Body> bodies;
  // Switch: the case values of bodies[i], of the subject's type.
  std::vector<expr::Value> cases;
  bool has_default = false;
  // While: a `while kernel`, whose body's kernel sets the handle (no condition evaluated).
  bool set_by_kernel = false;
};

using CollectiveKind = mir::CollectiveKind;
using ReduceOp = mir::ReduceOp;

struct CollectiveNode {
  CollectiveKind kind = CollectiveKind::AllReduce;
  ReduceOp op = ReduceOp::None;  // AllReduce, ReduceScatter
  int src = -1, dst = -1, comm = -1;
  std::optional<Expr> root;  // Broadcast
  // NCCL's kernels at the greatest priority: kernels may run beside it (prioritize_collectives).
  bool high_priority = false;
};

using NodeOp =
    std::variant<KernelNode, MemcpyNode, MemsetNode, EmptyNode, ConditionalNode, CollectiveNode>;
const char* kind_name(const NodeOp& op);  // "kernel", "memcpy", ...

// Full: an ordinary graph edge (the dependency finishes, then this node starts). Programmatic
// (programmatic dependent launch, artifact EdgeKind::Programmatic): between two kernel nodes,
// the dependent kernel may start once every block of the dependency has started; it executes
// griddepcontrol.wait at entry (Kernel::waits_at_entry), which returns when the dependency has
// finished and its memory is visible, so it orders memory like a full edge
// (lowering/programmatic_edges.cpp has the argument).
enum class DepKind : uint8_t { Full, Programmatic };
const char* to_string(DepKind k);

struct Dep {
  uint32_t from = 0;  // an earlier node of the same body
  DepKind kind = DepKind::Full;
};

struct BufferAccess {
  int buffer = -1;
  bool read = false;
  bool write = false;
};

struct Node {
  NodeOp op;
  std::vector<Dep> deps;  // nodes of the same body that must finish first
  SourceRange loc;        // the statement it came from
  std::vector<SourceRange> call_stack;  // `call` sites it was inlined through, outermost first
  std::string what;                     // one line for people: "copy u_host -> u"
  // A node of an unrolled loop's copy 2 and up (lowering/unroll_loops.cpp); the role is set by
  // assign_guards.
  std::optional<mir::Guard> guard;
  // What it reads and writes (a conditional: its condition and all its bodies), for the
  // ordering verifier.
  std::vector<BufferAccess> accesses;
  // Why kernel -> kernel edges into it are full where they could have been programmatic
  // (programmatic_edges.cpp), for --emit=ir; empty otherwise.
  std::string edge_note;
  // Why it has an edge its accesses do not ask for (line_up_collectives.cpp), for --emit=ir.
  std::string order_note;
};

// ---- graphs and the program ---------------------------------------------------------------

struct Graph {
  std::string name;
  bool device = false;
  uint32_t family_size = 0;  // 0: not a family
  std::string family_index;  // the index name inside the body
  Body body;
  SourceRange loc;
  uint64_t fire_and_forget_launches = 0;  // per execution
  uint64_t tail_launches = 0;
};

// A `while` loop lowering unrolled (mir::UnrolledLoop, its guard functions' arguments lowered).
struct UnrolledLoop {
  std::vector<int> cond_buffers;  // the device scalars its condition reads
  int handle = -1;
  uint32_t copies = 0;
  int slots = -1;  // the buffer of guard slots
  int status_site = -1;
  SourceRange loc;
  struct Function {
    std::string code;
    std::vector<KernelParam> params;
    std::vector<KernelArg> args;  // the first is the slot index, a u32 value each copy sets
  };
  std::vector<Function> functions;  // by mir::GuardRole
};

// A CUDA conditional handle, created on the top-level graph that holds its node.
struct ConditionalHandle {
  int graph = -1;
  uint32_t default_value = 0;
  bool set_default = false;  // cudaGraphCondAssignDefault
};

// A check of the params, proven with the defaults and checked again at bind time.
struct BindCheck {
  std::string code;     // diagnostic code
  std::string message;
  Expr condition;       // must be true
  SourceRange loc;
  uint32_t family_size = 0;  // > 0: for every member of a family
  bool always_holds = false;  // `x == x`: true whatever the params (nothing to check)
};

struct StatusSite {
  SourceRange loc;
  std::vector<SourceRange> call_stack;
  std::string what;
};

// Why a buffer is or is not in the memory plan's arena (lowering/plan_memory.cpp has the rules;
// docs/performance.md, "Memory: the memory plan", the list for people).
enum class PlanStatus : uint8_t {
  Arena,           // shares the arena with buffers it is never in use beside
  NoPartner,       // could share, but is in use beside every buffer that could
  Off,             // orchc --no-memory-plan
  Host,            // pinned host memory: the CPU reads it
  Scalar,          // a device scalar: one element; conditions and guards read it
  Keep,            // declared `keep`
  Generated,       // orchc's own (guard slots)
  Unused,          // no statement touches it
  Collective,      // a collective's buffer: NCCL's, across ranks
  DeviceGraph,     // used by a graph launched from the device: its work is not a node of the DAG
  ReadFirst,       // may be read before a launch writes all of it: contents carry between launches
  ResultSometimes, // a result (written last) that some launches may not write: its old contents carry
  TooMany,         // past the planner's limits on buffers and uses
};
const char* to_string(PlanStatus s);

// The memory plan: buffers (slots) laid out in one arena, where two slots may share bytes unless
// they conflict (may be in use at the same time). orchc lays the arena out at the params'
// defaults; the runtime again at instantiate with the bound sizes (artifact/arena.h).
struct MemoryPlan {
  bool ran = false;                  // planning was on (not --no-memory-plan)
  std::vector<PlanStatus> status;    // per buffer
  struct Slot {
    int buffer = -1;
    uint64_t offset = 0;  // at the params' defaults (laid_out)
    uint64_t bytes = 0;
  };
  std::vector<Slot> slots;                             // in buffer order
  std::vector<std::pair<uint32_t, uint32_t>> conflicts;  // slot pairs (lower first, sorted)
  bool laid_out = false;     // every slot's size is known at the defaults
  uint64_t arena_bytes = 0;  // at the defaults
  // Device memory at the defaults: every device buffer one by one, and with the arena.
  uint64_t device_bytes_separate = 0, device_bytes_planned = 0;
  bool sized = false;  // every device buffer's size is known at the defaults
};

struct Program {
  std::string name;
  uint32_t file = 0;  // the .orch file
  std::vector<std::string> targets;
  std::vector<Param> params;
  std::vector<Buffer> buffers;
  std::vector<Comm> comms;
  bool uses_rank = false;
  std::vector<Kernel> kernels;
  std::vector<Module> modules;
  std::vector<Graph> graphs;  // main, device graphs and families (all, at the checker's indices)
  int main_graph = -1;
  std::vector<int> segments;  // host graphs launched in order
  // Every device graph (families once) in the order they are instantiated: a graph a kernel
  // takes as a `graph` argument comes first where a cycle allows (order_device_graphs).
  std::vector<int> device_order;
  std::vector<ConditionalHandle> handles;
  std::vector<BindCheck> bind_checks;
  std::vector<StatusSite> status_sites;
  std::vector<UnrolledLoop> unrolled_loops;
  MemoryPlan memory_plan;
  uint64_t collective_hash = 0;
  // The NVSHMEM release the kernels that call NVSHMEM were linked with; empty: none does.
  std::string nvshmem_version;
  // Where programmatic edges may be (lowering/programmatic_edges.cpp sets these from
  // PassOptions; the verifier holds every edge to them).
  bool pdl = false;
  bool pdl_in_bodies = false;
  bool pdl_in_device_graphs = false;
};

// Calls `f` on every node of a body and of the bodies of its conditional nodes, parents first.
template <class F>
void for_each_node(const Body& body, F&& f) {
  for (const Node& n : body.nodes) {
    f(n);
    if (const auto* c = std::get_if<ConditionalNode>(&n.op))
      for (const Body& b : c->bodies) for_each_node(b, f);
  }
}

// "line 12:3": where node `n`'s statement begins, for the passes' notes.
std::string where(const Node& n);

// Does node `n` hold a WHILE conditional node (it is one, or one is in its bodies, at any depth)?
bool holds_while(const Node& n);

// Does a path of dependencies lead from node `from` to node `to` of body `b`?
bool reaches(const Body& b, uint32_t from, uint32_t to);

// The program as text, for --print-passes, --emit=ir and tests: stable (same input, same
// bytes), one line per node.
std::string print(const Program& program, const SourceManager& sources);

}  // namespace orch::lir

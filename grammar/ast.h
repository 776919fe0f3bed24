// orch's own syntax tree. The parser (grammar/parse.cpp) builds it from ANTLR's parse tree;
// nothing outside grammar/ sees an ANTLR type. Every node carries the range it came from.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "support/source.h"

namespace orch::ast {

struct Ident {
  std::string name;
  SourceRange loc;
};

// ---- expressions --------------------------------------------------------------------------

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind { Int, Float, Bool, Name, Unary, Binary, Call };

// One struct for every expression kind: expressions are small and uniform, and the passes
// over them are short switch statements.
struct Expr {
  ExprKind kind = ExprKind::Int;
  SourceRange loc;
  uint64_t int_value = 0;       // Int, Bool
  double float_value = 0;       // Float
  std::string text;             // Name: the name; Unary/Binary: the operator; Call: the callee
  SourceRange name_loc;         // Call: the callee's range; Unary/Binary: the operator's
  std::vector<ExprPtr> operands;  // Unary: 1, Binary: 2, Call: the arguments
};

// ---- declarations -------------------------------------------------------------------------

struct Param {
  Ident name;
  Ident type;  // a scalar type name, checked by the compiler
  ExprPtr default_value;  // may be null: the application must bind it
  SourceRange loc;
};

struct Buffer {
  Ident name;
  Ident elem_type;
  ExprPtr size;  // null: a device scalar
  bool host = false;
  bool keep = false;
  bool symmetric = false;                  // on NVSHMEM's symmetric heap
  SourceRange keep_loc;                    // the `keep` attribute, when given
  SourceRange symmetric_loc;               // the `symmetric` attribute, when given
  std::vector<SourceRange> repeated_attributes;  // an attribute given again
  SourceRange loc;
};

struct Comm {
  Ident name;
  SourceRange loc;
};

enum class Access { None, In, Out, InOut };

enum class KernelParamKind {
  Data,         // `n: u32` by value, `x: in f32` a device scalar, `x: in f32[]` an array
  Cond,         // a conditional handle set by the kernel
  Graph,        // one device-launchable graph
  GraphFamily,  // `graph[N]`: a table of N instantiations
};

struct KernelParam {
  Ident name;
  KernelParamKind kind = KernelParamKind::Data;
  Access access = Access::None;
  Ident elem_type;      // Data only
  bool is_array = false;  // Data only
  ExprPtr family_size;  // GraphFamily only
  SourceRange loc;
};

enum class LaunchMode { FireAndForget, Tail, Sibling };

struct LaunchBudget {
  Ident param;
  LaunchMode mode = LaunchMode::Tail;
  ExprPtr limit;
  SourceRange loc;
};

// One item of a `cost` clause: `bytes <expr>`, `flops <expr>` or `flops[f64] <expr>`.
struct CostItem {
  Ident what;                      // bytes, flops (checked by the compiler)
  std::optional<Ident> precision;  // flops[f16|f32|f64]
  ExprPtr value;
  SourceRange loc;
};

struct Kernel {
  Ident name;
  std::vector<KernelParam> params;
  std::vector<LaunchBudget> budgets;
  std::vector<CostItem> costs;
  std::optional<Ident> entry;  // NVRTC name expression, e.g. "scale<float>"
  // Exactly one of these is set by a valid kernel; both empty is reported by the compiler.
  std::optional<Ident> from_file;  // the path as written, loc on the string
  std::optional<Ident> inline_source;  // the code between the triple quotes
  uint32_t inline_first_line = 0;  // .orch line of the source's first character
  uint32_t inline_first_col = 0;
  std::vector<SourceRange> duplicate_clauses;  // a second `from`/`source`/`entry`
  SourceRange loc;
};

// ---- statements ---------------------------------------------------------------------------

struct Stmt;
using Block = std::vector<Stmt>;

struct KernelLaunch {
  Ident kernel;
  ExprPtr grid, block, shared_bytes;  // shared_bytes may be null
  std::vector<ExprPtr> args;
};

struct Copy {
  Ident src, dst;
};

struct Fill {
  Ident dst;
  ExprPtr value;
};

struct Assign {
  Ident target;
  std::string op;  // "=", "+=", "-=", "*=", "/="
  ExprPtr value;
};

struct If {
  ExprPtr cond;
  Block then_body;
  Block else_body;
  bool has_else = false;
  SourceRange else_loc;
};

struct While {
  ExprPtr cond;  // null for `while kernel`
  Block body;
};

struct SwitchCase {
  ExprPtr value;
  Block body;
  SourceRange loc;
};

struct Switch {
  ExprPtr subject;
  std::vector<SwitchCase> cases;
  std::optional<Block> default_body;
  SourceRange default_loc;
};

struct Call {
  Ident graph;
};

struct LaunchGraph {
  Ident graph;
  ExprPtr index;  // a family member, `launch experts[2] tail`
  LaunchMode mode = LaunchMode::Tail;
};

enum class CollectiveKind { AllReduce, Broadcast, AllGather, ReduceScatter };

struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  Ident op;   // sum, prod, min, max, avg (AllReduce, ReduceScatter)
  Ident src;
  std::optional<Ident> dst;  // in place when absent
  ExprPtr root;              // Broadcast; rank 0 when absent
  Ident comm;
};

// NVSHMEM between kernels (docs/multi-gpu.md): put, get, signal, wait, quiet, barrier.
enum class ShmemKind { Put, Get, Signal, Wait, Quiet, Barrier };

struct Shmem {
  ShmemKind kind = ShmemKind::Quiet;
  Ident src, dst;       // Put, Get: `src -> dst`
  ExprPtr peer;         // Put, Signal: `on PEER`; Get: `from PEER`
  Ident signal;         // Put (with `signal`), Signal, Wait: the u64 signal word
  std::string op;       // Put, Signal: "=" or "+="; Wait: "==", "!=", "<", "<=", ">", ">="
  SourceRange op_loc;
  ExprPtr value;        // Put (with `signal`), Signal: the value; Wait: what it is compared with
};

struct Stmt {
  SourceRange loc;
  std::variant<KernelLaunch, Copy, Fill, Assign, If, While, Switch, Call, LaunchGraph, Collective, Shmem>
      node;
};

// ---- graphs and the file ------------------------------------------------------------------

struct Graph {
  Ident name;
  bool device = false;
  std::optional<Ident> family_index;  // `graph experts[e: 8]`
  ExprPtr family_size;
  Block body;
  SourceRange loc;
  SourceRange body_loc;
};

struct Module {
  uint32_t file = 0;
  Ident pipeline;
  std::vector<Ident> targets;
  std::vector<Param> params;
  std::vector<Buffer> buffers;
  std::vector<Comm> comms;
  std::vector<Kernel> kernels;
  std::vector<Graph> graphs;
};

const char* to_string(Access a);
const char* to_string(LaunchMode m);
const char* to_string(CollectiveKind k);
const char* to_string(ShmemKind k);

}  // namespace orch::ast

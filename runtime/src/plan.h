// The runtime's CPU side, no CUDA: the postfix expression evaluator, scalar conversions, and
// the plan (params resolved from bindings and defaults, bind checks, buffer sizes) that
// instantiate() and set_param() build on. Tested on machines without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artifact/pipeline_generated.h"
#include "expr/expr.h"
#include "orch/runtime.h"

namespace orch::rt {

namespace fb = orch::fb;

// A value of a scalar type (expr/'s): what params hold and expressions compute.
using Value = expr::Value;

struct EvalEnv {
  const std::vector<Value>* params = nullptr;
  int64_t family_index = -1;  // < 0: not inside a family member
  int64_t rank = 0;
  int64_t world_size = 1;
};

// Evaluates an artifact expression with expr/'s evaluator (docs/language.md, "Arithmetic"): an
// overflow, a division by zero, a shift count outside the type, a malformed expression or a
// family index outside a family is an error message, never undefined behaviour. Returns the
// empty string on success.
std::string evaluate(const fb::ExprInstr* code, size_t length, const EvalEnv& env, Value* out);
std::string evaluate(const fb::Expr* expr, const EvalEnv& env, Value* out);

// `v` converted to `type` exactly (expr::convert) and stored as one element: the bits, little-
// endian, in the low bytes. The error says why it does not fit.
std::string encode_scalar(const Value& v, fb::ScalarType type, uint64_t* bits);

// A bound ScalarValue as a value of `type`, converted exactly (expr::convert: what the kernel
// sees is what the value is, or it is refused); empty string or why it does not fit.
std::string convert_binding(const ScalarValue& v, fb::ScalarType type, Value* out);

const char* scalar_type_name(fb::ScalarType type);

// "file:line:col", or empty when `loc` is absent or has no line.
std::string where(const fb::Pipeline& p, const fb::SourceLoc* loc);

// What the runtime allocates for `bytes` of a buffer (or of the arena): rounded up to 16 bytes.
// NCCL reads user buffers in 16-byte vectors, up to 15 bytes past a buffer's end (it never
// writes there; nccl#265): past the end of an allocation that is a read out of bounds
// (compute-sanitizer reports it at 4 ranks, 1048583 f32) and, across a page, a possible fault.
constexpr uint64_t kAllocationGranule = 16;
constexpr uint64_t allocation_bytes(uint64_t bytes) {
  return bytes > UINT64_MAX - (kAllocationGranule - 1) ? bytes
                                                       : (bytes + kAllocationGranule - 1) / kAllocationGranule *
                                                             kAllocationGranule;
}

struct BufferSize {
  uint64_t count = 1;  // elements
  uint64_t bytes = 0;  // count * element size
};

struct Plan {
  std::vector<Value> params;       // per Pipeline.params
  int64_t rank = 0, world_size = 1;
  std::vector<BufferSize> buffers;  // per Pipeline.buffers
  EvalEnv env(int64_t family_index = -1) const {
    EvalEnv e;
    e.params = &params;
    e.family_index = family_index;
    e.rank = rank;
    e.world_size = world_size;
    return e;
  }
};

// The first collective node in any graph (nullptr if none), for the "not built yet" error.
const fb::Op* find_collective(const fb::Pipeline& p);

// Whether node `node` of `g` depends on node `target` (< node) through Graph.deps, directly or
// through other nodes. The runtime keeps each collective after the one before it; where the
// graph already orders them (a kernel lined up between them) that edge is redundant, and it
// would give the collective a second dependency, which a stream capture of the same step has not.
bool depends_on(const fb::Graph& g, uint32_t node, uint32_t target);

// Params (bound, else default; unknown names and unbound params without default are errors),
// comms (every declared comm bound, rank within world size), bind checks, buffer sizes, and
// the bound buffers' names and sizes. Pointers are not looked at here.
Result<Plan> make_plan(const fb::Pipeline& p, const Bindings& bindings);

// A hash of every symmetric buffer's size under `plan`. nvshmem_malloc needs the same size on
// every PE, and params are bound per rank, so the ranks compare it before allocating
// (Communicators::agree): sizes that differ give different hashes (but for a 2^-64 chance).
uint64_t symmetric_sizes_hash(const fb::Pipeline& p, const Plan& plan);
// Whether the pipeline needs NVSHMEM: a symmetric buffer, or kernels linked with its device library.
bool uses_nvshmem(const fb::Pipeline& p);

}  // namespace orch::rt

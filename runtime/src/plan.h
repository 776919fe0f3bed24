// The runtime's CPU side, no CUDA: the postfix expression evaluator, scalar conversions, and
// the plan (params resolved from bindings and defaults, bind checks, buffer sizes) that
// instantiate() and set_param() build on. Tested on machines without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artifact/pipeline_generated.h"
#include "orch/runtime.h"

namespace orch::rt {

namespace fb = orch::fb;

// One evaluated value: integers are 64-bit two's complement, floats are doubles.
struct Value {
  bool is_float = false;
  int64_t i = 0;
  double f = 0;

  static Value integer(int64_t v) { return Value{false, v, 0}; }
  static Value real(double v) { return Value{true, 0, v}; }
  double as_double() const { return is_float ? f : static_cast<double>(i); }
  bool truthy() const { return is_float ? f != 0 : i != 0; }
};

struct EvalEnv {
  const std::vector<Value>* params = nullptr;
  int64_t family_index = -1;  // < 0: not inside a family member
  int64_t rank = 0;
  int64_t world_size = 1;
};

// Evaluates postfix code. Every failure (stack underflow, unknown op or param, division by
// zero, INT64_MIN / -1, shift counts outside 0..63, signed overflow, integer-only operators on
// floats, a family index outside a family) is an error message, never undefined behaviour.
// Returns the empty string on success.
std::string evaluate(const fb::ExprInstr* code, size_t length, const EvalEnv& env, Value* out);
std::string evaluate(const fb::Expr* expr, const EvalEnv& env, Value* out);

// The bits of `v` stored as `type` (little-endian, in the low bytes) and their size. Integers
// out of the type's range and non-finite or non-integral floats going into an integer type
// are errors; `truncate` allows a float's fraction to be dropped (kernel arguments computed
// in float arithmetic), bindings are strict.
std::string encode_scalar(const Value& v, fb::ScalarType type, bool truncate, uint64_t* bits);

// A bound ScalarValue as a Value of `type` (rounded to f32 for an f32 param, so expressions
// see what the kernel sees); empty string or why it does not fit.
std::string convert_binding(const ScalarValue& v, fb::ScalarType type, Value* out);

const char* scalar_type_name(fb::ScalarType type);

// "file:line:col", or empty when `loc` is absent or has no line.
std::string where(const fb::Pipeline& p, const fb::SourceLoc* loc);

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
const fb::Node* find_collective(const fb::Pipeline& p);

// Params (bound, else default; unknown names and unbound params without default are errors),
// comms (every declared comm bound, rank within world size), bind checks, buffer sizes, and
// the bound buffers' names and sizes. Pointers are not looked at here.
Result<Plan> make_plan(const fb::Pipeline& p, const Bindings& bindings);

}  // namespace orch::rt

// orch's expression language, owned in one place: scalar types, typed operators, values,
// promotion and the typing of untyped literals, conversions, the evaluator, and the printer to
// C++ (host code for --emit=cuda, device code for generated kernels). docs/language.md
// ("Arithmetic") states the rules; every operation is implemented once, in expr/ops.h, which
// this library compiles for the host and the printer emits as the preamble of printed code.
//
// Dependency-free C++17: the compiler, the lowering, the artifact reader, the runtime and the
// tools all use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orch::expr {

// ---- scalar types ------------------------------------------------------------------------------

// The order is the artifact's (fb::ScalarType) and ops.h's (orch_type).
enum class ScalarType : uint8_t { U8, U16, U32, U64, I8, I16, I32, I64, F16, BF16, F32, F64, Bool };
constexpr int kScalarTypeCount = 13;

std::optional<ScalarType> parse_scalar_type(std::string_view name);
const char* to_string(ScalarType t);  // "u32"
uint32_t size_of(ScalarType t);       // bytes of one element (bool: 1)
bool is_float(ScalarType t);
bool is_signed(ScalarType t);   // signed integers and floats
bool is_integer(ScalarType t);  // u8..i64 (not bool)
uint32_t bit_width(ScalarType t);  // of an integer type; bool: 1
bool valid(ScalarType t);          // inside the enum (for values read from files)

// ---- operators ---------------------------------------------------------------------------------

// In the order of the artifact's ExprOp from Neg on (artifact/expr_ops.h proves the mapping).
enum class Op : uint8_t {
  Neg, Not, BitNot,                               // unary
  Add, Sub, Mul, Div, Mod, Shl, Shr,              // binary
  Lt, Le, Gt, Ge, Eq, Ne, BitAnd, BitXor, BitOr, And, Or,
  Min, Max, CeilDiv                               // calls
};
constexpr int kOpCount = 24;

enum class OpForm : uint8_t { Unary, Binary, Call };
OpForm form(Op op);
int arity(Op op);
const char* symbol(Op op);  // "-", "<<", "min", ...
const char* name(Op op);    // "Neg", "Shl", ... (the artifact's enum names)
// Binding strength of binary operators, 1 (||) to 10 (* / %); unary operators 11, calls 12.
int precedence(Op op);
bool is_comparison(Op op);  // == != < <= > >=
bool is_logical(Op op);     // && || !
bool is_integer_only(Op op);  // % << >> & | ^ ~ ceil_div
bool is_valid(Op op);
// The operator a parsed token names (the parser keeps text only until it is mapped here).
std::optional<Op> unary_op(std::string_view text);
std::optional<Op> binary_op(std::string_view text);
std::optional<Op> call_op(std::string_view name);  // min, max, ceil_div
// Unary `+`, which leaves its operand as it is (no operator).
bool is_unary_plus(std::string_view text);

// ---- values ------------------------------------------------------------------------------------

// A scalar of a type. `bits` holds integers as 64-bit two's complement (signed types sign-
// extended, unsigned zero-extended: u64 uses all 64 bits), bool as 0 or 1, and floats as the
// bits of an IEEE double that holds the value exactly (every f16, bf16 and f32 is a double).
struct Value {
  ScalarType type = ScalarType::I64;
  uint64_t bits = 0;

  static Value of_int(ScalarType t, int64_t v);    // no range check
  static Value of_uint(ScalarType t, uint64_t v);  // no range check
  static Value of_double(ScalarType t, double v);  // no rounding: v must be of type t
  static Value of_bool(bool b);
  // One element as stored in memory (little-endian low bytes; f16/bf16/f32 as their bits).
  static Value from_storage(ScalarType t, uint64_t storage);

  bool is_float() const { return expr::is_float(type); }
  int64_t i64() const { return static_cast<int64_t>(bits); }
  uint64_t u64() const { return bits; }
  double f64() const;
  bool negative() const;
  uint64_t magnitude() const;  // of an integer
  bool truthy() const;
  double as_double() const;  // the nearest double (for messages and param_as_double)
  uint64_t storage() const;  // the bits of one element of `type` in memory
  std::string to_string() const;  // "65536", "-1", "0.1", "inf", "true"
  bool operator==(const Value& o) const { return type == o.type && bits == o.bits; }
  bool operator!=(const Value& o) const { return !(*this == o); }
};

// ---- errors ------------------------------------------------------------------------------------

// The codes printed code returns (ops.h's orch_error_code) and device code reports.
enum class ErrorKind : uint8_t { None, Overflow, DivisionByZero, ShiftCount, Conversion, Invalid };
const char* to_string(ErrorKind k);  // "overflow", "division by zero", ...

// A value or an error with its message ("overflow: 65536 * 65536 does not fit u32").
struct Outcome {
  Value value;
  ErrorKind error = ErrorKind::None;
  std::string message;
  bool ok() const { return error == ErrorKind::None; }
  static Outcome of(Value v) { return {v, ErrorKind::None, {}}; }
  static Outcome fail(ErrorKind k, std::string m) { return {Value{}, k, std::move(m)}; }
};

// ---- conversions -------------------------------------------------------------------------------

// convert(value, T): binding, defaults, value arguments, shapes, fill values, assignments.
// Exact or refused: integers within range, integers into floats only when exact, floats into
// floats rounded to nearest (finite must stay finite), floats into integers only when finite,
// integral and within range, 0 or 1 into bool.
Outcome convert(const Value& v, ScalarType to);
// An operand promoted to the type its operation computes in (integers exactly, integers into
// floats rounded to nearest, floats widened).
Outcome promote(const Value& v, ScalarType to);
// A double rounded to nearest in float type `t` (infinity when out of range).
double round_to(ScalarType t, double d);

// ---- typing ------------------------------------------------------------------------------------

// The type two typed operands of an arithmetic, bitwise, min/max or ceil_div operation compute
// in: bool counts as i32; any float: the float (the wider, f16 with bf16: f32); integers of one
// signedness: the wider; mixed: the smallest signed type holding both (u64 with a signed: i64).
ScalarType arithmetic_type(ScalarType a, ScalarType b);

// Untyped literal expressions (made only of literals) take the type their use site expects.
enum class Literal : uint8_t { None, Int, Float };
struct Operand {
  ScalarType type = ScalarType::I64;  // for an untyped literal: the type it has until settled
  Literal literal = Literal::None;
};

struct Typing {
  Operand result;
  // Untyped operands that settle here, into this type (nullopt: the operand keeps its type).
  std::optional<ScalarType> settle[2];
  std::string error;  // a type error ("`%` needs integer operands"), empty if none
};
Typing type_unary(Op op, Operand a);
Typing type_binary(Op op, Operand a, Operand b);
// The type an untyped literal expression of this kind computes in where `expected` is expected:
// the expected type, except that float literals meeting an integer type compute in f64 (and
// are converted at the use site), and bool use sites compute in i64.
ScalarType settle_type(Literal kind, ScalarType expected);
// The literal constant `v` (an integer of type i64 or u64, or an f64) given type `t`: integers
// must be exactly representable, floats round to nearest (an error if that overflows).
Outcome settle_literal(const Value& v, ScalarType t);

// ---- operations --------------------------------------------------------------------------------

// One operator on typed values; the result type follows the typing rules above.
Outcome apply(Op op, const Value& a);
Outcome apply(Op op, const Value& a, const Value& b);
// The result type of `op` on operands of these types, or nullopt (and `why`) if not allowed.
std::optional<ScalarType> result_type(Op op, ScalarType a, std::string* why = nullptr);
std::optional<ScalarType> result_type(Op op, ScalarType a, ScalarType b, std::string* why = nullptr);

// ---- postfix code ------------------------------------------------------------------------------

enum class InstrKind : uint8_t { Const, Param, DeviceScalar, FamilyIndex, Rank, WorldSize, Operator };

// One postfix instruction: a leaf pushes a value, an operator pops its operands and pushes its
// result. `type` is the value's type (for an operator: its result).
struct Instr {
  InstrKind kind = InstrKind::Const;
  Op op = Op::Neg;  // Operator
  ScalarType type = ScalarType::I64;
  int32_t ref = -1;  // Param: param index; DeviceScalar: buffer index
  Value value;       // Const
};

// Checks stack discipline and that every operator's type is the one the rules give its operands.
// Empty, or "instruction 3 (Add): ..." for the first problem.
std::string verify(const Instr* code, size_t n);

struct Evaluation {
  enum class State : uint8_t { Known, Unknown, Failed } state = State::Known;
  Value value;          // Known
  ScalarType type = ScalarType::I64;  // the result's type (Known and Unknown)
  ErrorKind error = ErrorKind::None;  // Failed
  std::string message;  // Failed
  size_t at = 0;        // Failed: the instruction that failed
  bool known() const { return state == State::Known; }
  bool failed() const { return state == State::Failed; }
};
// The value of a leaf, or nullopt where it is not known (the checker's device scalars, params
// without defaults); the value must have the instruction's type.
using LeafValue = std::function<std::optional<Value>(const Instr&)>;
// The evaluator: every operator through apply(), && and || short-circuiting. An error in an
// operand is the result's error; unknown operands make the result unknown, except where the
// error does not depend on them (integer division by a known zero, a known bad shift count).
Evaluation evaluate(const Instr* code, size_t n, const LeafValue& leaf);
inline Evaluation evaluate(const std::vector<Instr>& code, const LeafValue& leaf) {
  return evaluate(code.data(), code.size(), leaf);
}

// ---- printing as source text -------------------------------------------------------------------

// The names of leaves other than constants (params, device scalars, rank, ...).
using LeafName = std::function<std::string(const Instr&, size_t pc)>;
// The code as orch source text with as few parentheses as the precedences allow
// ("ceil_div(n, 256) * 2"); constants as literals ("0.5", "-1"). Empty if malformed.
std::string to_source(const Instr* code, size_t n, const LeafName& leaf);
inline std::string to_source(const std::vector<Instr>& code, const LeafName& leaf) {
  return to_source(code.data(), code.size(), leaf);
}

// ---- printing to C++ ---------------------------------------------------------------------------

// The helpers printed code calls (expr/ops.h), and a no-op `orch_expr_error(code)` device hook.
// Emit it once per generated file.
const char* preamble();
// "orch_u32": the type code printed code names a type by.
const char* type_code(ScalarType t);
// The C++ type values of `t` are computed in ("float" for f16), and stored in ("unsigned short"
// for f16: the bits).
const char* compute_type(ScalarType t);
const char* storage_type(ScalarType t);
// A leaf read from storage (a device scalar, a parameter holding f16 bits) as its compute type.
std::string from_storage(ScalarType t, const std::string& storage_expr);
// A C++ literal of `v`'s compute type, exact (floats in hexadecimal).
std::string literal(const Value& v);
// A leaf's C++ expression of its compute type (Param, DeviceScalar, FamilyIndex, Rank, WorldSize;
// constants are printed by the printer).
using LeafCode = std::function<std::string(const Instr&)>;
// C++ for the postfix `code`: an expression of type orch_v<K> (K its result type) that holds the
// value or the error code, the same on the host and on the device.
std::string print(const Instr* code, size_t n, const LeafCode& leaf);
inline std::string print(const std::vector<Instr>& code, const LeafCode& leaf) {
  return print(code.data(), code.size(), leaf);
}
// `value_code` (an orch_v of type `from`) converted to `to` as convert() does.
std::string print_convert(const std::string& value_code, ScalarType from, ScalarType to);

}  // namespace orch::expr

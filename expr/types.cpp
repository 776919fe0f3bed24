// Scalar types, operators and the typing rules (docs/language.md, "Arithmetic").
#include "expr/expr.h"

namespace orch::expr {

namespace {

struct TypeInfo {
  const char* name;
  uint32_t size;
  bool is_float;
  bool is_signed;
  uint32_t bits;
};
constexpr TypeInfo kTypes[kScalarTypeCount] = {
    {"u8", 1, false, false, 8},   {"u16", 2, false, false, 16}, {"u32", 4, false, false, 32},
    {"u64", 8, false, false, 64}, {"i8", 1, false, true, 8},    {"i16", 2, false, true, 16},
    {"i32", 4, false, true, 32},  {"i64", 8, false, true, 64},  {"f16", 2, true, true, 16},
    {"bf16", 2, true, true, 16},  {"f32", 4, true, true, 32},   {"f64", 8, true, true, 64},
    {"bool", 1, false, false, 1},
};
const TypeInfo& info(ScalarType t) {
  unsigned i = static_cast<unsigned>(t);
  return kTypes[i < static_cast<unsigned>(kScalarTypeCount) ? i : 0];
}

struct OpInfo {
  const char* symbol;
  const char* name;
  OpForm form;
  int precedence;
};
constexpr OpInfo kOps[kOpCount] = {
    {"-", "Neg", OpForm::Unary, 11},        {"!", "Not", OpForm::Unary, 11},
    {"~", "BitNot", OpForm::Unary, 11},     {"+", "Add", OpForm::Binary, 9},
    {"-", "Sub", OpForm::Binary, 9},        {"*", "Mul", OpForm::Binary, 10},
    {"/", "Div", OpForm::Binary, 10},       {"%", "Mod", OpForm::Binary, 10},
    {"<<", "Shl", OpForm::Binary, 8},       {">>", "Shr", OpForm::Binary, 8},
    {"<", "Lt", OpForm::Binary, 7},         {"<=", "Le", OpForm::Binary, 7},
    {">", "Gt", OpForm::Binary, 7},         {">=", "Ge", OpForm::Binary, 7},
    {"==", "Eq", OpForm::Binary, 6},        {"!=", "Ne", OpForm::Binary, 6},
    {"&", "BitAnd", OpForm::Binary, 5},     {"^", "BitXor", OpForm::Binary, 4},
    {"|", "BitOr", OpForm::Binary, 3},      {"&&", "And", OpForm::Binary, 2},
    {"||", "Or", OpForm::Binary, 1},        {"min", "Min", OpForm::Call, 12},
    {"max", "Max", OpForm::Call, 12},       {"ceil_div", "CeilDiv", OpForm::Call, 12},
};
const OpInfo& info(Op op) {
  unsigned i = static_cast<unsigned>(op);
  return kOps[i < static_cast<unsigned>(kOpCount) ? i : 0];
}

std::string quoted(Op op) { return std::string("`") + symbol(op) + "`"; }

}  // namespace

std::optional<ScalarType> parse_scalar_type(std::string_view name) {
  for (int i = 0; i < kScalarTypeCount; ++i)
    if (name == kTypes[i].name) return static_cast<ScalarType>(i);
  return std::nullopt;
}
const char* to_string(ScalarType t) { return valid(t) ? info(t).name : "?"; }
uint32_t size_of(ScalarType t) { return info(t).size; }
bool is_float(ScalarType t) { return info(t).is_float; }
bool is_signed(ScalarType t) { return info(t).is_signed; }
bool is_integer(ScalarType t) { return !info(t).is_float && t != ScalarType::Bool; }
uint32_t bit_width(ScalarType t) { return info(t).bits; }
bool valid(ScalarType t) { return static_cast<unsigned>(t) < static_cast<unsigned>(kScalarTypeCount); }

OpForm form(Op op) { return info(op).form; }
int arity(Op op) { return info(op).form == OpForm::Unary ? 1 : 2; }
const char* symbol(Op op) { return info(op).symbol; }
const char* name(Op op) { return info(op).name; }
int precedence(Op op) { return info(op).precedence; }
bool is_valid(Op op) { return static_cast<unsigned>(op) < static_cast<unsigned>(kOpCount); }
bool is_comparison(Op op) { return op >= Op::Lt && op <= Op::Ne; }
bool is_logical(Op op) { return op == Op::And || op == Op::Or || op == Op::Not; }
bool is_integer_only(Op op) {
  switch (op) {
    case Op::Mod:
    case Op::Shl:
    case Op::Shr:
    case Op::BitAnd:
    case Op::BitXor:
    case Op::BitOr:
    case Op::BitNot:
    case Op::CeilDiv: return true;
    default: return false;
  }
}

std::optional<Op> unary_op(std::string_view text) {
  if (text == "-") return Op::Neg;
  if (text == "!") return Op::Not;
  if (text == "~") return Op::BitNot;
  return std::nullopt;
}
bool is_unary_plus(std::string_view text) { return text == "+"; }

std::optional<Op> binary_op(std::string_view text) {
  for (int i = 0; i < kOpCount; ++i)
    if (kOps[i].form == OpForm::Binary && text == kOps[i].symbol) return static_cast<Op>(i);
  return std::nullopt;
}
std::optional<Op> call_op(std::string_view name) {
  for (int i = 0; i < kOpCount; ++i)
    if (kOps[i].form == OpForm::Call && name == kOps[i].symbol) return static_cast<Op>(i);
  return std::nullopt;
}

const char* to_string(ErrorKind k) {
  switch (k) {
    case ErrorKind::None: return "no error";
    case ErrorKind::Overflow: return "overflow";
    case ErrorKind::DivisionByZero: return "division by zero";
    case ErrorKind::ShiftCount: return "shift count";
    case ErrorKind::Conversion: return "conversion";
    case ErrorKind::Invalid: return "invalid operation";
  }
  return "?";
}

// ---- typing --------------------------------------------------------------------------------------

ScalarType arithmetic_type(ScalarType a, ScalarType b) {
  if (a == ScalarType::Bool) a = ScalarType::I32;
  if (b == ScalarType::Bool) b = ScalarType::I32;
  if (is_float(a) || is_float(b)) {
    if (!is_float(a)) return b;
    if (!is_float(b)) return a;
    if (a == b) return a;
    if (a == ScalarType::F64 || b == ScalarType::F64) return ScalarType::F64;
    return ScalarType::F32;  // f32 with f16 or bf16, and f16 with bf16
  }
  const uint32_t wa = bit_width(a), wb = bit_width(b);
  if (is_signed(a) == is_signed(b)) return wa >= wb ? a : b;
  const uint32_t ws = is_signed(a) ? wa : wb, wu = is_signed(a) ? wb : wa;
  const uint32_t need = ws > 2 * wu ? ws : 2 * wu;  // a signed type holding every unsigned value
  if (need <= 8) return ScalarType::I8;
  if (need <= 16) return ScalarType::I16;
  if (need <= 32) return ScalarType::I32;
  return ScalarType::I64;  // u64 with a signed type: the u64 operand must fit i64
}

namespace {

// A literal operand keeps its own type when nothing else decides one (i64, u64 past INT64_MAX,
// f64).
Typing settle_own(Typing t, Operand a, Operand b) {
  if (a.literal != Literal::None) t.settle[0] = a.type;
  if (b.literal != Literal::None) t.settle[1] = b.type;
  return t;
}

bool floaty(Operand a) { return a.literal == Literal::Float || (a.literal == Literal::None && is_float(a.type)); }

}  // namespace

Typing type_unary(Op op, Operand a) {
  Typing t;
  if (op == Op::Not) {
    t.result = {ScalarType::Bool, Literal::None};
    return settle_own(t, a, Operand{});
  }
  if (op == Op::BitNot && floaty(a)) {
    t.error = "`~` needs an integer operand";
    return t;
  }
  if (a.literal != Literal::None) {
    t.result = a;  // stays untyped: -1 and ~0 take the type of what they meet
    return t;
  }
  t.result = {a.type == ScalarType::Bool ? ScalarType::I32 : a.type, Literal::None};
  return t;
}

Typing type_binary(Op op, Operand a, Operand b) {
  Typing t;
  if (is_integer_only(op) && (floaty(a) || floaty(b))) {
    t.error = quoted(op) + " needs integer operands";
    return t;
  }
  if (op == Op::Shl || op == Op::Shr) {
    // The result has the left operand's type; the count keeps its own.
    if (a.literal != Literal::None) t.result = {a.type, Literal::Int};
    else t.result = {a.type == ScalarType::Bool ? ScalarType::I32 : a.type, Literal::None};
    if (b.literal != Literal::None) t.settle[1] = b.type;
    return t;
  }
  if (op == Op::And || op == Op::Or) {
    t.result = {ScalarType::Bool, Literal::None};
    return settle_own(t, a, b);
  }
  const bool la = a.literal != Literal::None, lb = b.literal != Literal::None;
  if (is_comparison(op)) {
    t.result = {ScalarType::Bool, Literal::None};
    if (la && lb) {
      // Exact comparison: integers keep their own types; with a float both compute in f64.
      if (a.literal == Literal::Float || b.literal == Literal::Float) {
        t.settle[0] = t.settle[1] = ScalarType::F64;
        return t;
      }
      return settle_own(t, a, b);
    }
  } else if (la && lb) {
    const bool f = a.literal == Literal::Float || b.literal == Literal::Float;
    t.result = {f ? ScalarType::F64 : ScalarType::I64, f ? Literal::Float : Literal::Int};
    return t;
  }
  if (la || lb) {
    // A literal meeting a typed operand takes its type; a float literal meeting an integer
    // makes the operation f64.
    Operand lit = la ? a : b;
    ScalarType typed = la ? b.type : a.type;
    if (typed == ScalarType::Bool) typed = ScalarType::I32;
    ScalarType into = typed;
    if (lit.literal == Literal::Float && !is_float(typed)) into = ScalarType::F64;
    t.settle[la ? 0 : 1] = into;
    if (!is_comparison(op)) t.result = {arithmetic_type(into, typed), Literal::None};
    return t;
  }
  if (!is_comparison(op)) t.result = {arithmetic_type(a.type, b.type), Literal::None};
  return t;
}

ScalarType settle_type(Literal kind, ScalarType expected) {
  if (kind == Literal::Float) return is_float(expected) ? expected : ScalarType::F64;
  if (expected == ScalarType::Bool) return ScalarType::I64;
  return expected;
}

std::optional<ScalarType> result_type(Op op, ScalarType a, std::string* why) {
  if (form(op) != OpForm::Unary) {
    if (why) *why = std::string("`") + symbol(op) + "` takes two operands";
    return std::nullopt;
  }
  Typing t = type_unary(op, Operand{a, Literal::None});
  if (!t.error.empty()) {
    if (why) *why = t.error;
    return std::nullopt;
  }
  return t.result.type;
}

std::optional<ScalarType> result_type(Op op, ScalarType a, ScalarType b, std::string* why) {
  if (form(op) == OpForm::Unary) {
    if (why) *why = std::string("`") + symbol(op) + "` takes one operand";
    return std::nullopt;
  }
  Typing t = type_binary(op, Operand{a, Literal::None}, Operand{b, Literal::None});
  if (!t.error.empty()) {
    if (why) *why = t.error;
    return std::nullopt;
  }
  return t.result.type;
}

}  // namespace orch::expr

// The printer: postfix code as C++ that calls ops.h's helpers, for host and device alike.
#include <cmath>
#include <cstdio>
#include <vector>

#include "expr/expr.h"

namespace orch::expr {

namespace {

const char* const kPreamble =
#include "expr/ops_text.inc"
    ;

struct Printed {
  std::string code;
  ScalarType type;
};

std::string promoted(const Printed& x, ScalarType to) {
  if (x.type == to) return x.code;
  return std::string("orch_promote<") + type_code(to) + ", " + type_code(x.type) + ">(" + x.code + ")";
}

const char* cmp_code(Op op) {
  switch (op) {
    case Op::Lt: return "orch_lt";
    case Op::Le: return "orch_le";
    case Op::Gt: return "orch_gt";
    case Op::Ge: return "orch_ge";
    case Op::Eq: return "orch_eq";
    default: return "orch_ne";
  }
}

const char* function_of(Op op) {
  switch (op) {
    case Op::Neg: return "orch_neg";
    case Op::BitNot: return "orch_bitnot";
    case Op::Add: return "orch_add";
    case Op::Sub: return "orch_sub";
    case Op::Mul: return "orch_mul";
    case Op::Div: return "orch_div";
    case Op::Mod: return "orch_mod";
    case Op::Shl: return "orch_shl";
    case Op::Shr: return "orch_shr";
    case Op::BitAnd: return "orch_bitand";
    case Op::BitXor: return "orch_bitxor";
    case Op::BitOr: return "orch_bitor";
    case Op::And: return "orch_and";
    case Op::Or: return "orch_or";
    case Op::Not: return "orch_not";
    case Op::Min: return "orch_min";
    case Op::Max: return "orch_max";
    case Op::CeilDiv: return "orch_ceil_div";
    default: return "orch_cmp";
  }
}

}  // namespace

const char* preamble() { return kPreamble; }

std::string to_source(const Instr* code, size_t n, const LeafName& leaf) {
  struct Part {
    std::string text;
    int precedence;  // 20: a leaf, a call or a unary operation
  };
  std::vector<Part> stack;
  for (size_t pc = 0; pc < n; ++pc) {
    const Instr& in = code[pc];
    if (in.kind == InstrKind::Const) {
      std::string s = in.value.to_string();
      if (in.value.is_float() && s.find_first_of(".ein") == std::string::npos) s += ".0";
      stack.push_back({s, 20});
      continue;
    }
    if (in.kind != InstrKind::Operator) {
      stack.push_back({leaf(in, pc), 20});
      continue;
    }
    if (!is_valid(in.op) || stack.size() < static_cast<size_t>(arity(in.op))) return {};
    if (form(in.op) == OpForm::Unary) {
      Part& x = stack.back();
      // Parenthesize anything but a plain leaf, and a leaf that starts with '-' ("-(-1)").
      const bool wrap = x.precedence < 20 || x.text.empty() || x.text[0] == '-';
      x.text = symbol(in.op) + (wrap ? "(" + x.text + ")" : x.text);
      x.precedence = 20;
      continue;
    }
    Part b = std::move(stack.back());
    stack.pop_back();
    Part& a = stack.back();
    if (form(in.op) == OpForm::Call) {
      a.text = std::string(symbol(in.op)) + "(" + a.text + ", " + b.text + ")";
      a.precedence = 20;
      continue;
    }
    const int prec = precedence(in.op);
    // Left-associative: the right operand needs parentheses at equal strength too.
    std::string left = a.precedence < prec ? "(" + a.text + ")" : a.text;
    std::string right = b.precedence <= prec ? "(" + b.text + ")" : b.text;
    a.text = left + " " + symbol(in.op) + " " + right;
    a.precedence = prec;
  }
  if (stack.size() != 1) return {};
  return stack.back().text;
}

const char* type_code(ScalarType t) {
  static const char* const codes[kScalarTypeCount] = {
      "orch_u8", "orch_u16", "orch_u32", "orch_u64", "orch_i8", "orch_i16", "orch_i32",
      "orch_i64", "orch_f16", "orch_bf16", "orch_f32", "orch_f64", "orch_bool"};
  return valid(t) ? codes[static_cast<int>(t)] : "orch_i64";
}

const char* compute_type(ScalarType t) {
  static const char* const names[kScalarTypeCount] = {
      "unsigned char", "unsigned short", "unsigned int", "unsigned long long", "signed char",
      "short",         "int",            "long long",    "float",              "float",
      "float",         "double",         "bool"};
  return valid(t) ? names[static_cast<int>(t)] : "long long";
}

const char* storage_type(ScalarType t) {
  if (t == ScalarType::F16 || t == ScalarType::BF16) return "unsigned short";
  return compute_type(t);
}

std::string from_storage(ScalarType t, const std::string& storage_expr) {
  if (t == ScalarType::F16 || t == ScalarType::BF16)
    return std::string("orch_from_storage<") + type_code(t) + ">(" + storage_expr + ")";
  return storage_expr;
}

std::string literal(const Value& v) {
  const ScalarType t = v.type;
  if (t == ScalarType::Bool) return v.bits ? "true" : "false";
  if (is_float(t)) {
    const bool f = t != ScalarType::F64;
    const double d = v.f64();
    std::string s;
    if (std::isnan(d)) s = "orch_bits_double(0x7ff8000000000000ull)";
    else if (std::isinf(d)) s = d > 0 ? "orch_inf()" : "(-orch_inf())";
    else {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%a", d);  // exact
      return std::string(buf[0] == '-' ? "(" : "") + buf + (f ? "f" : "") + (buf[0] == '-' ? ")" : "");
    }
    return f ? "static_cast<float>(" + s + ")" : s;
  }
  if (!v.negative()) {
    const std::string digits = std::to_string(v.bits);
    if (t == ScalarType::U64) return digits + "ull";
    if (t == ScalarType::I64) return digits + "ll";
    if (is_signed(t)) return digits;
    return digits + "u";
  }
  // Negative: the most negative value has no positive literal of its type.
  const uint64_t m = v.magnitude();
  const std::string suffix = t == ScalarType::I64 ? "ll" : "";
  if (m == (uint64_t(1) << (bit_width(t) - 1)))
    return "(-" + std::to_string(m - 1) + suffix + " - 1)";
  return "(-" + std::to_string(m) + suffix + ")";
}

std::string print(const Instr* code, size_t n, const LeafCode& leaf) {
  std::vector<Printed> stack;
  for (size_t pc = 0; pc < n; ++pc) {
    const Instr& in = code[pc];
    const std::string tc = type_code(in.type);
    if (in.kind != InstrKind::Operator) {
      const std::string v = in.kind == InstrKind::Const ? literal(in.value) : leaf(in);
      stack.push_back({"orch_ok<" + tc + ">(" + v + ")", in.type});
      continue;
    }
    if (stack.size() < static_cast<size_t>(arity(in.op))) return "/* malformed expression */";
    const std::string fn = function_of(in.op);
    if (arity(in.op) == 1) {
      Printed a = stack.back();
      stack.pop_back();
      if (in.op == Op::Not) stack.push_back({fn + "<" + type_code(a.type) + ">(" + a.code + ")", in.type});
      else stack.push_back({fn + "<" + tc + ">(" + promoted(a, in.type) + ")", in.type});
      continue;
    }
    Printed b = stack.back();
    stack.pop_back();
    Printed a = stack.back();
    stack.pop_back();
    const std::string ta = type_code(a.type), tb = type_code(b.type);
    std::string out;
    if (is_comparison(in.op))
      out = fn + "<" + ta + ", " + tb + ">(" + cmp_code(in.op) + ", " + a.code + ", " + b.code + ")";
    else if (in.op == Op::And || in.op == Op::Or)
      out = fn + "<" + ta + ", " + tb + ">(" + a.code + ", " + b.code + ")";
    else if (in.op == Op::Shl || in.op == Op::Shr)
      out = fn + "<" + tc + ", " + tb + ">(" + promoted(a, in.type) + ", " + b.code + ")";
    else
      out = fn + "<" + tc + ">(" + promoted(a, in.type) + ", " + promoted(b, in.type) + ")";
    stack.push_back({out, in.type});
  }
  if (stack.size() != 1) return "/* malformed expression */";
  return stack.back().code;
}

std::string print_convert(const std::string& value_code, ScalarType from, ScalarType to) {
  if (from == to) return value_code;
  return std::string("orch_convert<") + type_code(to) + ", " + type_code(from) + ">(" + value_code + ")";
}

}  // namespace orch::expr

#include "expr/evaluate_real.h"

#include <cmath>

namespace orch::expr {

bool evaluate_real(const std::vector<Instr>& code, const LeafReal& leaf, double* out, std::string* error) {
  std::vector<double> stack;
  for (const Instr& in : code) {
    if (in.kind != InstrKind::Operator) {
      std::optional<double> v;
      if (in.kind == InstrKind::Const) v = in.value.as_double();
      else v = leaf(in);
      if (!v) {
        *error = "a value it needs is not known";
        return false;
      }
      stack.push_back(*v);
      continue;
    }
    const int n = arity(in.op);
    if (static_cast<int>(stack.size()) < n || n < 1 || n > 2) {
      *error = "malformed expression";
      return false;
    }
    const double b = stack.back();
    const double a = n == 2 ? stack[stack.size() - 2] : 0;
    stack.resize(stack.size() - static_cast<size_t>(n));
    const bool integer = is_integer(in.type);
    double r = 0;
    switch (in.op) {
      case Op::Neg: r = -b; break;
      case Op::Add: r = a + b; break;
      case Op::Sub: r = a - b; break;
      case Op::Mul: r = a * b; break;
      case Op::Div:
        if (b == 0) {
          *error = "division by zero";
          return false;
        }
        r = integer ? std::trunc(a / b) : a / b;
        break;
      case Op::Mod:
        if (b == 0) {
          *error = "division by zero";
          return false;
        }
        r = std::fmod(a, b);
        break;
      case Op::Shl: r = a * std::ldexp(1.0, static_cast<int>(b)); break;
      case Op::Shr: r = std::floor(a / std::ldexp(1.0, static_cast<int>(b))); break;
      case Op::Min: r = std::fmin(a, b); break;  // a NaN operand gives the other, as in ops.h
      case Op::Max: r = std::fmax(a, b); break;
      case Op::CeilDiv:
        if (b == 0) {
          *error = "division by zero";
          return false;
        }
        r = std::ceil(a / b);
        break;
      case Op::Not:
      case Op::BitNot:
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge:
      case Op::Eq:
      case Op::Ne:
      case Op::BitAnd:
      case Op::BitXor:
      case Op::BitOr:
      case Op::And:
      case Op::Or:
        *error = std::string("`") + symbol(in.op) + "` is not arithmetic";
        return false;
    }
    stack.push_back(r);
  }
  if (stack.size() != 1) {
    *error = "malformed expression";
    return false;
  }
  *out = stack[0];
  return true;
}

}  // namespace orch::expr

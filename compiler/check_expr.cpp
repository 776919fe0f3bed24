#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>

#include "compiler/checker.h"

namespace orch::detail {

namespace {

ir::Expr make(ir::ExprKind kind, const SourceRange& loc) {
  ir::Expr e;
  e.kind = kind;
  e.loc = loc;
  return e;
}

// C-like arithmetic conversions, with untyped literals taking the other side's type.
void combine_types(const ir::Expr& a, const ir::Expr& b, ir::Expr& out) {
  if (a.is_literal && b.is_literal) {
    out.is_literal = true;
    out.type = (ir::is_float(a.type) || ir::is_float(b.type)) ? ir::ScalarType::F64
                                                               : ir::ScalarType::I64;
    return;
  }
  const ir::Expr& typed = a.is_literal ? b : a;
  const ir::Expr& other = a.is_literal ? a : b;
  ir::ScalarType t = typed.type;
  ir::ScalarType o = other.type;
  if (ir::is_float(t) || ir::is_float(o)) {
    if (!ir::is_float(t)) t = other.is_literal ? ir::ScalarType::F64 : o;
    else if (ir::is_float(o) && !other.is_literal && ir::size_of(o) > ir::size_of(t)) t = o;
    out.type = t;
    return;
  }
  if (!other.is_literal && ir::size_of(o) > ir::size_of(t)) t = o;
  if (!other.is_literal && ir::size_of(o) == ir::size_of(t) && !ir::is_signed(o)) t = o;
  if (t == ir::ScalarType::Bool) t = ir::ScalarType::I32;
  out.type = t;
}

int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wrap_sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

int64_t to_int(double d) {
  if (!(d == d)) return 0;
  if (d >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (d <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

ir::Value int_value(int64_t i) { return {false, i, 0}; }

// Comparisons and min/max read the same in both domains.
template <class T>
std::optional<ir::Value> compare_or_select(const std::string& op, T x, T y) {
  if (op == "<") return int_value(x < y);
  if (op == "<=") return int_value(x <= y);
  if (op == ">") return int_value(x > y);
  if (op == ">=") return int_value(x >= y);
  if (op == "==") return int_value(x == y);
  if (op == "!=") return int_value(x != y);
  if (op != "min" && op != "max") return std::nullopt;
  T chosen = op == "min" ? std::min(x, y) : std::max(x, y);
  if constexpr (std::is_floating_point_v<T>) return ir::Value{true, 0, chosen};
  else return int_value(chosen);
}
ir::Value float_value(double f) { return {true, 0, f}; }

}  // namespace

bool value_fits(const ir::Value& v, ir::ScalarType t, std::string* why) {
  auto fail = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  if (ir::is_float(t)) {
    double d = v.as_double();
    double max = t == ir::ScalarType::F16   ? 65504.0
                 : t == ir::ScalarType::BF16 ? 3.3895313892515355e38
                 : t == ir::ScalarType::F32  ? 3.4028234663852886e38
                                             : std::numeric_limits<double>::max();
    if (std::isfinite(d) && std::fabs(d) > max) return fail("it is out of the range of " + std::string(ir::to_string(t)));
    return true;
  }
  if (v.is_float) {
    if (v.f != std::floor(v.f) || !std::isfinite(v.f))
      return fail(std::string(ir::to_string(t)) + " holds integers only");
  }
  int64_t i = v.is_float ? to_int(v.f) : v.i;
  if (t == ir::ScalarType::Bool) {
    if (i != 0 && i != 1) return fail("bool holds 0 or 1");
    return true;
  }
  uint32_t bits = ir::size_of(t) * 8;
  if (ir::is_signed(t)) {
    if (bits < 64) {
      int64_t lo = -(int64_t(1) << (bits - 1)), hi = (int64_t(1) << (bits - 1)) - 1;
      if (i < lo || i > hi) return fail("it is out of the range of " + std::string(ir::to_string(t)));
    }
  } else {
    if (i < 0) return fail(std::string(ir::to_string(t)) + " is unsigned");
    if (bits < 64 && static_cast<uint64_t>(i) > ((uint64_t(1) << bits) - 1))
      return fail("it is out of the range of " + std::string(ir::to_string(t)));
  }
  return true;
}

std::optional<ir::Expr> Checker::expr(const ast::Expr& e, ExprContext ctx,
                                      const BodyContext* body) {
  switch (e.kind) {
    case ast::ExprKind::Int: {
      ir::Expr out = make(ir::ExprKind::Const, e.loc);
      out.is_literal = true;
      out.type = ir::ScalarType::I64;
      if (e.int_value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        diags_.error("E0002", e.loc, "integer literal does not fit in 63 bits");
        return std::nullopt;
      }
      out.value = int_value(static_cast<int64_t>(e.int_value));
      return out;
    }
    case ast::ExprKind::Float: {
      ir::Expr out = make(ir::ExprKind::Const, e.loc);
      out.is_literal = true;
      out.type = ir::ScalarType::F64;
      out.value = float_value(e.float_value);
      return out;
    }
    case ast::ExprKind::Bool: {
      ir::Expr out = make(ir::ExprKind::Const, e.loc);
      out.type = ir::ScalarType::Bool;
      out.value = int_value(static_cast<int64_t>(e.int_value));
      return out;
    }
    case ast::ExprKind::Name: {
      const std::string& name = e.text;
      if (body && !body->family_index.empty() && name == body->family_index) {
        if (ctx != ExprContext::Host && ctx != ExprContext::Device) {
          diags_.error("E0115", e.loc, "family index `" + name + "` is not a constant");
          return std::nullopt;
        }
        ir::Expr out = make(ir::ExprKind::FamilyIndex, e.loc);
        out.type = ir::ScalarType::U32;
        out.op = name;
        return out;
      }
      const Symbol* sym = lookup(name);
      if (!sym) {
        diags_.error("E0101", e.loc, "`" + name + "` is not declared");
        return std::nullopt;
      }
      switch (sym->kind) {
        case SymbolKind::Builtin: {
          bool is_rank = name == "rank";
          if (program_->comms.empty()) {
            diags_.error("E0114", e.loc,
                         "`" + name + "` comes from the bound communicator, but this pipeline "
                                      "declares no `comm`");
            return std::nullopt;
          }
          if (ctx == ExprContext::Constant || ctx == ExprContext::ParamDefault ||
              (is_rank && ctx == ExprContext::Size)) {
            diags_.error("E0115", e.loc, "`" + name + "` is not known " +
                                             (ctx == ExprContext::Size ? "when buffers are sized"
                                                                       : "at compile time"));
            return std::nullopt;
          }
          program_->uses_rank = true;
          ir::Expr out = make(is_rank ? ir::ExprKind::Rank : ir::ExprKind::WorldSize, e.loc);
          out.type = ir::ScalarType::U32;
          return out;
        }
        case SymbolKind::Param: {
          if (ctx == ExprContext::Constant) {
            diags_.error("E0115", e.loc, "this must be a constant, but `" + name + "` is a param");
            return std::nullopt;
          }
          ir::Expr out = make(ir::ExprKind::Param, e.loc);
          out.ref = sym->index;
          out.type = program_->params[sym->index].type;
          return out;
        }
        case SymbolKind::Buffer: {
          const ir::Buffer& b = program_->buffers[sym->index];
          if (!b.is_scalar()) {
            diags_.error(in_condition_ ? "E0406" : "E0109", e.loc,
                         "`" + name + "` is an array buffer; expressions read params and device "
                                      "scalars (buffers without a size)");
            return std::nullopt;
          }
          if (ctx != ExprContext::Device) {
            if (ctx == ExprContext::Host)
              diags_.error("E0108", e.loc,
                           "`" + name + "` is a device scalar, read on the GPU, but this value is "
                                        "computed on the host" +
                               (in_value_arg_ ? "; pass it to an `in` parameter" : ""));
            else
              diags_.error("E0115", e.loc, "`" + name + "` is a device scalar; this must be known "
                                                        "on the host");
            return std::nullopt;
          }
          if (b.host) {
            // Mapped host memory is readable from the GPU, so it works as a scalar too.
          }
          ir::Expr out = make(ir::ExprKind::DeviceScalar, e.loc);
          out.ref = sym->index;
          out.type = b.elem;
          return out;
        }
        default:
          diags_.error("E0109", e.loc,
                       "`" + name + "` is " +
                           (sym->kind == SymbolKind::Kernel ? "a kernel"
                            : sym->kind == SymbolKind::Graph ? "a graph"
                                                             : "a comm") +
                           ", not a value");
          return std::nullopt;
      }
    }
    case ast::ExprKind::Unary: {
      auto operand = expr(*e.operands[0], ctx, body);
      if (!operand) return std::nullopt;
      ir::Expr out = make(ir::ExprKind::Unary, e.loc);
      out.op = e.text;
      out.type = operand->type;
      out.is_literal = operand->is_literal;
      if (e.text == "!") {
        out.type = ir::ScalarType::Bool;
        out.is_literal = false;
      } else if (e.text == "~" && ir::is_float(operand->type)) {
        diags_.error("E0109", e.loc, "`~` needs an integer operand");
        return std::nullopt;
      }
      if (e.text == "+") return operand;
      out.operands.push_back(std::move(*operand));
      return out;
    }
    case ast::ExprKind::Binary: {
      auto lhs = expr(*e.operands[0], ctx, body);
      auto rhs = expr(*e.operands[1], ctx, body);
      if (!lhs || !rhs) return std::nullopt;
      ir::Expr out = make(ir::ExprKind::Binary, e.loc);
      out.op = e.text;
      const std::string& op = e.text;
      if (op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=" ||
          op == "&&" || op == "||") {
        out.type = ir::ScalarType::Bool;
      } else {
        combine_types(*lhs, *rhs, out);
        bool int_only = op == "%" || op == "<<" || op == ">>" || op == "&" || op == "|" || op == "^";
        if (int_only && ir::is_float(out.type)) {
          diags_.error("E0109", e.loc, "`" + op + "` needs integer operands");
          return std::nullopt;
        }
        if ((op == "/" || op == "%") && rhs->kind == ir::ExprKind::Const && !rhs->value.is_float &&
            rhs->value.i == 0) {
          diags_.error("E0109", e.loc, "division by zero");
          return std::nullopt;
        }
      }
      out.operands.push_back(std::move(*lhs));
      out.operands.push_back(std::move(*rhs));
      return out;
    }
    case ast::ExprKind::Call: {
      const std::string& fn = e.text;
      if (fn == "dim3") {
        diags_.error("E0109", e.loc, "`dim3(...)` is a launch shape; it can only be a grid or a block");
        return std::nullopt;
      }
      if (fn != "min" && fn != "max" && fn != "ceil_div") {
        diags_.error("E0109", e.name_loc,
                     "unknown function `" + fn + "`; expressions may call min, max and ceil_div");
        return std::nullopt;
      }
      if (e.operands.size() != 2) {
        diags_.error("E0109", e.loc,
                     "`" + fn + "` takes 2 arguments, not " + std::to_string(e.operands.size()));
        return std::nullopt;
      }
      auto a = expr(*e.operands[0], ctx, body);
      auto b = expr(*e.operands[1], ctx, body);
      if (!a || !b) return std::nullopt;
      ir::Expr out = make(ir::ExprKind::Call, e.loc);
      out.op = fn;
      combine_types(*a, *b, out);
      if (fn == "ceil_div") {
        if (ir::is_float(out.type)) {
          diags_.error("E0109", e.loc, "`ceil_div` needs integer operands");
          return std::nullopt;
        }
        if (b->kind == ir::ExprKind::Const && !b->value.is_float && b->value.i == 0) {
          diags_.error("E0109", e.loc, "division by zero");
          return std::nullopt;
        }
      }
      out.operands.push_back(std::move(*a));
      out.operands.push_back(std::move(*b));
      return out;
    }
  }
  return std::nullopt;
}

std::optional<ir::Value> Checker::evaluate(const ir::Expr& e, std::optional<uint32_t> member) {
  switch (e.kind) {
    case ir::ExprKind::Const: return e.value;
    case ir::ExprKind::Param: {
      if (e.ref < 0 || static_cast<size_t>(e.ref) >= param_broken_.size() || param_broken_[e.ref])
        return std::nullopt;
      return program_->params[e.ref].default_evaluated;
    }
    case ir::ExprKind::FamilyIndex:
      if (member) return int_value(*member);
      return std::nullopt;
    case ir::ExprKind::DeviceScalar:
    case ir::ExprKind::Rank:
    case ir::ExprKind::WorldSize: return std::nullopt;
    case ir::ExprKind::Unary: {
      auto v = evaluate(e.operands[0], member);
      if (!v) return std::nullopt;
      if (e.op == "!") return int_value(v->as_double() == 0 ? 1 : 0);
      if (e.op == "~") return int_value(~v->i);
      if (v->is_float) return float_value(-v->f);
      return int_value(wrap_sub(0, v->i));
    }
    case ir::ExprKind::Binary:
    case ir::ExprKind::Call: {
      auto a = evaluate(e.operands[0], member);
      auto b = evaluate(e.operands[1], member);
      if (!a || !b) return std::nullopt;
      const std::string& op = e.op;
      bool fl = a->is_float || b->is_float;
      if (op == "&&") return int_value(a->as_double() != 0 && b->as_double() != 0);
      if (op == "||") return int_value(a->as_double() != 0 || b->as_double() != 0);
      if (fl) {
        double x = a->as_double(), y = b->as_double();
        if (op == "+") return float_value(x + y);
        if (op == "-") return float_value(x - y);
        if (op == "*") return float_value(x * y);
        if (op == "/") return y == 0 ? std::nullopt : std::optional<ir::Value>(float_value(x / y));
        return compare_or_select(op, x, y);
      }
      int64_t x = a->i, y = b->i;
      if (op == "+") return int_value(wrap_add(x, y));
      if (op == "-") return int_value(wrap_sub(x, y));
      if (op == "*") return int_value(wrap_mul(x, y));
      if (op == "/" || op == "%" || op == "ceil_div") {
        if (y == 0 || (x == std::numeric_limits<int64_t>::min() && y == -1)) return std::nullopt;
        if (op == "/") return int_value(x / y);
        if (op == "%") return int_value(x % y);
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) == (y < 0))) ++q;
        return int_value(q);
      }
      if (op == "<<") return int_value(y < 0 || y >= 64 ? 0 : static_cast<int64_t>(static_cast<uint64_t>(x) << y));
      if (op == ">>") return int_value(y < 0 || y >= 64 ? (x < 0 ? -1 : 0) : x >> y);
      if (op == "&") return int_value(x & y);
      if (op == "|") return int_value(x | y);
      if (op == "^") return int_value(x ^ y);
      return compare_or_select(op, x, y);
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> Checker::constant_uint(const ast::Expr& e, const std::string& what) {
  auto x = expr(e, ExprContext::Constant, nullptr);
  if (!x) return std::nullopt;
  auto v = evaluate(*x);
  if (!v) return std::nullopt;
  if (v->is_float || v->i < 0) {
    diags_.error("E0115", e.loc, what + " must be a non-negative integer");
    return std::nullopt;
  }
  return static_cast<uint64_t>(v->i);
}

std::string Checker::default_values_note(const ir::Expr& e) {
  std::set<int> params;
  std::vector<const ir::Expr*> stack{&e};
  while (!stack.empty()) {
    const ir::Expr* x = stack.back();
    stack.pop_back();
    if (x->kind == ir::ExprKind::Param) params.insert(x->ref);
    for (const ir::Expr& o : x->operands) stack.push_back(&o);
  }
  std::string out;
  for (int p : params) {
    const ir::Param& param = program_->params[p];
    if (!param.default_evaluated) continue;
    std::ostringstream v;
    if (param.default_evaluated->is_float) v << param.default_evaluated->f;
    else v << param.default_evaluated->i;
    out += (out.empty() ? "" : ", ") + param.name + " = " + v.str();
  }
  return out.empty() ? "" : " (with the default values " + out + ")";
}

}  // namespace orch::detail

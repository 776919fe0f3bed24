// Values, conversions and operators on the host: each dispatches on the runtime types to the
// one implementation in ops.h, and turns its error code into a message.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "expr/expr.h"
#include "expr/ops.h"

namespace orch::expr {

static_assert(static_cast<int>(ScalarType::U8) == orch_u8 && static_cast<int>(ScalarType::U16) == orch_u16 &&
                  static_cast<int>(ScalarType::U32) == orch_u32 && static_cast<int>(ScalarType::U64) == orch_u64 &&
                  static_cast<int>(ScalarType::I8) == orch_i8 && static_cast<int>(ScalarType::I16) == orch_i16 &&
                  static_cast<int>(ScalarType::I32) == orch_i32 && static_cast<int>(ScalarType::I64) == orch_i64 &&
                  static_cast<int>(ScalarType::F16) == orch_f16 && static_cast<int>(ScalarType::BF16) == orch_bf16 &&
                  static_cast<int>(ScalarType::F32) == orch_f32 && static_cast<int>(ScalarType::F64) == orch_f64 &&
                  static_cast<int>(ScalarType::Bool) == orch_bool,
              "expr::ScalarType and ops.h's orch_type list the types in one order");
static_assert(static_cast<int>(ErrorKind::Overflow) == orch_overflow &&
                  static_cast<int>(ErrorKind::DivisionByZero) == orch_div_by_zero &&
                  static_cast<int>(ErrorKind::ShiftCount) == orch_shift_count &&
                  static_cast<int>(ErrorKind::Conversion) == orch_conversion &&
                  static_cast<int>(ErrorKind::Invalid) == orch_invalid,
              "expr::ErrorKind and ops.h's error codes agree");

namespace {

template <int K>
using Tag = std::integral_constant<int, K>;

// Calls f(Tag<K>{}) for the type code of t.
template <class F>
decltype(auto) with_type(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::U8: return f(Tag<orch_u8>{});
    case ScalarType::U16: return f(Tag<orch_u16>{});
    case ScalarType::U32: return f(Tag<orch_u32>{});
    case ScalarType::U64: return f(Tag<orch_u64>{});
    case ScalarType::I8: return f(Tag<orch_i8>{});
    case ScalarType::I16: return f(Tag<orch_i16>{});
    case ScalarType::I32: return f(Tag<orch_i32>{});
    case ScalarType::I64: return f(Tag<orch_i64>{});
    case ScalarType::F16: return f(Tag<orch_f16>{});
    case ScalarType::BF16: return f(Tag<orch_bf16>{});
    case ScalarType::F32: return f(Tag<orch_f32>{});
    case ScalarType::F64: return f(Tag<orch_f64>{});
    case ScalarType::Bool: break;
  }
  return f(Tag<orch_bool>{});
}

template <int K>
orch_v<K> to_v(const Value& v) {
  typedef typename orch_t<K>::c C;
  if constexpr (orch_t<K>::is_float) return orch_ok<K>(static_cast<C>(v.f64()));
  else if constexpr (K == orch_bool) return orch_ok<K>(v.bits != 0);
  else return orch_ok<K>(static_cast<C>(v.bits));
}

template <int K>
Value from_v(const orch_v<K>& r) {
  const ScalarType t = static_cast<ScalarType>(K);
  if constexpr (orch_t<K>::is_float) return Value::of_double(t, static_cast<double>(r.v));
  else if constexpr (K == orch_bool) return Value::of_bool(r.v);
  else if constexpr (orch_t<K>::is_signed) return Value::of_int(t, static_cast<long long>(r.v));
  else return Value::of_uint(t, static_cast<unsigned long long>(r.v));
}

// The shortest decimal that rounds to d in float type t (f64: reads back as d).
std::string shortest_in(ScalarType t, double d);

std::string shortest(double d) { return shortest_in(ScalarType::F64, d); }

std::string shortest_in(ScalarType t, double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[40];
  if (std::rint(d) == d && std::fabs(d) < 1e21) {  // integral: all digits, no exponent
    std::snprintf(buf, sizeof buf, "%.0f", d);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (round_to(t, std::strtod(buf, nullptr)) == d) break;
  }
  return buf;
}

std::string largest_finite(ScalarType t) {
  switch (t) {
    case ScalarType::F16: return "65504";
    case ScalarType::BF16: return shortest(3.3895313892515355e38);
    case ScalarType::F32: return shortest(3.4028234663852886e38);
    default: return shortest(1.7976931348623157e308);
  }
}

// Why convert(v, to) failed, in words.
std::string conversion_message(const Value& v, ScalarType to) {
  const std::string tn = to_string(to), vs = v.to_string();
  if (to == ScalarType::Bool) return vs + " does not fit bool (it holds 0 or 1)";
  if (v.is_float()) {
    const double d = v.f64();
    if (is_float(to)) return vs + " does not fit " + tn + ": it rounds to infinity (largest " + largest_finite(to) + ")";
    if (!std::isfinite(d)) return vs + " does not fit " + tn;
    if (std::rint(d) != d) return vs + " is not an integer, and " + tn + " holds integers";
    return vs + " does not fit " + tn;
  }
  if (is_float(to)) {
    const double r = round_to(to, v.negative() ? -static_cast<double>(v.magnitude()) : static_cast<double>(v.magnitude()));
    if (std::isinf(r)) return vs + " does not fit " + tn + " (largest " + largest_finite(to) + ")";
    return vs + " is not exactly representable in " + tn + " (the nearest is " + shortest(r) + ")";
  }
  return vs + " does not fit " + tn;
}

std::string operation_text(Op op, const Value& a) { return std::string(symbol(op)) + a.to_string(); }
std::string operation_text(Op op, const Value& a, const Value& b) {
  if (form(op) == OpForm::Call) return std::string(symbol(op)) + "(" + a.to_string() + ", " + b.to_string() + ")";
  return a.to_string() + " " + symbol(op) + " " + b.to_string();
}

// The message for an error code from ops.h, about `what` computed in type t.
Outcome failure(int code, const std::string& what, ScalarType t) {
  const ErrorKind k = static_cast<ErrorKind>(code);
  switch (k) {
    case ErrorKind::Overflow: return Outcome::fail(k, "overflow: " + what + " does not fit " + to_string(t));
    case ErrorKind::DivisionByZero: return Outcome::fail(k, "division by zero: " + what);
    case ErrorKind::ShiftCount:
      return Outcome::fail(k, "shift count: " + what + " (the count must be 0 to " +
                                  std::to_string(bit_width(t) - 1) + " for " + to_string(t) + ")");
    case ErrorKind::Conversion: return Outcome::fail(k, "conversion: " + what + " does not fit " + to_string(t));
    default: return Outcome::fail(ErrorKind::Invalid, "invalid operation: " + what);
  }
}

template <int K>
Outcome result_of(const orch_v<K>& r, const std::string& what) {
  if (r.e) return failure(r.e, what, static_cast<ScalarType>(K));
  return Outcome::of(from_v<K>(r));
}

// An operand promoted to `to`, as ops.h promotes it.
Outcome promote_for(const Value& v, ScalarType to, const std::string& what) {
  if (v.type == to) return Outcome::of(v);
  Outcome o = promote(v, to);
  if (!o.ok())
    o.message = "overflow: " + what + ": " + v.to_string() + " (" + to_string(v.type) + ") does not fit " + to_string(to);
  return o;
}

}  // namespace

// ---- Value ---------------------------------------------------------------------------------------

Value Value::of_int(ScalarType t, int64_t v) { return Value{t, static_cast<uint64_t>(v)}; }
Value Value::of_uint(ScalarType t, uint64_t v) { return Value{t, v}; }
Value Value::of_double(ScalarType t, double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  return Value{t, u};
}
Value Value::of_bool(bool b) { return Value{ScalarType::Bool, b ? 1u : 0u}; }

Value Value::from_storage(ScalarType t, uint64_t s) {
  return with_type(t, [&](auto tag) {
    constexpr int K = decltype(tag)::value;
    typedef typename orch_t<K>::s S;
    S x;
    if constexpr (std::is_same_v<S, float>) {
      x = orch_bits_float(static_cast<unsigned>(s));
    } else if constexpr (std::is_same_v<S, double>) {
      x = orch_bits_double(s);
    } else if constexpr (K == orch_bool) {
      x = (s & 0xff) != 0;
    } else {
      x = static_cast<S>(s);
    }
    return from_v<K>(orch_ok<K>(orch_from_storage<K>(x)));
  });
}

double Value::f64() const {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
bool Value::negative() const {
  if (is_float()) return f64() < 0;
  return expr::is_signed(type) && i64() < 0;
}
uint64_t Value::magnitude() const { return negative() ? 0 - bits : bits; }
bool Value::truthy() const { return is_float() ? f64() != 0 : bits != 0; }
double Value::as_double() const {
  if (is_float()) return f64();
  if (negative()) return static_cast<double>(i64());
  return static_cast<double>(bits);
}
uint64_t Value::storage() const {
  return with_type(type, [&](auto tag) -> uint64_t {
    constexpr int K = decltype(tag)::value;
    const auto s = orch_to_storage<K>(to_v<K>(*this).v);
    if constexpr (std::is_same_v<decltype(s), const float>) return orch_float_bits(s);
    else if constexpr (std::is_same_v<decltype(s), const double>) return orch_double_bits(s);
    else if constexpr (orch_t<K>::is_signed) {
      // Two's complement in the type's width.
      const uint64_t u = static_cast<uint64_t>(static_cast<long long>(s));
      return size_of(type) == 8 ? u : u & ((uint64_t(1) << (8 * size_of(type))) - 1);
    } else {
      return static_cast<uint64_t>(s);
    }
  });
}
std::string Value::to_string() const {
  if (type == ScalarType::Bool) return bits ? "true" : "false";
  if (is_float()) return shortest_in(type, f64());
  if (negative()) return std::to_string(i64());
  return std::to_string(bits);
}

// ---- conversions ----------------------------------------------------------------------------------

Outcome convert(const Value& v, ScalarType to) {
  if (!valid(v.type) || !valid(to)) return Outcome::fail(ErrorKind::Invalid, "unknown scalar type");
  return with_type(v.type, [&](auto from_tag) {
    constexpr int From = decltype(from_tag)::value;
    return with_type(to, [&](auto to_tag) {
      constexpr int To = decltype(to_tag)::value;
      const orch_v<To> r = orch_convert<To, From>(to_v<From>(v));
      if (r.e) return Outcome::fail(static_cast<ErrorKind>(r.e), conversion_message(v, to));
      return Outcome::of(from_v<To>(r));
    });
  });
}

Outcome promote(const Value& v, ScalarType to) {
  if (!valid(v.type) || !valid(to)) return Outcome::fail(ErrorKind::Invalid, "unknown scalar type");
  return with_type(v.type, [&](auto from_tag) {
    constexpr int From = decltype(from_tag)::value;
    return with_type(to, [&](auto to_tag) {
      constexpr int To = decltype(to_tag)::value;
      return result_of<To>(orch_promote<To, From>(to_v<From>(v)), v.to_string());
    });
  });
}

double round_to(ScalarType t, double d) {
  switch (t) {
    case ScalarType::F16: return orch_round_to<orch_f16>(d);
    case ScalarType::BF16: return orch_round_to<orch_bf16>(d);
    case ScalarType::F32: return orch_round_to<orch_f32>(d);
    default: return d;
  }
}

Outcome settle_literal(const Value& v, ScalarType t) {
  if (v.is_float() && is_float(t)) {
    const double r = round_to(t, v.f64());
    if (std::isfinite(v.f64()) && !std::isfinite(r))
      return Outcome::fail(ErrorKind::Overflow, "overflow: " + conversion_message(v, t));
    return Outcome::of(Value::of_double(t, r));
  }
  Outcome o = convert(v, t);
  if (!o.ok() && !v.is_float() && !is_float(t) && t != ScalarType::Bool)
    o.message = "overflow: " + v.to_string() + " does not fit " + to_string(t);
  return o;
}

// ---- operators ------------------------------------------------------------------------------------

Outcome apply(Op op, const Value& a) {
  std::string why;
  auto rt = result_type(op, a.type, &why);
  if (!rt) return Outcome::fail(ErrorKind::Invalid, why);
  const std::string what = operation_text(op, a);
  if (op == Op::Not) {
    return with_type(a.type, [&](auto tag) {
      constexpr int K = decltype(tag)::value;
      return result_of<orch_bool>(orch_not<K>(to_v<K>(a)), what);
    });
  }
  Outcome p = promote_for(a, *rt, what);
  if (!p.ok()) return p;
  return with_type(*rt, [&](auto tag) -> Outcome {
    constexpr int K = decltype(tag)::value;
    const orch_v<K> x = to_v<K>(p.value);
    return result_of<K>(op == Op::Neg ? orch_neg<K>(x) : orch_bitnot<K>(x), what);
  });
}

Outcome apply(Op op, const Value& a, const Value& b) {
  std::string why;
  auto rt = result_type(op, a.type, b.type, &why);
  if (!rt) return Outcome::fail(ErrorKind::Invalid, why);
  const std::string what = operation_text(op, a, b);
  if (is_comparison(op) || op == Op::And || op == Op::Or) {
    return with_type(a.type, [&](auto ta) {
      constexpr int A = decltype(ta)::value;
      return with_type(b.type, [&](auto tb) {
        constexpr int B = decltype(tb)::value;
        const orch_v<A> x = to_v<A>(a);
        const orch_v<B> y = to_v<B>(b);
        orch_v<orch_bool> r;
        switch (op) {
          case Op::And: r = orch_and<A, B>(x, y); break;
          case Op::Or: r = orch_or<A, B>(x, y); break;
          case Op::Lt: r = orch_cmp<A, B>(orch_lt, x, y); break;
          case Op::Le: r = orch_cmp<A, B>(orch_le, x, y); break;
          case Op::Gt: r = orch_cmp<A, B>(orch_gt, x, y); break;
          case Op::Ge: r = orch_cmp<A, B>(orch_ge, x, y); break;
          case Op::Eq: r = orch_cmp<A, B>(orch_eq, x, y); break;
          default: r = orch_cmp<A, B>(orch_ne, x, y); break;
        }
        return result_of<orch_bool>(r, what);
      });
    });
  }
  Outcome pa = promote_for(a, *rt, what);
  if (!pa.ok()) return pa;
  if (op == Op::Shl || op == Op::Shr) {
    return with_type(*rt, [&](auto ta) {
      constexpr int K = decltype(ta)::value;
      return with_type(b.type, [&](auto tb) {
        constexpr int C = decltype(tb)::value;
        const orch_v<K> x = to_v<K>(pa.value);
        const orch_v<C> y = to_v<C>(b);
        return result_of<K>(op == Op::Shl ? orch_shl<K, C>(x, y) : orch_shr<K, C>(x, y), what);
      });
    });
  }
  Outcome pb = promote_for(b, *rt, what);
  if (!pb.ok()) return pb;
  return with_type(*rt, [&](auto tag) -> Outcome {
    constexpr int K = decltype(tag)::value;
    const orch_v<K> x = to_v<K>(pa.value), y = to_v<K>(pb.value);
    switch (op) {
      case Op::Add: return result_of<K>(orch_add<K>(x, y), what);
      case Op::Sub: return result_of<K>(orch_sub<K>(x, y), what);
      case Op::Mul: return result_of<K>(orch_mul<K>(x, y), what);
      case Op::Div: return result_of<K>(orch_div<K>(x, y), what);
      case Op::Mod: return result_of<K>(orch_mod<K>(x, y), what);
      case Op::CeilDiv: return result_of<K>(orch_ceil_div<K>(x, y), what);
      case Op::Min: return result_of<K>(orch_min<K>(x, y), what);
      case Op::Max: return result_of<K>(orch_max<K>(x, y), what);
      case Op::BitAnd: return result_of<K>(orch_bitand<K>(x, y), what);
      case Op::BitXor: return result_of<K>(orch_bitxor<K>(x, y), what);
      case Op::BitOr: return result_of<K>(orch_bitor<K>(x, y), what);
      default: return Outcome::fail(ErrorKind::Invalid, std::string("`") + symbol(op) + "` is not a binary operator");
    }
  });
}

}  // namespace orch::expr

#include "tests/expr_table.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "compiler/check.h"
#include "compiler/program.h"
#include "support/diagnostics.h"
#include "support/source.h"

#ifndef ORCH_TEST_TARGETS_DIR
#error "ORCH_TEST_TARGETS_DIR must name the target profiles"
#endif

namespace orch::exprtable {

namespace {

using expr::ErrorKind;
using expr::Value;
using T = expr::ScalarType;

Value I(T t, int64_t v) { return Value::of_int(t, v); }
Value U(T t, uint64_t v) { return Value::of_uint(t, v); }
Value D(T t, double v) { return Value::of_double(t, v); }
Value Bo(bool b) { return Value::of_bool(b); }
Leaf L(const std::string& name, Value v) { return {name, v}; }
Expect ok(Value v) { return {ErrorKind::None, v, false}; }
Expect fail(ErrorKind k) { return {k, Value{}, false}; }
Expect nan_of(T t) { return {ErrorKind::None, Value::of_double(t, std::nan("")), true}; }

const ErrorKind kOverflow = ErrorKind::Overflow, kDiv = ErrorKind::DivisionByZero, kShift = ErrorKind::ShiftCount,
                kConv = ErrorKind::Conversion;

// An integer value of type t given as a mathematical value within its range.
Value N(T t, int64_t v) { return expr::is_signed(t) ? I(t, v) : U(t, static_cast<uint64_t>(v)); }
uint64_t max_of(T t) {
  const uint32_t w = expr::bit_width(t);
  if (expr::is_signed(t)) return (uint64_t(1) << (w - 1)) - 1;
  return w == 64 ? ~uint64_t(0) : (uint64_t(1) << w) - 1;
}
int64_t min_of(T t) {
  const uint32_t w = expr::bit_width(t);
  return expr::is_signed(t) ? (w == 64 ? INT64_MIN : -(int64_t(1) << (w - 1))) : 0;
}
Value Max(T t) { return expr::is_signed(t) ? I(t, static_cast<int64_t>(max_of(t))) : U(t, max_of(t)); }
Value Min(T t) { return I(t, min_of(t)); }

const T kInts[] = {T::U8, T::U16, T::U32, T::U64, T::I8, T::I16, T::I32, T::I64};

std::vector<Row> build() {
  std::vector<Row> r;
  auto add = [&](std::string text, std::vector<Leaf> params, std::vector<Leaf> scalars, T type, Expect e) {
    r.push_back({std::move(text), std::move(params), std::move(scalars), type, e});
  };

  // ---- overflow at every width: + - * and unary -, in the operands' type --------------------
  for (T t : kInts) {
    const uint32_t w = expr::bit_width(t);
    const bool s = expr::is_signed(t);
    const Value one = N(t, 1);
    add("a + b", {L("a", Max(t)), L("b", one)}, {}, t, fail(kOverflow));
    add("a + b", {L("a", s ? I(t, static_cast<int64_t>(max_of(t)) - 1) : U(t, max_of(t) - 1)), L("b", one)}, {}, t,
        ok(Max(t)));
    add("a - b", {L("a", s ? Min(t) : U(t, 0)), L("b", one)}, {}, t, fail(kOverflow));
    add("a - b", {L("a", s ? I(t, min_of(t) + 1) : U(t, 1)), L("b", one)}, {}, t, ok(s ? Min(t) : U(t, 0)));
    // 2^(w/2) squared is 2^w: no type of width w holds it.
    add("a * b", {L("a", N(t, int64_t(1) << (w / 2))), L("b", N(t, int64_t(1) << (w / 2)))}, {}, t,
        fail(kOverflow));
    // -2^(w/2-1) * 2^(w/2) is the signed minimum; 2^(w/2-1) * 2^(w/2) fits an unsigned type.
    if (s)
      add("a * b", {L("a", I(t, -(int64_t(1) << (w / 2 - 1)))), L("b", I(t, int64_t(1) << (w / 2)))}, {}, t,
          ok(Min(t)));
    else
      add("a * b", {L("a", U(t, uint64_t(1) << (w / 2 - 1))), L("b", U(t, uint64_t(1) << (w / 2)))}, {}, t,
          ok(U(t, uint64_t(1) << (w - 1))));
    if (s) {
      add("-a", {L("a", Min(t))}, {}, t, fail(kOverflow));
      add("-a", {}, {L("a", Max(t))}, t, ok(I(t, -static_cast<int64_t>(max_of(t)))));
    } else {
      add("-a", {L("a", U(t, 1))}, {}, t, fail(kOverflow));
      add("-a", {}, {L("a", U(t, 0))}, t, ok(U(t, 0)));
    }
  }

  // ---- shifts at and past the width, signed and unsigned -------------------------------------
  for (T t : kInts) {
    const uint32_t w = expr::bit_width(t);
    const bool s = expr::is_signed(t);
    const Leaf one = L("a", N(t, 1));
    auto count = [](int64_t c) { return L("c", I(T::I32, c)); };
    // 1 << (w - 1) is 2^(w-1): an unsigned type holds it, a signed one does not.
    add("a << c", {one, count(w - 1)}, {}, t, s ? fail(kOverflow) : ok(U(t, uint64_t(1) << (w - 1))));
    add("a << c", {one, count(w)}, {}, t, fail(kShift));
    add("a << c", {one, count(-1)}, {}, t, fail(kShift));
    add("a >> c", {one, count(w)}, {}, t, fail(kShift));
    add("a >> c", {L("a", s ? Min(t) : Max(t)), count(w - 1)}, {}, t, ok(s ? I(t, -1) : U(t, 1)));
    if (s) {
      add("a << c", {L("a", I(t, -1)), count(w - 1)}, {}, t, ok(Min(t)));  // -2^(w-1) fits
      add("a >> c", {L("a", I(t, -7)), count(1)}, {}, t, ok(I(t, -4)));    // floor(-3.5)
    } else {
      add("a >> c", {L("a", U(t, 7)), count(1)}, {}, t, ok(U(t, 3)));
      add("a << c", {L("a", U(t, 3)), count(w - 1)}, {}, t, fail(kOverflow));
    }
  }
  // The count may be any integer type, even u64 past the width.
  add("a << c", {L("a", U(T::U32, 1)), L("c", U(T::U64, ~uint64_t(0)))}, {}, T::U32, fail(kShift));
  add("a >> c", {L("a", I(T::I64, -1)), L("c", U(T::U8, 63))}, {}, T::I64, ok(I(T::I64, -1)));

  // ---- / % and ceil_div with negative operands and zero, MIN / -1 ----------------------------
  for (T t : {T::I8, T::I32, T::I64}) {
    auto ab = [&](int64_t a, int64_t b) { return std::vector<Leaf>{L("a", I(t, a)), L("b", I(t, b))}; };
    add("a / b", ab(-7, 2), {}, t, ok(I(t, -3)));
    add("a / b", ab(7, -2), {}, t, ok(I(t, -3)));
    add("a / b", ab(-7, -2), {}, t, ok(I(t, 3)));
    add("a / b", ab(7, 0), {}, t, fail(kDiv));
    add("a / b", ab(min_of(t), -1), {}, t, fail(kOverflow));
    add("a % b", ab(-7, 2), {}, t, ok(I(t, -1)));
    add("a % b", ab(7, -2), {}, t, ok(I(t, 1)));
    add("a % b", ab(min_of(t), -1), {}, t, ok(I(t, 0)));
    add("a % b", ab(7, 0), {}, t, fail(kDiv));
    add("ceil_div(a, b)", ab(-7, 2), {}, t, ok(I(t, -3)));
    add("ceil_div(a, b)", ab(7, -2), {}, t, ok(I(t, -3)));
    add("ceil_div(a, b)", ab(-7, -2), {}, t, ok(I(t, 4)));
    add("ceil_div(a, b)", ab(7, 2), {}, t, ok(I(t, 4)));
    add("ceil_div(a, b)", ab(6, 2), {}, t, ok(I(t, 3)));
    add("ceil_div(a, b)", ab(-6, 2), {}, t, ok(I(t, -3)));
    add("ceil_div(a, b)", ab(0, -5), {}, t, ok(I(t, 0)));
    add("ceil_div(a, b)", ab(7, 0), {}, t, fail(kDiv));
    add("ceil_div(a, b)", ab(min_of(t), -1), {}, t, fail(kOverflow));
    add("ceil_div(a, b)", ab(min_of(t), 1), {}, t, ok(Min(t)));
  }
  for (T t : {T::U32, T::U64}) {
    auto ab = [&](uint64_t a, uint64_t b) { return std::vector<Leaf>{L("a", U(t, a)), L("b", U(t, b))}; };
    add("a / b", ab(7, 2), {}, t, ok(U(t, 3)));
    add("a / b", ab(7, 0), {}, t, fail(kDiv));
    add("a % b", ab(7, 2), {}, t, ok(U(t, 1)));
    add("ceil_div(a, b)", ab(7, 2), {}, t, ok(U(t, 4)));
    add("ceil_div(a, b)", ab(max_of(t), 1), {}, t, ok(Max(t)));
    add("ceil_div(a, b)", ab(max_of(t), 2), {}, t, ok(U(t, max_of(t) / 2 + 1)));
    add("ceil_div(a, b)", ab(0, 3), {}, t, ok(U(t, 0)));
  }
  // Device scalars divide too; a divisor of 0 is an error on the GPU as on the host.
  add("a / s", {L("a", I(T::I32, 100))}, {L("s", I(T::I32, 0))}, T::I32, fail(kDiv));
  add("ceil_div(s, a)", {L("a", I(T::I32, -3))}, {L("s", I(T::I32, 10))}, T::I32, ok(I(T::I32, -3)));

  // ---- floats: one rounding to nearest even per operation, in the type -----------------------
  // f16
  auto h = [](double v) { return D(T::F16, v); };
  auto hh = [&](double a, double b) { return std::vector<Leaf>{L("x", h(a)), L("y", h(b))}; };
  add("x + y", hh(2048, 1), {}, T::F16, ok(h(2048)));                  // tie: even
  add("x + y", hh(2050, 1), {}, T::F16, ok(h(2052)));                  // tie: even
  add("x + y", hh(65504, 15), {}, T::F16, ok(h(65504)));               // rounds down
  add("x + y", hh(65504, 16), {}, T::F16, fail(kOverflow));            // 65520 rounds to infinity
  add("x - y", hh(-65504, 16), {}, T::F16, fail(kOverflow));
  add("x * y", hh(256, 256), {}, T::F16, fail(kOverflow));
  add("x * y", hh(255, 256), {}, T::F16, ok(h(65280)));
  add("x / y", hh(1, 3), {}, T::F16, ok(h(0.333251953125)));
  add("x / y", hh(1, 0), {}, T::F16, fail(kDiv));
  add("x / y", hh(0, 0), {}, T::F16, fail(kDiv));
  add("x / y", hh(std::ldexp(1.0, -24), 2), {}, T::F16, ok(h(0)));   // 2^-25: tie to zero
  add("x / y", hh(std::ldexp(3.0, -24), 2), {}, T::F16, ok(h(std::ldexp(2.0, -24))));  // 1.5: tie to 2
  add("-x", {L("x", h(65504))}, {}, T::F16, ok(h(-65504)));
  add("x + 1", {L("x", h(2048))}, {}, T::F16, ok(h(2048)));           // the literal is an f16
  add("x + 1", {}, {L("x", h(2049 + 1))}, T::F16, ok(h(2052)));       // 2050 + 1: tie to even
  // bf16
  auto b16 = [](double v) { return D(T::BF16, v); };
  auto bb = [&](double a, double b) { return std::vector<Leaf>{L("x", b16(a)), L("y", b16(b))}; };
  const double bf_max = 3.3895313892515355e38;
  add("x + y", bb(256, 1), {}, T::BF16, ok(b16(256)));
  add("x + y", bb(258, 1), {}, T::BF16, ok(b16(260)));
  add("x / y", bb(1, 3), {}, T::BF16, ok(b16(0.333984375)));
  add("x * y", bb(bf_max, 2), {}, T::BF16, fail(kOverflow));
  add("x + y", bb(bf_max, bf_max), {}, T::BF16, fail(kOverflow));
  add("x - y", bb(1, std::ldexp(1.0, -9)), {}, T::BF16, ok(b16(1)));  // 1 - 2^-9: tie to even
  // f32
  auto f = [](double v) { return D(T::F32, v); };
  auto ff = [&](double a, double b) { return std::vector<Leaf>{L("x", f(a)), L("y", f(b))}; };
  const double f_max = 3.4028234663852886e38;
  add("x + y", ff(16777216, 1), {}, T::F32, ok(f(16777216)));
  add("x + y", ff(16777218, 1), {}, T::F32, ok(f(16777220)));
  add("x + y", ff(static_cast<double>(0.1f), static_cast<double>(0.2f)), {}, T::F32,
      ok(f(static_cast<double>(0.3f))));
  add("x / y", ff(1, 3), {}, T::F32, ok(f(static_cast<double>(1.0f / 3.0f))));
  add("x * y", ff(f_max, 2), {}, T::F32, fail(kOverflow));
  add("x + y", ff(3e38f, 1e38f), {}, T::F32, fail(kOverflow));
  add("x / y", ff(-1, 0), {}, T::F32, fail(kDiv));
  add("x / y", {}, {L("x", f(1)), L("y", f(0))}, T::F32, fail(kDiv));
  // No FMA: (1 + 2^-12)^2 rounds to 1 + 2^-11 before the sum, so the result is 0, not 2^-24.
  add("x * x + y", {L("x", f(1 + std::ldexp(1.0, -12))), L("y", f(-(1 + std::ldexp(1.0, -11))))}, {}, T::F32,
      ok(f(0)));
  add("x * x - y", {}, {L("x", f(1 + std::ldexp(1.0, -12))), L("y", f(1 + std::ldexp(1.0, -11)))}, T::F32,
      ok(f(0)));
  // Non-finite operands (only device scalars hold them) propagate without an error.
  add("s + y", {L("y", f(1))}, {L("s", f(INFINITY))}, T::F32, ok(f(INFINITY)));
  add("s * y", {L("y", f(2))}, {L("s", f(NAN))}, T::F32, nan_of(T::F32));
  add("s - s", {}, {L("s", f(INFINITY))}, T::F32, nan_of(T::F32));
  add("s / y", {L("y", f(0))}, {L("s", f(INFINITY))}, T::F32, ok(f(INFINITY)));
  // f64
  auto d = [](double v) { return D(T::F64, v); };
  add("x * y", {L("x", d(1e308)), L("y", d(10))}, {}, T::F64, fail(kOverflow));
  add("x + y", {L("x", d(0.1)), L("y", d(0.2))}, {}, T::F64, ok(d(0.30000000000000004)));
  add("x / y", {L("x", d(1)), L("y", d(0))}, {}, T::F64, fail(kDiv));
  add("x * x + y", {L("x", d(1 + std::ldexp(1.0, -27))), L("y", d(-(1 + std::ldexp(1.0, -26))))}, {}, T::F64,
      ok(d(0)));
  add("x * x + y", {}, {L("x", d(1 + std::ldexp(1.0, -27))), L("y", d(-(1 + std::ldexp(1.0, -26))))}, T::F64,
      ok(d(0)));
  add("s + 1", {}, {L("s", d(-INFINITY))}, T::F64, ok(d(-INFINITY)));
  // Integers meeting floats: the integer is rounded to the float type (an overflow is an error).
  add("n + x", {L("n", I(T::I32, 16777217)), L("x", f(0))}, {}, T::F32, ok(f(16777216)));
  add("n + x", {L("n", I(T::I32, 70000)), L("x", h(0))}, {}, T::F16, fail(kOverflow));
  add("n + x", {L("n", U(T::U64, ~uint64_t(0))), L("x", f(0))}, {}, T::F32, ok(f(18446744073709551616.0)));
  add("n + x", {L("n", U(T::U64, (uint64_t(1) << 53) + 1)), L("x", d(0))}, {}, T::F64, ok(d(9007199254740992.0)));
  add("n + x", {L("n", I(T::I32, 1)), L("x", h(0.5))}, {}, T::F16, ok(h(1.5)));
  add("n * 0.5", {L("n", U(T::U32, 3))}, {}, T::F64, ok(d(1.5)));  // a float literal makes it f64
  add("x * 3", {L("x", f(0.1f))}, {}, T::F32, ok(f(static_cast<double>(0.1f * 3.0f))));
  add("x + y", {L("x", h(1)), L("y", b16(1))}, {}, T::F32, ok(f(2)));  // f16 with bf16: f32
  add("x + y", {L("x", h(2048)), L("y", f(1))}, {}, T::F32, ok(f(2049)));  // f16 widened exactly

  // ---- comparisons: exact values, signed against unsigned, integers against floats ----------
  auto cmp = [&](std::string text, Value a, Value b, bool result) {
    add(std::move(text), {L("a", a), L("b", b)}, {}, T::Bool, ok(Bo(result)));
  };
  cmp("a < b", I(T::I32, -1), U(T::U32, 0), true);
  cmp("a > b", U(T::U32, 4294967295u), I(T::I32, -1), true);
  cmp("a == b", I(T::I32, -1), U(T::U32, 4294967295u), false);
  cmp("a < b", I(T::I64, -1), U(T::U64, ~uint64_t(0)), true);
  cmp("a >= b", U(T::U64, ~uint64_t(0)), I(T::I64, INT64_MAX), true);
  cmp("a == b", U(T::U64, uint64_t(1) << 63), I(T::I64, INT64_MIN), false);
  cmp("a < b", U(T::U8, 255), I(T::I8, -1), false);
  cmp("a != b", I(T::I8, -1), U(T::U8, 255), true);
  cmp("a <= b", I(T::I16, -32768), U(T::U16, 0), true);
  cmp("a == b", I(T::I32, 16777217), D(T::F32, 16777216), true);   // the i32 rounds to f32
  cmp("a == b", I(T::I64, 16777217), D(T::F64, 16777216), false);  // exact in f64
  cmp("a <= b", D(T::F16, 65504), U(T::U32, 65505), true);          // 65505 rounds to 65504
  cmp("a > b", U(T::U32, 70000), D(T::F16, 65504), true);           // 70000 rounds to infinity
  cmp("a < b", D(T::F32, -0.0), D(T::F64, 0.0), false);
  cmp("a == b", D(T::F32, -0.0), I(T::I32, 0), true);
  cmp("a > b", D(T::BF16, 256), U(T::U16, 257), false);             // 257 rounds to 256
  add("a < 0", {L("a", U(T::U32, 0))}, {}, T::Bool, ok(Bo(false)));
  add("a >= 0", {L("a", U(T::U32, 0))}, {}, T::Bool, ok(Bo(true)));
  add("f == 1", {L("f", Bo(true))}, {}, T::Bool, ok(Bo(true)));
  add("s == s", {}, {L("s", D(T::F32, NAN))}, T::Bool, ok(Bo(false)));
  add("s != s", {}, {L("s", D(T::F32, NAN))}, T::Bool, ok(Bo(true)));
  add("s < a", {L("a", D(T::F32, 1))}, {L("s", D(T::F32, NAN))}, T::Bool, ok(Bo(false)));
  add("s >= a", {L("a", D(T::F32, 1))}, {L("s", D(T::F32, NAN))}, T::Bool, ok(Bo(false)));
  add("s > a", {L("a", I(T::I64, -1))}, {L("s", U(T::U64, 0))}, T::Bool, ok(Bo(true)));
  add("1 < 2", {}, {}, T::Bool, ok(Bo(true)));
  add("-1 < 18446744073709551615", {}, {}, T::Bool, ok(Bo(true)));
  add("0.5 > 0", {}, {}, T::Bool, ok(Bo(true)));

  // ---- && and || decide on the left first: an error on the right is hidden ------------------
  auto ab32 = [](int64_t a, int64_t b) { return std::vector<Leaf>{L("a", I(T::I32, a)), L("b", I(T::I32, b))}; };
  add("b != 0 && a / b > 1", ab32(7, 0), {}, T::Bool, ok(Bo(false)));
  add("b == 0 || a / b > 1", ab32(7, 0), {}, T::Bool, ok(Bo(true)));
  add("a / b > 1 && b != 0", ab32(7, 0), {}, T::Bool, fail(kDiv));
  add("a / b > 1 || b == 0", ab32(7, 0), {}, T::Bool, fail(kDiv));
  add("b != 0 && a / b > 1", ab32(7, 2), {}, T::Bool, ok(Bo(true)));
  add("!(b != 0 && a / b > 1)", ab32(7, 0), {}, T::Bool, ok(Bo(true)));
  add("f || a << c > 0", {L("f", Bo(true)), L("a", U(T::U32, 1)), L("c", I(T::I32, 40))}, {}, T::Bool,
      ok(Bo(true)));
  add("f && a << c > 0", {L("f", Bo(false)), L("a", U(T::U32, 1)), L("c", I(T::I32, 40))}, {}, T::Bool,
      ok(Bo(false)));
  add("f && a << c > 0", {L("f", Bo(true)), L("a", U(T::U32, 1)), L("c", I(T::I32, 40))}, {}, T::Bool,
      fail(kShift));
  add("s != 0 && 100 / s > 2", {}, {L("s", I(T::I32, 0))}, T::Bool, ok(Bo(false)));
  add("s != 0 && 100 / s > 2", {}, {L("s", I(T::I32, 20))}, T::Bool, ok(Bo(true)));
  add("x != 0.0 && 1.0 / x > 2.0", {}, {L("x", D(T::F64, 0))}, T::Bool, ok(Bo(false)));
  add("a && b", ab32(3, 0), {}, T::Bool, ok(Bo(false)));
  add("a || b", ab32(0, -5), {}, T::Bool, ok(Bo(true)));
  add("!a", {L("a", I(T::I32, 0))}, {}, T::Bool, ok(Bo(true)));
  add("!s", {}, {L("s", D(T::F32, NAN))}, T::Bool, ok(Bo(false)));  // NaN is not zero

  // ---- conversions: the value converted to r's type, exactly or refused -----------------------
  auto conv = [&](Value v, T to, Expect e) { add("a", {L("a", v)}, {}, to, e); };
  conv(I(T::I64, 300), T::U8, fail(kConv));
  conv(I(T::I64, 255), T::U8, ok(U(T::U8, 255)));
  conv(I(T::I32, -1), T::U32, fail(kConv));
  conv(I(T::I64, 16777217), T::F32, fail(kConv));
  conv(I(T::I64, 16777216), T::F32, ok(f(16777216)));
  conv(I(T::I64, 2049), T::F16, fail(kConv));
  conv(I(T::I64, 2048), T::F16, ok(h(2048)));
  conv(I(T::I64, 65504), T::F16, ok(h(65504)));
  conv(I(T::I64, 65536), T::F16, fail(kConv));
  conv(d(65519), T::F16, ok(h(65504)));
  conv(d(65520), T::F16, fail(kConv));
  conv(d(1e6), T::F16, fail(kConv));
  conv(d(3.5e38), T::BF16, fail(kConv));
  conv(d(3.3e38), T::BF16, ok(b16(3.2964854295465914e38)));  // to nearest: 248 * 2^120
  conv(d(0.1), T::F32, ok(f(static_cast<double>(0.1f))));
  conv(d(1e39), T::F32, fail(kConv));
  conv(d(1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), T::F16, ok(h(1 + std::ldexp(1.0, -10))));  // no double rounding
  conv(U(T::U64, ~uint64_t(0)), T::U64, ok(U(T::U64, ~uint64_t(0))));
  conv(U(T::U64, ~uint64_t(0)), T::I64, fail(kConv));
  conv(I(T::I64, -1), T::U64, fail(kConv));
  conv(U(T::U64, uint64_t(1) << 63), T::F64, ok(d(9223372036854775808.0)));
  conv(U(T::U64, ~uint64_t(0)), T::F64, fail(kConv));
  conv(I(T::I64, 2), T::Bool, fail(kConv));
  conv(I(T::I64, 1), T::Bool, ok(Bo(true)));
  conv(Bo(true), T::F32, ok(f(1)));
  conv(Bo(true), T::I8, ok(I(T::I8, 1)));
  conv(h(65504), T::F32, ok(f(65504)));
  conv(f(1.5), T::F16, ok(h(1.5)));
  conv(d(1e19), T::F64, ok(d(1e19)));
  add("s", {}, {L("s", d(NAN))}, T::F32, nan_of(T::F32));
  add("s", {}, {L("s", d(INFINITY))}, T::F16, ok(h(INFINITY)));
  add("a * 2", {L("a", U(T::U32, 3000000000u))}, {}, T::U64, fail(kOverflow));  // u32 overflows first
  add("a * 2", {L("a", U(T::U64, 3000000000u))}, {}, T::U32, fail(kConv));      // then u32 cannot hold it
  add("a - b", {L("a", U(T::U32, 5)), L("b", I(T::I32, 10))}, {}, T::U32, fail(kConv));  // -5 in i64

  // ---- literals take the type their use expects ----------------------------------------------
  add("~0", {}, {}, T::U32, ok(U(T::U32, 4294967295u)));
  add("~0", {}, {}, T::U8, ok(U(T::U8, 255)));
  add("~0", {}, {}, T::I32, ok(I(T::I32, -1)));
  add("-1", {}, {}, T::I8, ok(I(T::I8, -1)));
  add("-128", {}, {}, T::I8, ok(I(T::I8, -128)));
  add("-2147483648", {}, {}, T::I32, ok(I(T::I32, INT32_MIN)));
  add("-9223372036854775808", {}, {}, T::I64, ok(I(T::I64, INT64_MIN)));
  add("18446744073709551615", {}, {}, T::U64, ok(U(T::U64, ~uint64_t(0))));
  add("1 << 31", {}, {}, T::U32, ok(U(T::U32, 2147483648u)));
  add("1 << 31", {}, {}, T::I32, fail(kOverflow));
  add("1 << 40", {}, {}, T::U32, fail(kShift));
  add("65536 * 65536", {}, {}, T::U32, fail(kOverflow));
  add("65536 * 65536", {}, {}, T::U64, ok(U(T::U64, 4294967296ull)));
  add("100 + 100", {}, {}, T::I8, fail(kOverflow));
  add("7 / 2", {}, {}, T::F32, ok(f(3.5)));  // computed in f32
  add("7 / 2", {}, {}, T::I32, ok(I(T::I32, 3)));
  add("-7 / 2", {}, {}, T::I32, ok(I(T::I32, -3)));
  add("ceil_div(-7, 2)", {}, {}, T::I32, ok(I(T::I32, -3)));
  add("1.5 * 2", {}, {}, T::F32, ok(f(3)));
  add("0.1 + 0.2", {}, {}, T::F32, ok(f(static_cast<double>(0.3f))));  // 0.1f + 0.2f, once rounded
  add("0.1 + 0.2", {}, {}, T::F64, ok(d(0.30000000000000004)));
  add("1 / 3", {}, {}, T::F16, ok(h(0.333251953125)));
  add("65504 + 16", {}, {}, T::F16, fail(kOverflow));
  add("1e39", {}, {}, T::F32, fail(kConv));
  add("300", {}, {}, T::U8, fail(kConv));
  add("n * 2", {L("n", U(T::U8, 200))}, {}, T::U8, fail(kOverflow));  // 2 is a u8
  add("n * 2", {L("n", U(T::U8, 100))}, {}, T::U8, ok(U(T::U8, 200)));
  add("n - 1", {L("n", U(T::U64, 0))}, {}, T::U64, fail(kOverflow));
  add("true + true", {}, {}, T::I32, ok(I(T::I32, 2)));  // bool counts as i32

  // ---- mixed types: the smallest type holding both, bits, min and max -----------------------
  add("a + b", {L("a", U(T::U8, 200)), L("b", I(T::I8, -100))}, {}, T::I16, ok(I(T::I16, 100)));
  add("a + b", {L("a", U(T::U32, 4000000000u)), L("b", I(T::I32, -1))}, {}, T::I64, ok(I(T::I64, 3999999999)));
  add("a + b", {L("a", U(T::U64, ~uint64_t(0))), L("b", I(T::I32, 0))}, {}, T::I64, fail(kOverflow));
  add("a - b", {L("a", U(T::U64, 5)), L("b", I(T::I64, 10))}, {}, T::I64, ok(I(T::I64, -5)));
  add("a * b", {L("a", U(T::U16, 65535)), L("b", I(T::I16, 2))}, {}, T::I32, ok(I(T::I32, 131070)));
  add("a * b", {L("a", U(T::U8, 255)), L("b", U(T::U32, 16843009))}, {}, T::U32, ok(U(T::U32, 4294967295u)));
  add("a % b", {L("a", U(T::U8, 200)), L("b", I(T::I8, -7))}, {}, T::I16, ok(I(T::I16, 4)));
  add("a & b", {L("a", I(T::I8, -1)), L("b", U(T::U8, 255))}, {}, T::I16, ok(I(T::I16, 255)));
  add("a | b", {L("a", U(T::U32, 0xF0)), L("b", U(T::U32, 0x0F))}, {}, T::U32, ok(U(T::U32, 255)));
  add("a ^ b", {L("a", I(T::I32, -1)), L("b", I(T::I32, 5))}, {}, T::I32, ok(I(T::I32, -6)));
  add("a & b", {L("a", U(T::U64, ~uint64_t(0))), L("b", U(T::U64, 0xFF00))}, {}, T::U64, ok(U(T::U64, 0xFF00)));
  add("~a", {L("a", U(T::U8, 0))}, {}, T::U8, ok(U(T::U8, 255)));
  add("~a", {}, {L("a", I(T::I64, 5))}, T::I64, ok(I(T::I64, -6)));
  add("~a", {L("a", U(T::U64, 0))}, {}, T::U64, ok(U(T::U64, ~uint64_t(0))));
  add("-a", {L("a", Bo(true))}, {}, T::I32, ok(I(T::I32, -1)));
  add("min(a, b)", {L("a", I(T::I32, -1)), L("b", U(T::U32, 3))}, {}, T::I64, ok(I(T::I64, -1)));
  add("max(a, b)", {L("a", U(T::U64, ~uint64_t(0))), L("b", U(T::U64, 1))}, {}, T::U64, ok(U(T::U64, ~uint64_t(0))));
  add("max(a, b)", {L("a", I(T::I8, -128)), L("b", I(T::I8, 127))}, {}, T::I8, ok(I(T::I8, 127)));
  add("min(x, y)", {L("y", f(2))}, {L("x", f(NAN))}, T::F32, ok(f(2)));   // a NaN yields the other
  add("max(x, y)", {L("x", d(1.5))}, {L("y", d(NAN))}, T::F64, ok(d(1.5)));
  add("min(x, y)", {L("x", h(-65504)), L("y", h(1))}, {}, T::F16, ok(h(-65504)));
  add("max(a, 0)", {L("a", I(T::I32, -5))}, {}, T::I32, ok(I(T::I32, 0)));
  add("ceil_div(a, 256)", {L("a", U(T::U32, 4294967295u))}, {}, T::U32, ok(U(T::U32, 16777216)));
  add("s * n", {L("n", I(T::I32, 46341))}, {L("s", I(T::I32, 46341))}, T::I32, fail(kOverflow));
  add("s * n", {L("n", I(T::I32, 46340))}, {L("s", I(T::I32, 46340))}, T::I32, ok(I(T::I32, 2147395600)));
  add("s + n", {L("n", U(T::U16, 1))}, {L("s", U(T::U16, 65535))}, T::U16, fail(kOverflow));
  add("s + n", {L("n", U(T::U16, 1))}, {L("s", U(T::U16, 65535))}, T::U32, fail(kOverflow));  // u16 first
  add("(a + b) / 2", {L("a", I(T::I32, 2147483647)), L("b", I(T::I32, 1))}, {}, T::I32, fail(kOverflow));
  add("a / 2 + b / 2", {L("a", I(T::I32, 2147483647)), L("b", I(T::I32, 1))}, {}, T::I32, ok(I(T::I32, 1073741823)));
  add("(a << 4) >> 4", {L("a", U(T::U8, 15))}, {}, T::U8, ok(U(T::U8, 15)));
  add("(a << 4) >> 4", {L("a", U(T::U8, 16))}, {}, T::U8, fail(kOverflow));
  add("a == b && c < d", {L("a", U(T::U32, 1)), L("b", I(T::I32, 1)), L("c", D(T::F32, 0.5)), L("d", I(T::I64, 1))},
      {}, T::Bool, ok(Bo(true)));
  return r;
}

std::string type_name(T t) { return expr::to_string(t); }

// An orch literal that denotes exactly `v` once it meets v's type.
std::string source_literal(const Value& v) {
  if (v.type == T::Bool) return v.truthy() ? "true" : "false";
  if (!v.is_float()) return v.to_string();
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.17g", v.f64());
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// A param whose value no orch literal writes (infinities, NaN) cannot have a default.
bool literal_exists(const Value& v) { return !v.is_float() || std::isfinite(v.f64()); }

}  // namespace

const std::vector<Row>& rows() {
  static const std::vector<Row> table = build();
  return table;
}

std::string pipeline_of(const Row& row, bool with_defaults) {
  std::string s = "pipeline table\n";
  for (const Leaf& p : row.params)
    s += "param " + p.name + ": " + type_name(p.value.type) + (with_defaults ? " = " + source_literal(p.value) : "") + "\n";
  for (const Leaf& x : row.scalars) s += "buffer " + x.name + ": " + type_name(x.value.type) + "\n";
  s += "buffer r: " + type_name(row.type) + "\n";
  s += "graph main {\n  r = " + row.text + "\n}\n";
  return s;
}

Checked check_row(const Row& row, bool with_defaults) {
  Checked out;
  if (with_defaults)
    for (const Leaf& p : row.params)
      if (!literal_exists(p.value)) out.diagnostics = "(a default cannot be written)";
  if (!out.diagnostics.empty()) return out;
  SourceManager sources;
  DiagnosticEngine diags;
  CheckOptions options;
  options.targets_dir = ORCH_TEST_TARGETS_DIR;
  CheckResult result = check_text("table.orch", pipeline_of(row, with_defaults), sources, options, diags);
  out.diagnostics = format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text);
  if (!out.diagnostics.empty() || !result.program) return out;
  const ir::Program& p = *result.program;
  const ir::Node& n = p.graphs[p.main_graph].body.nodes.at(0);
  const ir::Expr& value = n.as<ir::ScalarUpdateNode>().value;  // `r = <row>`
  out.code = ir::to_postfix(value);
  out.type = value.type;
  return out;
}

std::optional<Value> leaf_value(const Row& row, const expr::Instr& in) {
  if (in.kind == expr::InstrKind::Param && in.ref >= 0 && static_cast<size_t>(in.ref) < row.params.size())
    return row.params[in.ref].value;
  if (in.kind == expr::InstrKind::DeviceScalar && in.ref >= 0 && static_cast<size_t>(in.ref) < row.scalars.size())
    return row.scalars[in.ref].value;
  return std::nullopt;
}

bool matches(const Row& row, const Result& got) {
  if (got.error != static_cast<int>(row.expect.error)) return false;
  if (row.expect.error != ErrorKind::None) return true;
  if (row.expect.nan) return std::isnan(Value::from_storage(row.type, got.bits).f64());
  return got.bits == row.expect.value.storage();
}

std::string describe(const Row& row) {
  std::string s = row.text + " (";
  bool first = true;
  for (const auto* list : {&row.params, &row.scalars})
    for (const Leaf& l : *list) {
      s += (first ? "" : ", ") + l.name + (list == &row.scalars ? " [scalar]" : "") + " = " + l.value.to_string() +
           " " + type_name(l.value.type);
      first = false;
    }
  s += ") -> " + type_name(row.type) + ": ";
  if (row.expect.error != ErrorKind::None) return s + expr::to_string(row.expect.error);
  return s + (row.expect.nan ? "nan" : row.expect.value.to_string());
}

Generated generate() {
  Generated g;
  std::string rows_code, run = "ORCH_HD void orch_table_run(const unsigned long long* in, unsigned long long* bits, int* err) {\n";
  const std::vector<Row>& table = rows();
  size_t printed = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    const Row& row = table[i];
    Checked c = check_row(row, false);
    if (c.code.empty()) continue;  // refused by the checker: nothing runs it
    // Every leaf reads its own slot of `in`, so nothing folds to a constant.
    std::vector<std::string> leaves;
    std::string code = expr::print(c.code, [&](const expr::Instr& in) {
      std::optional<Value> v = leaf_value(row, in);
      const size_t slot = g.inputs.size();
      g.inputs.push_back(v ? v->storage() : 0);
      return std::string("orch_table_in<") + expr::type_code(in.type) + ">(in[" + std::to_string(slot) + "])";
    });
    const std::string tc = expr::type_code(row.type);
    const std::string fn = "orch_table_row_" + std::to_string(i);
    rows_code += "// " + describe(row) + "\n";
    rows_code += "ORCH_HD void " + fn + "(const unsigned long long* in, unsigned long long* bits, int* err) {\n";
    rows_code += "  const orch_v<" + tc + "> r = " + expr::print_convert(code, c.type, row.type) + ";\n";
    rows_code += "  *err = r.e;\n  *bits = r.e ? 0ull : orch_table_out<" + tc + ">(r.v);\n}\n";
    run += "  " + fn + "(in, bits + " + std::to_string(printed) + ", err + " + std::to_string(printed) + ");\n";
    g.printed.push_back(i);
    ++printed;
  }
  run += "}\n";
  run += R"(
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// The device side: one thread runs every row.
extern "C" __global__ void orch_expr_table(const unsigned long long* in, unsigned long long* bits, int* err) {
  if (blockIdx.x == 0 && threadIdx.x == 0) orch_table_run(in, bits, err);
}
#endif
)";
  g.code = std::string("// Generated from tests/expr_table.cpp by orch_expr_table_gen; do not edit.\n") +
           expr::preamble() +
           R"(
// A leaf from its stored bits (the low bytes of a 64-bit slot), and a result's stored bits.
template <int K> ORCH_HD typename orch_t<K>::c orch_table_in(unsigned long long bits) {
  if (K == orch_f32) return static_cast<typename orch_t<K>::c>(orch_bits_float(static_cast<unsigned int>(bits)));
  if (K == orch_f64) return static_cast<typename orch_t<K>::c>(orch_bits_double(bits));
  if (K == orch_bool) return static_cast<typename orch_t<K>::c>((bits & 0xff) != 0);
  return orch_from_storage<K>(static_cast<typename orch_t<K>::s>(bits));
}
template <int K> ORCH_HD unsigned long long orch_table_out(typename orch_t<K>::c v) {
  if (K == orch_f32) return orch_float_bits(static_cast<float>(v));
  if (K == orch_f64) return orch_double_bits(static_cast<double>(v));
  const unsigned long long s = static_cast<unsigned long long>(orch_to_storage<K>(v));
  return orch_t<K>::bits >= 64 ? s : s & ((1ull << (orch_t<K>::bits < 8 ? 8 : orch_t<K>::bits)) - 1);
}

)" + rows_code + run;
  return g;
}

}  // namespace orch::exprtable

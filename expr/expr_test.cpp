// expr/'s own tests: types, typing, conversions, operators, the evaluator and the printer. The
// table of expressions run through the checker, the evaluator and the printed host and device
// code is tests/expr_table_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "expr/expr.h"

namespace orch::expr {
namespace {

using T = ScalarType;

Value i(T t, int64_t v) { return Value::of_int(t, v); }
Value u(T t, uint64_t v) { return Value::of_uint(t, v); }
Value f(T t, double v) { return Value::of_double(t, v); }

std::string show(const Outcome& o) { return o.ok() ? std::string(to_string(o.value.type)) + " " + o.value.to_string() : o.message; }

TEST_CASE("types: names, sizes and classes") {
  CHECK(parse_scalar_type("bf16") == T::BF16);
  CHECK(!parse_scalar_type("f128"));
  CHECK(std::string(to_string(T::U64)) == "u64");
  CHECK(size_of(T::F16) == 2);
  CHECK(is_float(T::BF16));
  CHECK(is_signed(T::I8));
  CHECK(!is_signed(T::U8));
  CHECK(!is_integer(T::Bool));
  CHECK(!valid(static_cast<T>(13)));
}

TEST_CASE("operators: one table of symbols, names, forms and precedence") {
  for (int k = 0; k < kOpCount; ++k) {
    Op op = static_cast<Op>(k);
    if (form(op) == OpForm::Unary) CHECK(unary_op(symbol(op)) == op);
    else if (form(op) == OpForm::Call) CHECK(call_op(symbol(op)) == op);
    else CHECK(binary_op(symbol(op)) == op);
  }
  CHECK(binary_op("-") == Op::Sub);
  CHECK(unary_op("-") == Op::Neg);
  CHECK(!binary_op("**"));
  CHECK(precedence(Op::Mul) > precedence(Op::Add));
  CHECK(precedence(Op::Add) > precedence(Op::Shl));
  CHECK(precedence(Op::And) > precedence(Op::Or));
  CHECK(std::string(name(Op::CeilDiv)) == "CeilDiv");
}

TEST_CASE("typing: the usual rule, exact") {
  CHECK(arithmetic_type(T::U8, T::I8) == T::I16);
  CHECK(arithmetic_type(T::U16, T::I16) == T::I32);
  CHECK(arithmetic_type(T::U32, T::I32) == T::I64);
  CHECK(arithmetic_type(T::U8, T::I32) == T::I32);
  CHECK(arithmetic_type(T::U32, T::I16) == T::I64);
  CHECK(arithmetic_type(T::U64, T::I8) == T::I64);
  CHECK(arithmetic_type(T::U32, T::U64) == T::U64);
  CHECK(arithmetic_type(T::I64, T::F16) == T::F16);
  CHECK(arithmetic_type(T::F16, T::BF16) == T::F32);
  CHECK(arithmetic_type(T::F32, T::F64) == T::F64);
  CHECK(arithmetic_type(T::Bool, T::Bool) == T::I32);
  CHECK(result_type(Op::Lt, T::I32, T::U64) == T::Bool);
  CHECK(result_type(Op::Shl, T::U8, T::I64) == T::U8);
  std::string why;
  CHECK(!result_type(Op::Mod, T::F32, T::I32, &why));
  CHECK(why == "`%` needs integer operands");
  CHECK(!result_type(Op::BitNot, T::F64, &why));
}

TEST_CASE("typing: untyped literals take the type of what they meet") {
  Operand n{T::U32, Literal::None}, one{T::I64, Literal::Int}, half{T::F64, Literal::Float};
  Typing t = type_binary(Op::Mul, n, one);
  CHECK(t.result.type == T::U32);
  CHECK(t.result.literal == Literal::None);
  CHECK(t.settle[1] == T::U32);
  t = type_binary(Op::Mul, n, half);  // a float literal with an integer: f64
  CHECK(t.result.type == T::F64);
  CHECK(t.settle[1] == T::F64);
  t = type_binary(Op::Add, Operand{T::F16, Literal::None}, one);  // an integer literal with f16
  CHECK(t.result.type == T::F16);
  CHECK(t.settle[1] == T::F16);
  t = type_binary(Op::Shl, one, n);  // a literal shifted by a typed count stays untyped
  CHECK(t.result.literal == Literal::Int);
  t = type_binary(Op::Add, one, one);
  CHECK(t.result.literal == Literal::Int);
  t = type_binary(Op::Lt, one, half);
  CHECK(t.result.type == T::Bool);
  CHECK(t.settle[0] == T::F64);
  CHECK(settle_type(Literal::Int, T::U32) == T::U32);
  CHECK(settle_type(Literal::Float, T::U32) == T::F64);
  CHECK(settle_type(Literal::Int, T::Bool) == T::I64);
  CHECK(show(settle_literal(u(T::U64, 18446744073709551615ull), T::U64)) == "u64 18446744073709551615");
  CHECK(show(settle_literal(i(T::I64, 300), T::U8)) == "overflow: 300 does not fit u8");
  CHECK(settle_literal(f(T::F64, 0.1), T::F32).value.f64() == static_cast<double>(0.1f));
  CHECK(show(settle_literal(f(T::F64, 0.1), T::F32)) == "f32 0.1");  // shortest in its type
  CHECK(!settle_literal(f(T::F64, 1e39), T::F32).ok());
}

TEST_CASE("convert: exact or refused (issue 9)") {
  CHECK(show(convert(f(T::F64, 1e6), T::F16)) == "1000000 does not fit f16: it rounds to infinity (largest 65504)");
  CHECK(!convert(f(T::F64, 65520), T::F16).ok());
  CHECK(show(convert(f(T::F64, 65519), T::F16)) == "f16 65504");  // rounds down to the largest
  CHECK(!convert(f(T::F64, 3.5e38), T::BF16).ok());
  CHECK(show(convert(u(T::U64, ~0ull), T::U64)) == "u64 18446744073709551615");
  CHECK(show(convert(f(T::F64, 1e19), T::U64)) == "u64 10000000000000000000");
  CHECK(show(convert(i(T::I64, 16777217), T::F32)) ==
        "16777217 is not exactly representable in f32 (the nearest is 16777216)");
  CHECK(show(convert(i(T::I64, 16777216), T::F32)) == "f32 16777216");
  CHECK(show(convert(i(T::I64, -1), T::U32)) == "-1 does not fit u32");
  CHECK(show(convert(f(T::F64, 2.5), T::I32)) == "2.5 is not an integer, and i32 holds integers");
  CHECK(!convert(f(T::F64, NAN), T::I32).ok());
  CHECK(show(convert(f(T::F64, NAN), T::F32)) == "f32 nan");
  CHECK(show(convert(f(T::F64, INFINITY), T::F16)) == "f16 inf");
  CHECK(show(convert(i(T::I64, 2), T::Bool)) == "2 does not fit bool (it holds 0 or 1)");
  CHECK(show(convert(Value::of_bool(true), T::F32)) == "f32 1");
  CHECK(show(convert(f(T::F64, 18446744073709551616.0), T::U64)) == "18446744073709551616 does not fit u64");
  CHECK(show(convert(f(T::F64, -9223372036854775808.0), T::I64)) == "i64 -9223372036854775808");
  // f16 rounding: ties to even, directly from double (no double rounding through float).
  CHECK(show(convert(f(T::F64, 1.0 + std::ldexp(1.0, -11)), T::F16)) == "f16 1");
  CHECK(convert(f(T::F64, 1.0 + 3 * std::ldexp(1.0, -11)), T::F16).value.f64() == 1.001953125);
  CHECK(convert(f(T::F64, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), T::F16).value.f64() == 1.0009765625);
}

TEST_CASE("storage: the bits of one element") {
  CHECK(convert(f(T::F64, 1.0), T::F16).value.storage() == 0x3c00);
  CHECK(convert(f(T::F64, -2.0), T::BF16).value.storage() == 0xc000);
  CHECK(Value::from_storage(T::F16, 0x7bff).to_string() == "65504");
  CHECK(Value::from_storage(T::F16, 0x0001).f64() == std::ldexp(1.0, -24));
  CHECK(i(T::I8, -1).storage() == 0xff);
  CHECK(Value::from_storage(T::I16, 0xffff).i64() == -1);
  CHECK(convert(f(T::F64, 1.5), T::F32).value.storage() == 0x3fc00000u);
}

TEST_CASE("operators: integers are exact or errors") {
  CHECK(show(apply(Op::Mul, u(T::U32, 65536), u(T::U32, 65536))) == "overflow: 65536 * 65536 does not fit u32");
  CHECK(show(apply(Op::Add, i(T::I8, 100), i(T::I8, 27))) == "i8 127");
  CHECK(show(apply(Op::Add, i(T::I8, 100), i(T::I8, 28))) == "overflow: 100 + 28 does not fit i8");
  CHECK(show(apply(Op::Sub, u(T::U32, 0), u(T::U32, 1))) == "overflow: 0 - 1 does not fit u32");
  CHECK(show(apply(Op::Neg, u(T::U32, 0))) == "u32 0");
  CHECK(show(apply(Op::Neg, u(T::U32, 1))) == "overflow: -1 does not fit u32");
  CHECK(show(apply(Op::Neg, i(T::I64, INT64_MIN))) == "overflow: --9223372036854775808 does not fit i64");
  CHECK(show(apply(Op::Div, i(T::I64, INT64_MIN), i(T::I64, -1))) ==
        "overflow: -9223372036854775808 / -1 does not fit i64");
  CHECK(show(apply(Op::Mod, i(T::I64, INT64_MIN), i(T::I64, -1))) == "i64 0");
  CHECK(show(apply(Op::Div, i(T::I32, 7), i(T::I32, 0))) == "division by zero: 7 / 0");
  CHECK(show(apply(Op::Div, i(T::I32, -7), i(T::I32, 2))) == "i32 -3");
  CHECK(show(apply(Op::Mod, i(T::I32, -7), i(T::I32, 2))) == "i32 -1");
  CHECK(show(apply(Op::CeilDiv, i(T::I32, -7), i(T::I32, 2))) == "i32 -3");
  CHECK(show(apply(Op::CeilDiv, i(T::I32, 7), i(T::I32, -2))) == "i32 -3");
  CHECK(show(apply(Op::CeilDiv, i(T::I32, -7), i(T::I32, -2))) == "i32 4");
  CHECK(show(apply(Op::CeilDiv, i(T::I32, 7), i(T::I32, 2))) == "i32 4");
  CHECK(show(apply(Op::CeilDiv, u(T::U64, ~0ull), u(T::U64, 1))) == "u64 18446744073709551615");
  CHECK(show(apply(Op::Shl, u(T::U32, 1), i(T::I64, 31))) == "u32 2147483648");
  CHECK(show(apply(Op::Shl, u(T::U32, 2), i(T::I64, 31))) == "overflow: 2 << 31 does not fit u32");
  CHECK(show(apply(Op::Shl, u(T::U32, 1), i(T::I64, 32))) == "shift count: 1 << 32 (the count must be 0 to 31 for u32)");
  CHECK(show(apply(Op::Shl, i(T::I64, -1), i(T::I64, 63))) == "i64 -9223372036854775808");
  CHECK(show(apply(Op::Shr, i(T::I32, -7), i(T::I64, 1))) == "i32 -4");
  CHECK(show(apply(Op::Shr, u(T::U8, 255), u(T::U8, 7))) == "u8 1");
  CHECK(show(apply(Op::Shr, u(T::U8, 255), i(T::I32, -1))).rfind("shift count", 0) == 0);
  CHECK(show(apply(Op::BitNot, u(T::U32, 0))) == "u32 4294967295");
  CHECK(show(apply(Op::BitNot, i(T::I32, 5))) == "i32 -6");
  CHECK(show(apply(Op::BitAnd, i(T::I8, -1), u(T::U8, 255))) == "i16 255");
  CHECK(show(apply(Op::Add, u(T::U32, 4000000000u), i(T::I32, -1))) == "i64 3999999999");
  CHECK(show(apply(Op::Add, u(T::U64, ~0ull), i(T::I64, 0))) ==
        "overflow: 18446744073709551615 + 0: 18446744073709551615 (u64) does not fit i64");
  CHECK(show(apply(Op::Add, Value::of_bool(true), Value::of_bool(true))) == "i32 2");
  CHECK(show(apply(Op::Min, i(T::I32, -1), u(T::U32, 3))) == "i64 -1");
}

TEST_CASE("operators: floats round once, to nearest, in their type") {
  CHECK(show(apply(Op::Add, f(T::F16, 65504), f(T::F16, 15))) == "f16 65504");  // rounds down
  CHECK(show(apply(Op::Add, f(T::F16, 65504), f(T::F16, 16))) == "overflow: 65504 + 16 does not fit f16");
  CHECK(show(apply(Op::Add, f(T::F16, 2048), f(T::F16, 1))) == "f16 2048");  // tie to even
  CHECK(show(apply(Op::Add, f(T::F16, 2050), f(T::F16, 1))) == "f16 2052");  // tie to even
  CHECK(apply(Op::Div, f(T::BF16, 1), f(T::BF16, 3)).value.f64() == 0.333984375);
  CHECK(apply(Op::Div, f(T::F32, 1), f(T::F32, 3)).value.f64() == static_cast<double>(1.0f / 3.0f));
  CHECK(show(apply(Op::Div, f(T::F32, 1), f(T::F32, 3))) == "f32 0.33333334");
  CHECK(show(apply(Op::Div, f(T::F32, 1), f(T::F32, 0))) == "division by zero: 1 / 0");
  CHECK(show(apply(Op::Div, f(T::F32, 0), f(T::F32, 0))) == "division by zero: 0 / 0");
  CHECK(show(apply(Op::Mul, f(T::F32, 3e38), f(T::F32, 10))).rfind("overflow", 0) == 0);
  CHECK(show(apply(Op::Add, f(T::F32, INFINITY), f(T::F32, 1))) == "f32 inf");  // non-finite propagate
  CHECK(show(apply(Op::Min, f(T::F64, NAN), f(T::F64, 2))) == "f64 2");
  CHECK(show(apply(Op::Add, i(T::I32, 16777217), f(T::F32, 0))) == "f32 16777216");  // promotion rounds
  CHECK(show(apply(Op::Add, i(T::I32, 70000), f(T::F16, 0))).rfind("overflow", 0) == 0);
}

TEST_CASE("comparisons: exact values, not C conversions") {
  CHECK(apply(Op::Lt, i(T::I32, -1), u(T::U32, 0)).value.truthy());
  CHECK(!apply(Op::Gt, i(T::I64, -1), u(T::U64, ~0ull)).value.truthy());
  CHECK(apply(Op::Eq, u(T::U64, ~0ull), u(T::U64, ~0ull)).value.truthy());
  CHECK(apply(Op::Eq, i(T::I32, 16777217), f(T::F32, 16777216)).value.truthy());  // rounded to f32
  CHECK(!apply(Op::Eq, f(T::F64, NAN), f(T::F64, NAN)).value.truthy());
  CHECK(apply(Op::Ne, f(T::F64, NAN), f(T::F64, NAN)).value.truthy());
  CHECK(!apply(Op::Lt, f(T::F64, NAN), f(T::F64, 1)).value.truthy());
}

std::vector<Instr> code(std::initializer_list<Instr> list) { return list; }
Instr konst(Value v) { return Instr{InstrKind::Const, Op::Neg, v.type, -1, v}; }
Instr param(int ref, T t) { return Instr{InstrKind::Param, Op::Neg, t, ref, {}}; }
Instr op(Op o, T t) { return Instr{InstrKind::Operator, o, t, -1, {}}; }

TEST_CASE("evaluate: errors, unknowns and short-circuits") {
  auto none = [](const Instr&) { return std::optional<Value>(); };
  // 1 / 0 || true: the error comes first (the left operand fails).
  auto e = evaluate(code({konst(i(T::I64, 1)), konst(i(T::I64, 0)), op(Op::Div, T::I64), konst(Value::of_bool(true)),
                          op(Op::Or, T::Bool)}),
                    none);
  CHECK(e.failed());
  CHECK(e.at == 2);
  // true || 1 / 0: the right operand's error is hidden.
  e = evaluate(code({konst(Value::of_bool(true)), konst(i(T::I64, 1)), konst(i(T::I64, 0)), op(Op::Div, T::I64),
                     op(Op::Or, T::Bool)}),
               none);
  CHECK(e.known());
  CHECK(e.value.truthy());
  // false && 1 / 0 likewise.
  e = evaluate(code({konst(Value::of_bool(false)), konst(i(T::I64, 1)), konst(i(T::I64, 0)), op(Op::Div, T::I64),
                     op(Op::And, T::Bool)}),
               none);
  CHECK(e.known());
  CHECK(!e.value.truthy());
  // p / 0 with p unknown: still a division by zero.
  e = evaluate(code({param(0, T::U32), konst(u(T::U32, 0)), op(Op::Div, T::U32)}), none);
  CHECK(e.failed());
  CHECK(e.error == ErrorKind::DivisionByZero);
  // p + 1 with p unknown: unknown.
  e = evaluate(code({param(0, T::U32), konst(u(T::U32, 1)), op(Op::Add, T::U32)}), none);
  CHECK(e.state == Evaluation::State::Unknown);
  // p * p with p = 65536.
  auto p = [](const Instr&) { return std::optional<Value>(Value::of_uint(T::U32, 65536)); };
  e = evaluate(code({param(0, T::U32), param(0, T::U32), op(Op::Mul, T::U32)}), p);
  CHECK(e.failed());
  CHECK(e.message == "overflow: 65536 * 65536 does not fit u32");
  // A type that disagrees with the rules is a malformed expression.
  e = evaluate(code({param(0, T::U32), param(0, T::U32), op(Op::Mul, T::U64)}), p);
  CHECK(e.failed());
  CHECK(e.error == ErrorKind::Invalid);
  CHECK(verify(nullptr, 0) == "empty expression");
  CHECK(verify(code({op(Op::Add, T::I64)}).data(), 1) == "instruction 0 (Add) has too few operands");
}

TEST_CASE("print: literals are exact, operations call the preamble") {
  CHECK(literal(u(T::U64, ~0ull)) == "18446744073709551615ull");
  CHECK(literal(i(T::I64, INT64_MIN)) == "(-9223372036854775807ll - 1)");
  CHECK(literal(i(T::I32, INT32_MIN)) == "(-2147483647 - 1)");
  CHECK(literal(i(T::I8, -5)) == "(-5)");
  CHECK(literal(u(T::U8, 200)) == "200u");
  CHECK(literal(f(T::F32, 0.5)) == "0x1p-1f");
  CHECK(literal(f(T::F64, -1.5)) == "(-0x1.8p+0)");
  CHECK(literal(Value::of_bool(true)) == "true");
  std::string s = print(code({param(0, T::U32), konst(i(T::I32, 2)), op(Op::Mul, T::I64)}),
                        [](const Instr&) { return std::string("n"); });
  CHECK(s == "orch_mul<orch_i64>(orch_promote<orch_i64, orch_u32>(orch_ok<orch_u32>(n)), "
             "orch_promote<orch_i64, orch_i32>(orch_ok<orch_i32>(2)))");
  CHECK(std::string(preamble()).find("orch_ceil_div") != std::string::npos);
  CHECK(print_convert("x", T::I64, T::F16) == "orch_convert<orch_f16, orch_i64>(x)");
}

}  // namespace
}  // namespace orch::expr

// orch-run's value handling: typed parsing, f16/bf16 bits, random fills, statistics.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tools/orch_run/values.h"

using namespace orch::run;
using orch::ScalarValue;

namespace {

struct Parsed {
  bool ok = false;
  ScalarValue value;
  std::vector<uint8_t> bytes;
  std::string error;
};

Parsed parse(const std::string& text, ScalarType type) {
  Parsed p;
  p.ok = parse_value(text, type, &p.value, &p.bytes, &p.error);
  return p;
}

template <class T>
T element(const std::vector<uint8_t>& bytes, size_t i = 0) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

TEST_CASE("integers parse within their type's range, decimal or hex") {
  Parsed p = parse("4096", ScalarType::U32);
  REQUIRE(p.ok);
  CHECK(p.value.kind == ScalarValue::Kind::Uint);
  CHECK(p.value.u == 4096);
  CHECK(p.bytes == std::vector<uint8_t>{0x00, 0x10, 0x00, 0x00});

  CHECK(parse("0x10", ScalarType::U8).value.u == 16);
  CHECK(parse("4294967295", ScalarType::U32).ok);
  CHECK(parse("18446744073709551615", ScalarType::U64).value.u == std::numeric_limits<uint64_t>::max());

  p = parse("-128", ScalarType::I8);
  REQUIRE(p.ok);
  CHECK(p.value.kind == ScalarValue::Kind::Int);
  CHECK(p.value.i == -128);
  CHECK(p.bytes == std::vector<uint8_t>{0x80});
  CHECK(parse("-9223372036854775808", ScalarType::I64).value.i == std::numeric_limits<int64_t>::min());
  CHECK(parse("+7", ScalarType::I32).value.i == 7);
  CHECK(parse("-0", ScalarType::U32).ok);  // zero has no sign to object to
}

TEST_CASE("integers out of range or not integers are errors that say why") {
  Parsed p = parse("4294967296", ScalarType::U32);
  CHECK_FALSE(p.ok);
  CHECK(p.error == "'4294967296' is above the range of u32 (largest 4294967295)");
  p = parse("-1", ScalarType::U32);
  CHECK_FALSE(p.ok);
  CHECK(p.error == "'-1' is below the range of u32");
  CHECK(parse("128", ScalarType::I8).error == "'128' is above the range of i8 (largest 127)");
  CHECK(parse("-129", ScalarType::I8).error == "'-129' is below the range of i8");
  CHECK(parse("4.5", ScalarType::U32).error == "'4.5' is not an integer");
  CHECK(parse("1e3", ScalarType::I32).error == "'1e3' is not an integer");
  CHECK(parse("lots", ScalarType::U32).error == "'lots' is not a number");
  CHECK(parse("", ScalarType::U32).error == "'' is not a number");
  CHECK(parse(" 5", ScalarType::U32).error == "' 5' is not a number");
  CHECK(parse("5 ", ScalarType::U32).error == "'5 ' is not a number");
  CHECK(parse("99999999999999999999", ScalarType::U64).error ==
        "'99999999999999999999' is above the range of u64 (largest 18446744073709551615)");
  CHECK(parse("-99999999999999999999", ScalarType::I64).error == "'-99999999999999999999' is below the range of i64");
}

TEST_CASE("floats parse as the element type, with overflow an error") {
  Parsed p = parse("0.5", ScalarType::F32);
  REQUIRE(p.ok);
  CHECK(p.value.kind == ScalarValue::Kind::Float);
  CHECK(p.value.f == 0.5);
  CHECK(element<float>(p.bytes) == 0.5f);
  CHECK(element<double>(parse("-2e-3", ScalarType::F64).bytes) == -2e-3);
  CHECK(std::isinf(element<float>(parse("inf", ScalarType::F32).bytes)));
  CHECK(std::isnan(element<float>(parse("nan", ScalarType::F32).bytes)));
  CHECK(parse("7", ScalarType::F32).ok);  // an integer is a fine float

  CHECK(parse("1e39", ScalarType::F32).error.find("is out of the range of f32") != std::string::npos);
  CHECK(parse("70000", ScalarType::F16).error == "'70000' is out of the range of f16 (largest 65504)");
  CHECK(parse("65519", ScalarType::F16).ok);  // rounds down to 65504
  CHECK(element<uint16_t>(parse("65519", ScalarType::F16).bytes) == 0x7bff);
  CHECK(parse("1e300", ScalarType::F64).ok);
  CHECK(parse("0.5x", ScalarType::F32).error == "'0.5x' is not a number");
}

TEST_CASE("values convert as the runtime converts them: exact, or refused (expr::convert, issue 9)") {
  // f16 and bf16 round to nearest directly from the double, never to infinity.
  CHECK(parse("1e6", ScalarType::F16).error == "'1e6' is out of the range of f16 (largest 65504)");
  CHECK(parse("65520", ScalarType::F16).error == "'65520' is out of the range of f16 (largest 65504)");
  CHECK(parse("3.5e38", ScalarType::BF16).error.find("is out of the range of bf16") != std::string::npos);
  CHECK(element<uint16_t>(parse("3.3e38", ScalarType::BF16).bytes) == 0x7f78);  // 248 * 2^120
  // 1.0004882812500009 is just above 1 + 2^-11, the tie between 1 and 1 + 2^-10: it rounds up
  // (through float it would first round to the tie, then to even: 1).
  CHECK(element<uint16_t>(parse("1.0004882812500009", ScalarType::F16).bytes) == 0x3c01);
  // u64 uses its whole range.
  Parsed p = parse("18446744073709551615", ScalarType::U64);
  REQUIRE(p.ok);
  CHECK(p.value.kind == ScalarValue::Kind::Uint);
  CHECK(p.value.u == ~uint64_t(0));
  CHECK(element<uint64_t>(p.bytes) == ~uint64_t(0));
  CHECK(parse("-9223372036854775808", ScalarType::I64).ok);
  CHECK(parse("0x80", ScalarType::I8).error == "'0x80' is above the range of i8 (largest 127)");
}

TEST_CASE("bool takes true, false, 1 and 0") {
  CHECK(parse("true", ScalarType::Bool).bytes == std::vector<uint8_t>{1});
  CHECK(parse("0", ScalarType::Bool).bytes == std::vector<uint8_t>{0});
  CHECK(parse("yes", ScalarType::Bool).error == "'yes' is not a bool (true, false, 1 or 0)");
}

TEST_CASE("f16 and bf16 bits round to nearest even") {
  CHECK(to_f16_bits(1.0) == 0x3c00);
  CHECK(to_f16_bits(0.5) == 0x3800);
  CHECK(to_f16_bits(-2.0) == 0xc000);
  CHECK(to_f16_bits(65504.0) == 0x7bff);
  CHECK(to_f16_bits(65520.0) == 0x7c00);  // the midpoint to 65536 rounds to even: infinity
  CHECK(to_f16_bits(0.0) == 0x0000);
  CHECK(to_f16_bits(-0.0) == 0x8000);
  CHECK(to_f16_bits(std::ldexp(1.0, -24)) == 0x0001);   // the smallest subnormal
  CHECK(to_f16_bits(std::ldexp(1.0, -25)) == 0x0000);   // half of it: ties to even, zero
  CHECK(to_f16_bits(std::ldexp(3.0, -26)) == 0x0001);   // 0.75 of it rounds up
  CHECK(to_f16_bits(std::ldexp(1.0, -14)) == 0x0400);   // the smallest normal
  CHECK(to_f16_bits(1.0 + std::ldexp(1.0, -11)) == 0x3c00);  // tie between 1 and 1+2^-10: even
  CHECK(to_f16_bits(1.0 + 3 * std::ldexp(1.0, -11)) == 0x3c02);  // tie: rounds up to even
  CHECK(to_f16_bits(std::numeric_limits<double>::infinity()) == 0x7c00);
  CHECK((to_f16_bits(std::nan("")) & 0x7c00) == 0x7c00);
  CHECK((to_f16_bits(std::nan("")) & 0x03ff) != 0);

  CHECK(to_bf16_bits(1.0) == 0x3f80);
  CHECK(to_bf16_bits(3.0) == 0x4040);
  CHECK(to_bf16_bits(-0.5) == 0xbf00);
  CHECK(to_bf16_bits(1.0 + std::ldexp(1.0, -8)) == 0x3f80);  // tie: even
  CHECK(to_bf16_bits(std::ldexp(1.0, -133)) == 0x0001);      // the smallest subnormal

  // Every f16 value survives a round trip through double.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x03ff)) continue;  // NaNs
    const double v = from_f16_bits(static_cast<uint16_t>(bits));
    REQUIRE(to_f16_bits(v) == bits);
  }
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7f80) == 0x7f80 && (bits & 0x007f)) continue;
    REQUIRE(to_bf16_bits(from_bf16_bits(static_cast<uint16_t>(bits))) == bits);
  }
}

TEST_CASE("random fills are deterministic per seed and buffer, and stay in range") {
  const auto a = random_bytes(ScalarType::F32, 1000, 7, "x");
  CHECK(a.size() == 4000);
  CHECK(a == random_bytes(ScalarType::F32, 1000, 7, "x"));
  CHECK(a != random_bytes(ScalarType::F32, 1000, 8, "x"));
  CHECK(a != random_bytes(ScalarType::F32, 1000, 7, "y"));  // two buffers never share values
  double sum = 0;
  for (size_t i = 0; i < 1000; ++i) {
    const float v = element<float>(a, i);
    REQUIRE(v >= 0.0f);
    REQUIRE(v <= 1.0f);
    sum += v;
  }
  CHECK(sum / 1000 == doctest::Approx(0.5).epsilon(0.05));

  RandomRange range;
  std::string error;
  REQUIRE(parse_range("-1:1", ScalarType::F64, &range, &error));
  const auto d = random_bytes(ScalarType::F64, 1000, 1, "d", range);
  bool negative = false;
  for (size_t i = 0; i < 1000; ++i) {
    const double v = element<double>(d, i);
    REQUIRE(v >= -1.0);
    REQUIRE(v < 1.0);
    negative |= v < 0;
  }
  CHECK(negative);

  REQUIRE(parse_range("-3:3", ScalarType::I32, &range, &error));
  const auto ints = random_bytes(ScalarType::I32, 2000, 1, "i", range);
  int seen[7] = {};
  for (size_t i = 0; i < 2000; ++i) {
    const int32_t v = element<int32_t>(ints, i);
    REQUIRE(v >= -3);
    REQUIRE(v <= 3);
    ++seen[v + 3];
  }
  for (int c : seen) CHECK(c > 200);  // every value in [lo, hi], both ends included

  const auto u8 = random_bytes(ScalarType::U8, 4096, 1, "b");
  int high = 0;
  for (uint8_t v : u8) high += v >= 128;
  CHECK(high > 1700);  // the whole range of the type, not [0, 1)

  const auto h = random_bytes(ScalarType::F16, 100, 1, "h");
  for (size_t i = 0; i < 100; ++i) {
    const double v = from_f16_bits(element<uint16_t>(h, i));
    REQUIRE(v >= 0.0);
    REQUIRE(v <= 1.0);
  }
  const auto b = random_bytes(ScalarType::Bool, 100, 1, "flags");
  for (uint8_t v : b) REQUIRE(v <= 1);

  REQUIRE(parse_range("0:18446744073709551615", ScalarType::U64, &range, &error));  // span 2^64
  CHECK(random_bytes(ScalarType::U64, 10, 1, "w", range).size() == 80);
}

TEST_CASE("random ranges are checked") {
  RandomRange range;
  std::string error;
  CHECK_FALSE(parse_range("1:0", ScalarType::F32, &range, &error));
  CHECK(error == "the random range '1:0' has its low bound above its high bound");
  CHECK_FALSE(parse_range("-1:5", ScalarType::U32, &range, &error));
  CHECK(error == "'-1' is below the range of u32");
  CHECK_FALSE(parse_range("0:inf", ScalarType::F32, &range, &error));
  CHECK(error == "the bounds of a random range must be finite");
  CHECK_FALSE(parse_range("0:1:2", ScalarType::F32, &range, &error));
  CHECK(parse_range("2:2", ScalarType::I8, &range, &error));
}

TEST_CASE("constants repeat one element") {
  std::vector<uint8_t> e{1, 2};
  CHECK(repeat_element(e, 3) == std::vector<uint8_t>{1, 2, 1, 2, 1, 2});
  CHECK(repeat_element(e, 0).empty());
}

TEST_CASE("median and p90 by nearest rank") {
  Summary s = summarize({5, 1, 4, 2, 3});
  CHECK(s.count == 5);
  CHECK(s.median == 3);
  CHECK(s.p90 == 5);  // ceil(0.9 * 5) = 5th
  CHECK(s.min == 1);
  CHECK(s.max == 5);
  CHECK(s.mean == 3);
  s = summarize({4, 1, 3, 2});
  CHECK(s.median == 2.5);
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  s = summarize(hundred);
  CHECK(s.median == 50.5);
  CHECK(s.p90 == 90);  // 90 of 100 samples at or below it
  CHECK(summarize({7}).p90 == 7);
  CHECK(summarize({}).count == 0);
}

TEST_CASE("times and sizes read well") {
  CHECK(format_ms(0.0123) == "12.3 us");
  CHECK(format_ms(4.5) == "4.500 ms");
  CHECK(format_ms(1500) == "1.500 s");
  CHECK(format_bytes(16) == "16 B");
  CHECK(format_bytes(16384) == "16.0 KiB");
  CHECK(format_bytes(16u << 20) == "16.0 MiB");
  CHECK(type_name(ScalarType::BF16) == "bf16");
  CHECK(type_size(ScalarType::F64) == 8);
}

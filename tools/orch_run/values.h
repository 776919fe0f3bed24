// orch-run's value handling, with no CUDA in it (unit-tested on any machine): parsing a param or
// a constant as the declared element type, the bytes of one element (f16 and bf16 included),
// random buffer contents, and the statistics it prints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/pipeline_generated.h"
#include "orch/runtime.h"

namespace orch::run {

using ScalarType = orch::fb::ScalarType;

// "u32", "f16", "bool", ...
std::string type_name(ScalarType type);
// Bytes of one element (bool is 1), 0 for a value outside the enum.
size_t type_size(ScalarType type);
bool is_float_type(ScalarType type);
bool is_signed_type(ScalarType type);  // the signed integers

// A number as written for a value of `type`:
//   integers: decimal or 0x hex, with an optional sign, within the type's range;
//   floats:   what strtod reads (1.5, -2e-3, inf, nan), within the type's finite range;
//   bool:     true, false, 1 or 0.
// On success *value holds it (Uint, Int or Float kind) and *bytes (if given) one element of
// `type`, little-endian. On failure, *error says why in words ("-1 is below the range of u32").
bool parse_value(std::string_view text, ScalarType type, ScalarValue* value,
                 std::vector<uint8_t>* bytes, std::string* error);

// IEEE binary16 and bfloat16 bits of `value`, rounded to nearest even (through float, with
// artifact/scalar_bits.h, as the compiler and the runtime round); overflow gives infinity.
uint16_t to_f16_bits(double value);
uint16_t to_bf16_bits(double value);
double from_f16_bits(uint16_t bits);
double from_bf16_bits(uint16_t bits);

// The range of `--fill x=random:LO:HI`; for floats uniform in [lo, hi) (before rounding to the
// element type), for integers uniform in [lo, hi] inclusive.
struct RandomRange {
  ScalarValue lo, hi;
};

// `count` elements of `type`, uniformly random: floats in [0, 1), integers over the whole range
// of the type, bool 0 or 1, unless `range` says otherwise. Deterministic for a given seed and
// buffer name (each buffer draws from its own stream, so adding a --fill never changes
// another buffer's values) and the same on every platform (no std:: distributions).
std::vector<uint8_t> random_bytes(ScalarType type, size_t count, uint64_t seed,
                                  std::string_view buffer_name,
                                  const std::optional<RandomRange>& range = std::nullopt);

// `count` copies of one element.
std::vector<uint8_t> repeat_element(const std::vector<uint8_t>& element, size_t count);

// Parses "LO:HI" for `type`; lo must not exceed hi.
bool parse_range(std::string_view text, ScalarType type, RandomRange* range, std::string* error);

struct Summary {
  size_t count = 0;
  double median = 0, p90 = 0, min = 0, max = 0, mean = 0;
};
// Median (the mean of the middle two for an even count) and p90 by nearest rank: the smallest
// sample with at least 90% of the samples at or below it. Empty input gives a zero Summary.
Summary summarize(std::vector<double> samples);

// "12.3 us", "4.56 ms", "1.20 s" for a time in milliseconds.
std::string format_ms(double ms);
// "16 B", "4.0 KiB", "16.0 MiB".
std::string format_bytes(uint64_t bytes);

}  // namespace orch::run

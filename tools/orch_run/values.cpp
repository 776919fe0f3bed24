#include "tools/orch_run/values.h"

#include "artifact/scalar_bits.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace orch::run {

namespace {

struct IntRange {
  int64_t min;
  uint64_t max;
};

IntRange int_range(ScalarType t) {
  switch (t) {
    case ScalarType::U8: return {0, 0xffu};
    case ScalarType::U16: return {0, 0xffffu};
    case ScalarType::U32: return {0, 0xffffffffu};
    case ScalarType::U64: return {0, std::numeric_limits<uint64_t>::max()};
    case ScalarType::I8: return {-128, 127};
    case ScalarType::I16: return {-32768, 32767};
    case ScalarType::I32: return {std::numeric_limits<int32_t>::min(), 0x7fffffffu};
    case ScalarType::I64:
      return {std::numeric_limits<int64_t>::min(),
              static_cast<uint64_t>(std::numeric_limits<int64_t>::max())};
    case ScalarType::Bool: return {0, 1};
    default: return {0, 0};
  }
}

// Little-endian bytes of the low `size` bytes of v.
void put_le(uint64_t v, size_t size, uint8_t* out) {
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

// One element of a float type from a double (rounded to nearest even).
void encode_float(double v, ScalarType t, uint8_t* out) {
  switch (t) {
    case ScalarType::F16: put_le(to_f16_bits(v), 2, out); break;
    case ScalarType::BF16: put_le(to_bf16_bits(v), 2, out); break;
    case ScalarType::F32: {
      float f = static_cast<float>(v);
      std::memcpy(out, &f, 4);
      break;
    }
    case ScalarType::F64: std::memcpy(out, &v, 8); break;
    default: break;
  }
}

double max_finite(ScalarType t) {
  switch (t) {
    case ScalarType::F16: return 65504.0;
    case ScalarType::BF16: return from_bf16_bits(0x7f7f);
    case ScalarType::F32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

double decode_small_float(uint32_t bits, int ebits, int mbits) {
  const bool negative = (bits >> (ebits + mbits)) & 1u;
  const uint32_t exp_all = (1u << ebits) - 1;
  const uint32_t e = (bits >> mbits) & exp_all;
  const uint32_t m = bits & ((1u << mbits) - 1);
  const int bias = (1 << (ebits - 1)) - 1;
  double v;
  if (e == exp_all)
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), 1 - bias - mbits);
  else
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -mbits), static_cast<int>(e) - bias);
  return negative ? -v : v;
}

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

// Integer text: [+-](decimal | 0x hex). Sets *negative and the magnitude; a magnitude past
// 2^64 - 1 sets *overflow (and is still a well-formed integer).
bool parse_integer(std::string_view text, bool* negative, uint64_t* magnitude, bool* overflow) {
  *overflow = false;
  *negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    *negative = text[0] == '-';
    text.remove_prefix(1);
  }
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *magnitude, base);
  if (ptr != text.data() + text.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    *overflow = true;
    *magnitude = std::numeric_limits<uint64_t>::max();
    return true;
  }
  return ec == std::errc();
}

bool parse_double(std::string_view text, double* out) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  // strtod's ERANGE for underflow is fine (the value rounds to zero or a subnormal).
  if (errno == ERANGE && std::isinf(v)) v = std::copysign(std::numeric_limits<double>::infinity(), v);
  *out = v;
  return true;
}

// splitmix64: the seed mixer and the generator (one 64-bit state, good enough for test data,
// and the same output on every platform).
uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Uniform in [0, span) (span 0 means the full 2^64), by rejection.
uint64_t uniform_below(uint64_t span, uint64_t* state) {
  if (span == 0) return splitmix64(state);
  const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                         std::numeric_limits<uint64_t>::max() % span;
  uint64_t x;
  do x = splitmix64(state);
  while (x >= limit);
  return x % span;
}

}  // namespace

std::string type_name(ScalarType type) {
  switch (type) {
    case ScalarType::U8: return "u8";
    case ScalarType::U16: return "u16";
    case ScalarType::U32: return "u32";
    case ScalarType::U64: return "u64";
    case ScalarType::I8: return "i8";
    case ScalarType::I16: return "i16";
    case ScalarType::I32: return "i32";
    case ScalarType::I64: return "i64";
    case ScalarType::F16: return "f16";
    case ScalarType::BF16: return "bf16";
    case ScalarType::F32: return "f32";
    case ScalarType::F64: return "f64";
    case ScalarType::Bool: return "bool";
  }
  return "type#" + std::to_string(static_cast<int>(type));
}

size_t type_size(ScalarType type) {
  switch (type) {
    case ScalarType::U8: case ScalarType::I8: case ScalarType::Bool: return 1;
    case ScalarType::U16: case ScalarType::I16: case ScalarType::F16: case ScalarType::BF16: return 2;
    case ScalarType::U32: case ScalarType::I32: case ScalarType::F32: return 4;
    case ScalarType::U64: case ScalarType::I64: case ScalarType::F64: return 8;
  }
  return 0;
}

bool is_float_type(ScalarType type) {
  return type == ScalarType::F16 || type == ScalarType::BF16 || type == ScalarType::F32 ||
         type == ScalarType::F64;
}

bool is_signed_type(ScalarType type) {
  return type == ScalarType::I8 || type == ScalarType::I16 || type == ScalarType::I32 ||
         type == ScalarType::I64;
}

// Through float, exactly as the compiler (memset patterns) and the runtime (f16/bf16 params)
// round, so a value means the same bits everywhere in orch.
uint16_t to_f16_bits(double value) { return orch::artifact::half_bits(static_cast<float>(value)); }
uint16_t to_bf16_bits(double value) { return orch::artifact::bfloat_bits(static_cast<float>(value)); }
double from_f16_bits(uint16_t bits) { return decode_small_float(bits, 5, 10); }
double from_bf16_bits(uint16_t bits) { return decode_small_float(bits, 8, 7); }

bool parse_value(std::string_view text, ScalarType type, ScalarValue* value,
                 std::vector<uint8_t>* bytes, std::string* error) {
  const size_t size = type_size(type);
  if (size == 0) {
    *error = "the pipeline declares an unknown element type";
    return false;
  }
  ScalarValue v;
  std::vector<uint8_t> element(size, 0);
  if (is_float_type(type)) {
    double d = 0;
    if (!parse_double(text, &d)) {
      *error = quoted(text) + " is not a number";
      return false;
    }
    if (std::isfinite(d) && std::fabs(d) > max_finite(type)) {
      // Values that round down to the largest finite number are fine (65519 is f16's 65504).
      bool rounds_to_inf = false;
      if (type == ScalarType::F16) rounds_to_inf = (to_f16_bits(d) & 0x7fff) == 0x7c00;
      else if (type == ScalarType::BF16) rounds_to_inf = (to_bf16_bits(d) & 0x7fff) == 0x7f80;
      else if (type == ScalarType::F32) rounds_to_inf = std::isinf(static_cast<float>(d));
      if (rounds_to_inf) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%g", max_finite(type));
        *error = quoted(text) + " is out of the range of " + type_name(type) + " (largest " +
                 buf + ")";
        return false;
      }
    }
    v.kind = ScalarValue::Kind::Float;
    v.f = d;
    encode_float(d, type, element.data());
  } else if (type == ScalarType::Bool) {
    int b = -1;
    if (text == "true" || text == "1") b = 1;
    if (text == "false" || text == "0") b = 0;
    if (b < 0) {
      *error = quoted(text) + " is not a bool (true, false, 1 or 0)";
      return false;
    }
    v.kind = ScalarValue::Kind::Uint;
    v.u = static_cast<uint64_t>(b);
    element[0] = static_cast<uint8_t>(b);
  } else {
    bool negative = false, overflow = false;
    uint64_t magnitude = 0;
    if (!parse_integer(text, &negative, &magnitude, &overflow)) {
      double d;
      *error = quoted(text) + (parse_double(text, &d) ? " is not an integer" : " is not a number");
      return false;
    }
    const IntRange r = int_range(type);
    if (negative && magnitude != 0) {
      // -magnitude >= r.min  <=>  magnitude <= -r.min (as unsigned).
      const uint64_t limit = r.min < 0 ? static_cast<uint64_t>(-(r.min + 1)) + 1 : 0;
      if (overflow || magnitude > limit) {
        *error = quoted(text) + " is below the range of " + type_name(type);
        return false;
      }
      v.kind = ScalarValue::Kind::Int;
      v.i = static_cast<int64_t>(0 - magnitude);  // two's complement, exact for magnitude <= 2^63
    } else {
      if (overflow || magnitude > r.max) {
        *error = quoted(text) + " is above the range of " + type_name(type) + " (largest " +
                 std::to_string(r.max) + ")";
        return false;
      }
      if (is_signed_type(type)) {
        v.kind = ScalarValue::Kind::Int;
        v.i = static_cast<int64_t>(magnitude);
      } else {
        v.kind = ScalarValue::Kind::Uint;
        v.u = magnitude;
      }
    }
    const uint64_t raw = v.kind == ScalarValue::Kind::Int ? static_cast<uint64_t>(v.i) : v.u;
    put_le(raw, size, element.data());
  }
  if (value) *value = v;
  if (bytes) *bytes = std::move(element);
  return true;
}

bool parse_range(std::string_view text, ScalarType type, RandomRange* range, std::string* error) {
  // Numbers hold no ':', so the one ':' separates the bounds.
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || text.find(':', colon + 1) != std::string_view::npos) {
    *error = "expected random:LO:HI, got " + quoted(std::string("random:") + std::string(text));
    return false;
  }
  RandomRange r;
  std::string why;
  if (!parse_value(text.substr(0, colon), type, &r.lo, nullptr, &why) ||
      !parse_value(text.substr(colon + 1), type, &r.hi, nullptr, &why)) {
    *error = why;
    return false;
  }
  bool ordered;
  if (is_float_type(type)) {
    if (!std::isfinite(r.lo.f) || !std::isfinite(r.hi.f)) {
      *error = "the bounds of a random range must be finite";
      return false;
    }
    ordered = r.lo.f <= r.hi.f;
  } else if (is_signed_type(type)) {  // parse_value gives signed types the Int kind
    ordered = r.lo.i <= r.hi.i;
  } else {
    ordered = r.lo.u <= r.hi.u;
  }
  if (!ordered) {
    *error = "the random range " + quoted(text) + " has its low bound above its high bound";
    return false;
  }
  *range = r;
  return true;
}

std::vector<uint8_t> random_bytes(ScalarType type, size_t count, uint64_t seed,
                                  std::string_view buffer_name,
                                  const std::optional<RandomRange>& range) {
  const size_t size = type_size(type);
  std::vector<uint8_t> out(count * size, 0);
  if (size == 0) return out;
  uint64_t mix = seed ^ fnv1a(buffer_name);
  uint64_t state = splitmix64(&mix);
  uint8_t* p = out.data();
  if (is_float_type(type)) {
    const double lo = range ? range->lo.f : 0.0, hi = range ? range->hi.f : 1.0;
    for (size_t i = 0; i < count; ++i, p += size) {
      const double u = static_cast<double>(splitmix64(&state) >> 11) * 0x1.0p-53;  // [0, 1)
      encode_float(lo + u * (hi - lo), type, p);
    }
  } else if (type == ScalarType::Bool) {
    for (size_t i = 0; i < count; ++i) p[i] = static_cast<uint8_t>(splitmix64(&state) >> 63);
  } else if (!range) {
    for (size_t i = 0; i < count; ++i, p += size) put_le(splitmix64(&state), size, p);
  } else {
    // Work in the unsigned offset domain: value = lo + uniform_below(hi - lo + 1).
    auto as_u64 = [](const ScalarValue& v) {
      return v.kind == ScalarValue::Kind::Int ? static_cast<uint64_t>(v.i) : v.u;
    };
    const uint64_t lo = as_u64(range->lo);
    const uint64_t span = as_u64(range->hi) - lo + 1;  // 0 means all 2^64 values
    for (size_t i = 0; i < count; ++i, p += size) put_le(lo + uniform_below(span, &state), size, p);
  }
  return out;
}

std::vector<uint8_t> repeat_element(const std::vector<uint8_t>& element, size_t count) {
  std::vector<uint8_t> out(element.size() * count);
  for (size_t i = 0; i < count; ++i)
    std::memcpy(out.data() + i * element.size(), element.data(), element.size());
  return out;
}

Summary summarize(std::vector<double> samples) {
  Summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.count = n;
  s.min = samples.front();
  s.max = samples.back();
  s.median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  size_t rank = (9 * n + 9) / 10;  // ceil(0.9 n), at least 1
  s.p90 = samples[std::max<size_t>(rank, 1) - 1];
  double sum = 0;
  for (double x : samples) sum += x;
  s.mean = sum / static_cast<double>(n);
  return s;
}

std::string format_ms(double ms) {
  char buf[64];
  if (ms < 1.0)
    std::snprintf(buf, sizeof buf, "%.1f us", ms * 1000.0);
  else if (ms < 1000.0)
    std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  else
    std::snprintf(buf, sizeof buf, "%.3f s", ms / 1000.0);
  return buf;
}

std::string format_bytes(uint64_t bytes) {
  char buf[64];
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else if (bytes < (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  else if (bytes < (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

}  // namespace orch::run

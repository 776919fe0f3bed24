#include "tools/orch_run/values.h"

#include "artifact/expr_code.h"
#include "expr/expr.h"

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

// Little-endian bytes of the low `size` bytes of v.
void put_le(uint64_t v, size_t size, uint8_t* out) {
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

// One element of a float type from a double, rounded to nearest even in the type (expr/).
void encode_float(double v, ScalarType t, uint8_t* out) {
  const expr::ScalarType et = orch::artifact::to_expr(t);
  put_le(expr::Value::of_double(et, expr::round_to(et, v)).storage(), type_size(t), out);
}

double max_finite(ScalarType t) {
  switch (t) {
    case ScalarType::F16: return 65504.0;
    case ScalarType::BF16: return from_bf16_bits(0x7f7f);
    case ScalarType::F32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

// The largest value of an integer type (bool: 1), as text.
std::string largest_integer(ScalarType type) {
  if (type == ScalarType::Bool) return "1";
  const uint32_t bits = 8 * static_cast<uint32_t>(type_size(type)) - (is_signed_type(type) ? 1 : 0);
  return std::to_string(bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1);
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

// The one table of scalar types is expr/'s (the artifact's enum is the same, expr_code.h).
std::string type_name(ScalarType type) {
  const expr::ScalarType t = orch::artifact::to_expr(type);
  return expr::valid(t) ? expr::to_string(t) : "type#" + std::to_string(static_cast<int>(type));
}

size_t type_size(ScalarType type) {
  const expr::ScalarType t = orch::artifact::to_expr(type);
  return expr::valid(t) ? expr::size_of(t) : 0;
}

bool is_float_type(ScalarType type) {
  const expr::ScalarType t = orch::artifact::to_expr(type);
  return expr::valid(t) && expr::is_float(t);
}

bool is_signed_type(ScalarType type) {
  const expr::ScalarType t = orch::artifact::to_expr(type);
  return expr::valid(t) && expr::is_integer(t) && expr::is_signed(t);
}

// expr/'s rounding, directly from double, as the compiler and the runtime round, so a value
// means the same bits everywhere in orch.
uint16_t to_f16_bits(double value) {
  return static_cast<uint16_t>(
      expr::Value::of_double(expr::ScalarType::F16, expr::round_to(expr::ScalarType::F16, value)).storage());
}
uint16_t to_bf16_bits(double value) {
  return static_cast<uint16_t>(
      expr::Value::of_double(expr::ScalarType::BF16, expr::round_to(expr::ScalarType::BF16, value)).storage());
}
double from_f16_bits(uint16_t bits) { return expr::Value::from_storage(expr::ScalarType::F16, bits).f64(); }
double from_bf16_bits(uint16_t bits) { return expr::Value::from_storage(expr::ScalarType::BF16, bits).f64(); }

bool parse_value(std::string_view text, ScalarType type, ScalarValue* value,
                 std::vector<uint8_t>* bytes, std::string* error) {
  const size_t size = type_size(type);
  if (size == 0) {
    *error = "the pipeline declares an unknown element type";
    return false;
  }
  // The text as a value (an f64, a bool, or an integer of i64 or u64), then expr::convert into the
  // type: exact or refused, as the runtime binds it.
  const expr::ScalarType et = orch::artifact::to_expr(type);
  expr::Value parsed;
  if (is_float_type(type)) {
    double d = 0;
    if (!parse_double(text, &d)) {
      *error = quoted(text) + " is not a number";
      return false;
    }
    parsed = expr::Value::of_double(expr::ScalarType::F64, d);
  } else if (type == ScalarType::Bool) {
    int b = -1;
    if (text == "true" || text == "1") b = 1;
    if (text == "false" || text == "0") b = 0;
    if (b < 0) {
      *error = quoted(text) + " is not a bool (true, false, 1 or 0)";
      return false;
    }
    parsed = expr::Value::of_bool(b == 1);
  } else {
    bool negative = false, overflow = false;
    uint64_t magnitude = 0;
    if (!parse_integer(text, &negative, &magnitude, &overflow)) {
      double d;
      *error = quoted(text) + (parse_double(text, &d) ? " is not an integer" : " is not a number");
      return false;
    }
    if (negative && magnitude != 0) {
      if (overflow || magnitude > (uint64_t(1) << 63)) {
        *error = quoted(text) + " is below the range of " + type_name(type);
        return false;
      }
      parsed = expr::Value::of_int(expr::ScalarType::I64, static_cast<int64_t>(0 - magnitude));
    } else if (overflow) {
      *error = quoted(text) + " is above the range of " + type_name(type) + " (largest " + largest_integer(type) + ")";
      return false;
    } else {
      parsed = expr::Value::of_uint(expr::ScalarType::U64, magnitude);
    }
  }
  const expr::Outcome c = expr::convert(parsed, et);
  if (!c.ok()) {
    if (is_float_type(type)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", max_finite(type));
      *error = quoted(text) + " is out of the range of " + type_name(type) + " (largest " + buf + ")";
    } else if (parsed.negative()) {
      *error = quoted(text) + " is below the range of " + type_name(type);
    } else {
      *error = quoted(text) + " is above the range of " + type_name(type) + " (largest " + largest_integer(type) + ")";
    }
    return false;
  }
  ScalarValue v;
  if (c.value.is_float()) {
    v.kind = ScalarValue::Kind::Float;
    v.f = parsed.f64();
  } else if (is_signed_type(type)) {
    v.kind = ScalarValue::Kind::Int;
    v.i = c.value.i64();
  } else {
    v.kind = ScalarValue::Kind::Uint;
    v.u = c.value.u64();
  }
  std::vector<uint8_t> element(size, 0);
  put_le(c.value.storage(), size, element.data());
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

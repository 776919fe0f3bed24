#include <cmath>
#include <cstring>

#include "lowering/passes.h"

namespace orch::lowering {

namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// IEEE binary16, round to nearest even.
uint16_t half_bits(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff)
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

uint16_t bfloat_bits(float f) {
  uint32_t x = float_bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

// The bytes of `v` stored as `t`, little-endian, in the low bits.
uint64_t encode(const ir::Value& v, ir::ScalarType t) {
  double d = v.as_double();
  int64_t i = v.is_float ? static_cast<int64_t>(d) : v.i;
  switch (t) {
    case ir::ScalarType::F16:
      return half_bits(static_cast<float>(d));
    case ir::ScalarType::BF16:
      return bfloat_bits(static_cast<float>(d));
    case ir::ScalarType::F32:
      return float_bits(static_cast<float>(d));
    case ir::ScalarType::F64: {
      uint64_t u;
      std::memcpy(&u, &d, 8);
      return u;
    }
    case ir::ScalarType::Bool:
      return i != 0;
    default:
      break;
  }
  uint32_t bits = ir::size_of(t) * 8;
  uint64_t u = static_cast<uint64_t>(i);
  return bits == 64 ? u : u & ((uint64_t(1) << bits) - 1);
}

std::optional<ir::Value> constant_value(const ir::Expr& e) {
  if (e.kind == ir::ExprKind::Const) return e.value;
  if (e.kind == ir::ExprKind::Unary && e.op == "-" && e.operands[0].kind == ir::ExprKind::Const) {
    ir::Value v = e.operands[0].value;
    if (v.is_float)
      v.f = -v.f;
    else
      v.i = static_cast<int64_t>(0 - static_cast<uint64_t>(v.i));
    return v;
  }
  return std::nullopt;
}

}  // namespace

void plan_fills(ir::Program& p) {
  for_each_region(p, [&](ir::Region& region, int) {
    for (ir::Node& n : region.nodes) {
      if (n.kind != ir::NodeKind::Fill) continue;
      const ir::Buffer& b = p.buffers[n.dst];
      auto v = constant_value(n.value);
      // Param-valued fills and fills of mapped host memory run as kernels: a memset node
      // needs its value at instantiation and device memory to write.
      if (!v || b.host) continue;
      uint64_t bits = encode(*v, b.elem);
      uint32_t size = ir::size_of(b.elem);
      if (size <= 4) {
        n.memset_value = static_cast<uint32_t>(bits);
        n.memset_element_size = static_cast<uint8_t>(size);
      } else if ((bits >> 32) == (bits & 0xffffffffu)) {
        n.memset_value = static_cast<uint32_t>(bits);
        n.memset_element_size = 4;
      }
    }
  });
}

}  // namespace orch::lowering

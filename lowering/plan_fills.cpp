#include <cmath>
#include <cstring>

#include "artifact/scalar_bits.h"
#include "lowering/passes.h"

namespace orch::lowering {

namespace {

using artifact::bfloat_bits;
using artifact::float_bits;
using artifact::half_bits;

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

#include "lowering/passes.h"

namespace orch::lowering {

std::optional<MemsetPattern> memset_pattern(const mir::Program& p, const mir::Node& n) {
  if (!n.is<mir::FillNode>()) return std::nullopt;
  const mir::FillNode& fill = n.as<mir::FillNode>();
  const mir::Buffer& b = p.buffers[fill.dst];
  // Param-valued fills and fills of mapped host memory run as kernels: a memset node
  // needs its value at instantiation and device memory to write.
  if (mir::depends_on_host_values(fill.value) || b.host) return std::nullopt;
  expr::Evaluation v =
      expr::evaluate(mir::to_postfix(fill.value), [](const expr::Instr&) { return std::nullopt; });
  if (!v.known()) return std::nullopt;
  expr::Outcome c = expr::convert(v.value, b.elem);  // the checker proved it converts
  if (!c.ok()) return std::nullopt;
  const uint64_t bits = c.value.storage();
  const uint32_t size = mir::size_of(b.elem);
  if (size <= 4) return MemsetPattern{static_cast<uint32_t>(bits), static_cast<uint8_t>(size)};
  if ((bits >> 32) == (bits & 0xffffffffu)) return MemsetPattern{static_cast<uint32_t>(bits), 4};
  return std::nullopt;
}

}  // namespace orch::lowering

#include "lowering/passes.h"

namespace orch::lowering {

void plan_fills(ir::Program& p) {
  for_each_region(p, [&](ir::Region& region, int) {
    for (ir::Node& n : region.nodes) {
      if (n.kind != ir::NodeKind::Fill) continue;
      const ir::Buffer& b = p.buffers[n.dst];
      // Param-valued fills and fills of mapped host memory run as kernels: a memset node
      // needs its value at instantiation and device memory to write.
      if (ir::depends_on_host_values(n.value) || b.host) continue;
      expr::Evaluation v = expr::evaluate(ir::to_postfix(n.value), [](const expr::Instr&) { return std::nullopt; });
      if (!v.known()) continue;
      expr::Outcome c = expr::convert(v.value, b.elem);  // the checker proved it converts
      if (!c.ok()) continue;
      const uint64_t bits = c.value.storage();
      const uint32_t size = ir::size_of(b.elem);
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

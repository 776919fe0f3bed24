#include "artifact/artifact.h"
#include "lowering/passes.h"

namespace orch::lowering {

// Every rank must issue the same collectives in the same order, on buffers of the same type
// and size expression, or NCCL hangs. Ranks compare this hash when they bind, so two
// different pipelines fail with a clear error instead.
void hash_collectives(ir::Program& p) {
  std::string sequence;
  std::vector<int> order = p.segments.empty() ? std::vector<int>{p.main_graph} : p.segments;
  for (int g : order) {
    if (g < 0) continue;
    for (const ir::Node& n : p.graphs[g].body.nodes) {
      if (n.kind != ir::NodeKind::Collective) continue;
      const ir::Buffer& src = p.buffers[n.src];
      const ir::Buffer& dst = p.buffers[n.dst];
      sequence += std::string(ir::to_string(n.collective)) + " " + n.reduce_op + " " +
                  ir::to_string(src.elem) + " " +
                  (src.count ? ir::to_string(*src.count, p) : std::string("1")) + " -> " +
                  (dst.count ? ir::to_string(*dst.count, p) : std::string("1")) + " on " +
                  p.comms[n.comm].name + (n.root ? " root " + ir::to_string(*n.root, p) : "") +
                  ";";
    }
  }
  p.collective_hash = sequence.empty() ? 0 : artifact::xxh64(sequence.data(), sequence.size());
}

}  // namespace orch::lowering

#include "artifact/artifact.h"
#include "lowering/passes.h"

namespace orch::lowering {

// Every rank must issue the same collectives in the same order, on buffers of the same type
// and size expression, or NCCL hangs. Ranks compare this hash when they bind, so two
// different pipelines fail with a clear error instead.
void hash_collectives(lir::Program& p) {
  std::string sequence;
  std::vector<int> order = p.segments.empty() ? std::vector<int>{p.main_graph} : p.segments;
  for (int g : order) {
    if (g < 0) continue;
    for (const lir::Node& n : p.graphs[g].body.nodes) {
      const auto* c = std::get_if<lir::CollectiveNode>(&n.op);
      if (!c) continue;
      const lir::Buffer& src = p.buffers[c->src];
      const lir::Buffer& dst = p.buffers[c->dst];
      sequence += std::string(mir::to_string(c->kind)) + " " + mir::to_string(c->op) + " " +
                  expr::to_string(src.elem) + " " +
                  (src.count ? src.count->text : std::string("1")) + " -> " +
                  (dst.count ? dst.count->text : std::string("1")) + " on " +
                  p.comms[c->comm].name + (c->root ? " root " + c->root->text : "") + ";";
    }
  }
  p.collective_hash = sequence.empty() ? 0 : artifact::xxh64(sequence.data(), sequence.size());
}

}  // namespace orch::lowering

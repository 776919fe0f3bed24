// Dependencies within a graph body: statements are in program order, and an edge is kept
// only where a read-after-write, write-after-read or write-after-write on some buffer needs
// it and no other path already orders the two (transitive reduction).
#pragma once

#include "compiler/program.h"

namespace orch {

// Fills region.edges (and the edges of every nested body) from the nodes' accesses.
void derive_edges(ir::Region& region);

// True if `from` must finish before `to` starts: a path of edges leads from one to the other.
bool is_ordered(const ir::Region& region, int from, int to);

// What derive_edges computes for one region, for any program's nodes (lowering's rebuild_edges
// too): per node in program order, its accesses and the conditional handles it sets (-1: the
// enclosing `while kernel`'s); returns the edges, transitively reduced.
struct EdgeSource {
  const std::vector<ir::BufferAccess>* accesses = nullptr;
  std::vector<int> handles;
};
std::vector<ir::Edge> reduced_edges(const std::vector<EdgeSource>& nodes);
bool is_ordered(const std::vector<ir::Edge>& edges, size_t nodes, int from, int to);

}  // namespace orch

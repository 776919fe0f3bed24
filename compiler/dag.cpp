#include "compiler/dag.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <iterator>
#include <queue>
#include <stdexcept>
#include <unordered_map>

namespace orch {

namespace {

using DepGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                       boost::no_property, ir::Edge>;

// Conditional handles a node sets with cudaGraphSetConditional: its `cond` arguments (-1, the
// innermost `while kernel`'s handle), and for a conditional node what its bodies set (a nested
// `while kernel`'s `cond` is its own).
void handles_set(const ir::Node& n, bool in_own_loop, std::vector<int>& out) {
  const ir::KernelNode* launch = std::get_if<ir::KernelNode>(&n.op);
  for (const ir::KernelArg& a : launch ? launch->args : std::vector<ir::KernelArg>{})
    if (a.kind == ir::ArgKind::Cond && !in_own_loop && std::find(out.begin(), out.end(), -1) == out.end())
      out.push_back(-1);
  const bool own = n.is<ir::WhileNode>() && !n.as<ir::WhileNode>().cond;
  for (const ir::Region& body : ir::bodies(n))
    for (const ir::Node& child : body.nodes) handles_set(child, in_own_loop || own, out);
}

// Every ordering the sequential meaning needs, before reduction: for each buffer, the last
// writer and the readers since, as a single pass in program order. Nodes that set the same
// conditional handle are ordered too: concurrent cudaGraphSetConditional calls on one handle
// are undefined (cuda_device_runtime_api.h), and in program order the last one wins.
std::vector<ir::Edge> dependencies(const std::vector<EdgeSource>& nodes) {
  struct BufferState {
    int last_writer = -1;
    std::vector<int> readers;
  };
  std::unordered_map<int, BufferState> state;
  std::unordered_map<int, int> last_setter;  // per handle
  std::vector<ir::Edge> edges;
  for (int j = 0; j < static_cast<int>(nodes.size()); ++j) {
    for (const ir::BufferAccess& a : *nodes[j].accesses) {
      BufferState& s = state[a.buffer];
      if (a.read && s.last_writer >= 0)
        edges.push_back({s.last_writer, j, a.buffer, ir::DepKind::RAW});
      if (a.write) {
        for (int r : s.readers)
          if (r != j) edges.push_back({r, j, a.buffer, ir::DepKind::WAR});
        // With readers in between, the writer is already ordered through them.
        if (s.readers.empty() && !a.read && s.last_writer >= 0)
          edges.push_back({s.last_writer, j, a.buffer, ir::DepKind::WAW});
      }
    }
    // After the buffer edges, so that a pair ordered by both is labelled by its buffer.
    for (int h : nodes[j].handles) {
      auto [it, first] = last_setter.emplace(h, j);
      if (!first) {
        edges.push_back({it->second, j, -1, ir::DepKind::Condition});
        it->second = j;
      }
    }
    for (const ir::BufferAccess& a : *nodes[j].accesses) {
      BufferState& s = state[a.buffer];
      if (a.write) {
        s.last_writer = j;
        s.readers.clear();
      } else if (a.read) {
        s.readers.push_back(j);
      }
    }
  }
  // One edge per pair: the first reason found labels it.
  std::stable_sort(edges.begin(), edges.end(), [](const ir::Edge& a, const ir::Edge& b) {
    return std::tie(a.to, a.from) < std::tie(b.to, b.from);
  });
  edges.erase(std::unique(edges.begin(), edges.end(),
                          [](const ir::Edge& a, const ir::Edge& b) {
                            return a.from == b.from && a.to == b.to;
                          }),
              edges.end());
  return edges;
}

}  // namespace

void derive_edges(ir::Region& region) {
  std::vector<EdgeSource> nodes(region.nodes.size());
  for (size_t i = 0; i < region.nodes.size(); ++i) {
    ir::Node& n = region.nodes[i];
    for (ir::Region& body : ir::bodies(n)) derive_edges(body);
    nodes[i].accesses = &n.accesses;
    handles_set(n, false, nodes[i].handles);
  }
  region.edges = reduced_edges(nodes);
}

bool is_ordered(const ir::Region& region, int from, int to) {
  return is_ordered(region.edges, region.nodes.size(), from, to);
}

std::vector<ir::Edge> reduced_edges(const std::vector<EdgeSource>& nodes) {
  const int n = static_cast<int>(nodes.size());
  DepGraph g(n);
  for (const ir::Edge& e : dependencies(nodes)) boost::add_edge(e.from, e.to, e, g);

  // Edges only point forward in program order, so the graph is acyclic by construction;
  // the sort is the structural check that it stays so.
  std::vector<DepGraph::vertex_descriptor> order;
  try {
    boost::topological_sort(g, std::back_inserter(order));
  } catch (const boost::not_a_dag&) {
    throw std::logic_error("orch internal error: dependency graph has a cycle");
  }

  // Transitive reduction. Node indices are a topological order. For each node v, visit its
  // direct predecessors latest first; one that is already an ancestor of a later kept
  // predecessor is redundant. Any path from a predecessor u to a later one runs through nodes
  // between them, so the ancestors of the kept predecessors are explored latest first (a
  // max-heap) and only as far down as the predecessor being tested: a far predecessor that a
  // near one already reaches costs one step, not a walk over everything in between (10,000
  // statements that all read one early buffer would otherwise take quadratic time).
  std::vector<int> mark(n, -1);
  std::priority_queue<int> frontier;
  std::vector<ir::Edge> kept;
  kept.reserve(boost::num_edges(g));
  std::vector<std::pair<int, ir::Edge>> preds;
  for (int v = 0; v < n; ++v) {
    preds.clear();
    for (auto [it, end] = boost::in_edges(v, g); it != end; ++it)
      preds.push_back({static_cast<int>(boost::source(*it, g)), g[*it]});
    if (preds.empty()) continue;
    std::sort(preds.begin(), preds.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    const int floor = preds.back().first;
    frontier = {};
    for (const auto& [u, edge] : preds) {
      while (mark[u] != v && !frontier.empty() && frontier.top() > u) {
        int x = frontier.top();
        frontier.pop();
        for (auto [it, end] = boost::in_edges(x, g); it != end; ++it) {
          int w = static_cast<int>(boost::source(*it, g));
          if (w >= floor && mark[w] != v) {
            mark[w] = v;
            frontier.push(w);
          }
        }
      }
      if (mark[u] == v) continue;  // reachable through a later predecessor
      kept.push_back(edge);
      mark[u] = v;
      frontier.push(u);
    }
  }
  std::sort(kept.begin(), kept.end(), [](const ir::Edge& a, const ir::Edge& b) {
    return std::tie(a.from, a.to) < std::tie(b.from, b.to);
  });
  return kept;
}

bool is_ordered(const std::vector<ir::Edge>& edges, size_t nodes, int from, int to) {
  if (from == to) return false;
  std::vector<std::vector<int>> succ(nodes);
  for (const ir::Edge& e : edges) succ[e.from].push_back(e.to);
  std::vector<bool> seen(nodes, false);
  std::vector<int> stack{from};
  while (!stack.empty()) {
    int x = stack.back();
    stack.pop_back();
    for (int y : succ[x]) {
      if (y == to) return true;
      if (!seen[y]) {
        seen[y] = true;
        stack.push_back(y);
      }
    }
  }
  return false;
}

}  // namespace orch

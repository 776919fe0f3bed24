#include <algorithm>
#include <unordered_map>

#include "lowering/passes.h"

namespace orch::lowering {

namespace {

// Is `from` an ancestor of `to`? Node indices are a topological order, so the backward
// search never goes below `from`.
bool reaches(const std::vector<std::vector<int>>& preds, int from, int to, std::vector<int>& mark,
             int stamp) {
  std::vector<int> stack{to};
  while (!stack.empty()) {
    int x = stack.back();
    stack.pop_back();
    for (int w : preds[x]) {
      if (w == from) return true;
      if (w > from && mark[w] != stamp) {
        mark[w] = stamp;
        stack.push_back(w);
      }
    }
  }
  return false;
}

// Conditional handles a node sets (cudaGraphSetConditional), its bodies included.
void handles_set(const ir::Node& n, std::vector<int>& out) {
  for (const ir::KernelArg& a : n.args)
    if (a.kind == ir::ArgKind::CondHandle &&
        std::find(out.begin(), out.end(), a.ref) == out.end())
      out.push_back(a.ref);
  for (const ir::Region& b : n.bodies)
    for (const ir::Node& child : b.nodes) handles_set(child, out);
}

bool verify_region(const ir::Program& p, const ir::Graph& g, const ir::Region& r,
                   DiagnosticEngine& diags) {
  bool ok = true;
  for (const ir::Node& n : r.nodes)
    for (const ir::Region& b : n.bodies) ok &= verify_region(p, g, b, diags);

  const int n = static_cast<int>(r.nodes.size());
  std::vector<std::vector<int>> preds(n);
  for (const ir::Edge& e : r.edges) {
    if (e.from >= e.to) {
      diags.error("E0899", r.nodes[e.to].loc,
                  "internal compiler error: graph `" + g.name + "` has a backward edge");
      return false;
    }
    preds[e.to].push_back(e.from);
  }
  // Every conflicting pair, found afresh from the accesses: per buffer, the last writer and
  // the readers since; each later access must be reachable from them.
  struct State {
    int writer = -1;
    std::vector<int> readers;
  };
  std::unordered_map<int, State> state;
  std::unordered_map<int, int> setter;  // per handle, the last node that sets it
  std::vector<int> mark(n, -1);
  int stamp = 0;
  for (int j = 0; j < n; ++j) {
    for (const ir::BufferAccess& a : r.nodes[j].accesses) {
      State& s = state[a.buffer];
      std::vector<int> must;
      if (s.writer >= 0) must.push_back(s.writer);
      if (a.write)
        for (int rd : s.readers) must.push_back(rd);
      for (int i : must) {
        if (i == j || reaches(preds, i, j, mark, ++stamp)) continue;
        Diagnostic& d = diags.error("E0899", r.nodes[j].loc,
                                    "internal compiler error: in graph `" + g.name +
                                        "`, nothing orders this node after "
                                        "the node it conflicts with on `" +
                                        p.buffers[a.buffer].name + "`");
        diags.add_note(d, r.nodes[i].loc, "the earlier node");
        ok = false;
      }
    }
    // Two nodes that set one handle must not run at once (concurrent cudaGraphSetConditional
    // calls are undefined).
    std::vector<int> handles;
    handles_set(r.nodes[j], handles);
    for (int h : handles) {
      auto [it, first] = setter.emplace(h, j);
      if (first) continue;
      if (!reaches(preds, it->second, j, mark, ++stamp)) {
        Diagnostic& d = diags.error("E0899", r.nodes[j].loc,
                                    "internal compiler error: in graph `" + g.name +
                                        "`, nothing orders this node after an earlier node that "
                                        "sets the same conditional handle");
        diags.add_note(d, r.nodes[it->second].loc, "the earlier node");
        ok = false;
      }
      it->second = j;
    }
    // The kernel that sets a conditional node's handle must run before the node.
    if (r.nodes[j].handle >= 0 && !r.nodes[j].bodies.empty()) {
      for (int i = 0; i < j; ++i) {
        bool sets = false;
        for (const ir::KernelArg& arg : r.nodes[i].args)
          sets |= arg.kind == ir::ArgKind::CondHandle && arg.ref == r.nodes[j].handle;
        if (!sets || reaches(preds, i, j, mark, ++stamp)) continue;
        Diagnostic& d = diags.error("E0899", r.nodes[j].loc,
                                    "internal compiler error: in graph `" + g.name +
                                        "`, this conditional node may run before the kernel "
                                        "that sets its condition");
        diags.add_note(d, r.nodes[i].loc, "the condition kernel");
        ok = false;
      }
    }
    for (const ir::BufferAccess& a : r.nodes[j].accesses) {
      State& s = state[a.buffer];
      if (a.write) {
        s.writer = j;
        s.readers.clear();
      } else if (a.read) {
        s.readers.push_back(j);
      }
    }
  }
  return ok;
}

}  // namespace

bool verify_ordering(const ir::Program& p, DiagnosticEngine& diags) {
  bool ok = true;
  for (const ir::Graph& g : p.graphs) ok &= verify_region(p, g, g.body, diags);
  return ok;
}

}  // namespace orch::lowering

// The ordering verifier: every conflicting pair of accesses is joined by a path of dependencies
// (full or programmatic: programmatic_edges.cpp says why both order memory), conditional handles
// are set in order and before their nodes, and every programmatic edge is one that orders.
#include <algorithm>
#include <string>
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
void handles_set(const lir::Node& n, std::vector<int>& out) {
  std::visit(lir::overloaded{
                 [&](const lir::KernelNode& k) {
                   for (const lir::KernelArg& a : k.args)
                     if (a.kind == lir::ArgKind::CondHandle &&
                         std::find(out.begin(), out.end(), a.ref) == out.end())
                       out.push_back(a.ref);
                 },
                 [&](const lir::ConditionalNode& c) {
                   for (const lir::Body& b : c.bodies)
                     for (const lir::Node& child : b.nodes) handles_set(child, out);
                 },
                 [](const lir::MemcpyNode&) {}, [](const lir::MemsetNode&) {},
                 [](const lir::EmptyNode&) {}, [](const lir::CollectiveNode&) {},
             },
             n.op);
}

// Does kernel node `n` set handle `h`?
bool sets_handle(const lir::Node& n, int h) {
  const auto* k = std::get_if<lir::KernelNode>(&n.op);
  if (!k) return false;
  for (const lir::KernelArg& a : k->args)
    if (a.kind == lir::ArgKind::CondHandle && a.ref == h) return true;
  return false;
}

// Why a programmatic edge into node `to` from node `from` is not allowed, or "" (see
// programmatic_edges.cpp: it orders memory like a full edge only into a kernel that waits at
// entry, between kernels that launch nothing from the device, where CUDA is known to take it).
std::string programmatic_problem(const lir::Program& p, const lir::Graph& g, bool in_body, const lir::Node& from,
                                 const lir::Node& to) {
  if (!p.pdl) return "programmatic edges are off for this program (option or targets)";
  if (in_body && !p.pdl_in_bodies) return "a programmatic edge inside a conditional body";
  if (g.device && !p.pdl_in_device_graphs) return "a programmatic edge in a graph launched from the device";
  for (const lir::Node* n : {&from, &to}) {
    const auto* k = std::get_if<lir::KernelNode>(&n->op);
    if (!k) return std::string("a programmatic edge ") + (n == &to ? "into" : "from") + " a " + lir::kind_name(n->op) +
                   " node";
    const lir::Kernel& kernel = p.kernels[k->kernel];
    bool launches = kernel.launches_kernels || kernel.may_launch_kernels || !kernel.budgets.empty();
    for (const lir::KernelArg& a : k->args)
      launches |= a.kind == lir::ArgKind::GraphExec || a.kind == lir::ArgKind::GraphTable;
    if (launches) return "a programmatic edge joins kernel `" + kernel.name + "`, which launches work from the device";
    if (n == &to && !kernel.waits_at_entry)
      return "a programmatic edge enters kernel `" + kernel.name +
             "`, which does not wait at entry: it could touch memory before the kernel it depends on has finished";
  }
  return "";
}

bool verify_body(const lir::Program& p, const lir::Graph& g, const lir::Body& r, bool in_body,
                 DiagnosticEngine& diags) {
  bool ok = true;
  for (const lir::Node& n : r.nodes)
    if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op))
      for (const lir::Body& b : c->bodies) ok &= verify_body(p, g, b, true, diags);

  const int n = static_cast<int>(r.nodes.size());
  std::vector<std::vector<int>> preds(n);
  for (int to = 0; to < n; ++to) {
    for (const lir::Dep& d : r.nodes[to].deps) {
      if (static_cast<int64_t>(d.from) >= to) {
        diags.error("E0899", r.nodes[to].loc,
                    "internal compiler error: graph `" + g.name + "` has a backward edge");
        return false;
      }
      preds[to].push_back(static_cast<int>(d.from));
      if (d.kind == lir::DepKind::Programmatic) {
        std::string problem = programmatic_problem(p, g, in_body, r.nodes[d.from], r.nodes[to]);
        if (!problem.empty()) {
          Diagnostic& diag = diags.error("E0899", r.nodes[to].loc,
                                         "internal compiler error: in graph `" + g.name + "`, " + problem);
          diags.add_note(diag, r.nodes[d.from].loc, "the node it depends on");
          ok = false;
        }
      }
    }
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
    for (const lir::BufferAccess& a : r.nodes[j].accesses) {
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
    if (const auto* c = std::get_if<lir::ConditionalNode>(&r.nodes[j].op); c && c->handle >= 0) {
      for (int i = 0; i < j; ++i) {
        if (!sets_handle(r.nodes[i], c->handle) || reaches(preds, i, j, mark, ++stamp)) continue;
        Diagnostic& d = diags.error("E0899", r.nodes[j].loc,
                                    "internal compiler error: in graph `" + g.name +
                                        "`, this conditional node may run before the kernel "
                                        "that sets its condition");
        diags.add_note(d, r.nodes[i].loc, "the condition kernel");
        ok = false;
      }
    }
    for (const lir::BufferAccess& a : r.nodes[j].accesses) {
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

bool verify_ordering(const lir::Program& p, DiagnosticEngine& diags) {
  bool ok = true;
  for (const lir::Graph& g : p.graphs) ok &= verify_body(p, g, g.body, false, diags);
  return ok;
}

}  // namespace orch::lowering

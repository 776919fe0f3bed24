// The ordering verifier: every conflicting pair of accesses is joined by a path of dependencies
// (full or programmatic: programmatic_edges.cpp says why both order memory), conditional handles
// are set in order and before their nodes, no two while loops can run at once, every programmatic
// edge is one that orders, and the guards of unrolled loops follow their protocol.
#include <algorithm>
#include <map>
#include <set>
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

// The guards of unrolled copies in one body (unroll_loops.cpp has the protocol and why it is
// exact): "" or what is wrong.
std::string guard_problem(const lir::Program& p, const lir::Body& r) {
  std::map<std::pair<int, uint32_t>, std::vector<size_t>> copies;
  std::map<int, std::pair<size_t, size_t>> span;  // loop -> first and last guarded node
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    const lir::Node& n = r.nodes[i];
    if (!n.guard) continue;
    const mir::Guard& g = *n.guard;
    const std::string at = "node " + std::to_string(i) + " (" + n.what + ")";
    if (g.loop < 0 || static_cast<size_t>(g.loop) >= p.unrolled_loops.size() || g.copy < 2 ||
        g.copy > p.unrolled_loops[g.loop].copies)
      return at + " is guarded for a loop or copy that does not exist";
    const auto* kn = std::get_if<lir::KernelNode>(&n.op);
    if (!kn) return at + " is guarded but not a kernel node";
    const lir::Kernel& k = p.kernels[kn->kernel];
    if (!k.guard || k.guard->loop != g.loop || k.guard->role != g.role ||
        (k.generated && k.guard->copy != g.copy))
      return at + " runs kernel `" + k.name + "`, which does not hold this node's guard";
    if (k.generated ? k.source.find(kGuardPlaceholder) != std::string::npos : k.guard_of < 0 || k.guard_code.empty())
      return at + " runs kernel `" + k.name + "`, whose guard code is missing";
    if (kn->args.size() != k.params.size()) return at + " passes the wrong number of arguments to its guard";
    copies[{g.loop, g.copy}].push_back(i);
    auto [it, first] = span.emplace(g.loop, std::make_pair(i, i));
    if (!first) it->second.second = i;
  }
  for (const auto& [loop, s] : span) {
    // Copies 2..U of a loop are contiguous, in order, and nothing unguarded sits among them.
    uint32_t copy = 2;
    for (size_t i = s.first; i <= s.second; ++i) {
      const lir::Node& n = r.nodes[i];
      if (!n.guard || n.guard->loop != loop)
        return "node " + std::to_string(i) + " (" + n.what + ") sits among loop " + std::to_string(loop) +
               "'s guarded copies without a guard of its own";
      if (n.guard->copy < copy) return "loop " + std::to_string(loop) + "'s copies are out of order";
      copy = n.guard->copy;
    }
    // A kernel after the copies sets the slots back to undecided before the next iteration.
    bool reset = false;
    for (size_t j = s.second + 1; j < r.nodes.size(); ++j)
      for (const lir::BufferAccess& a : r.nodes[j].accesses)
        reset |= a.buffer == p.unrolled_loops[loop].slots && a.write;
    if (!reset) return "nothing resets loop " + std::to_string(loop) + "'s guard slots after its copies";
  }
  for (const auto& [key, members] : copies) {
    const std::set<size_t> in(members.begin(), members.end());
    size_t deciders = 0, writing_deciders = 0;
    for (size_t i : members) {
      const lir::Node& n = r.nodes[i];
      bool preceded = false;
      for (const lir::Dep& d : n.deps) preceded |= in.count(d.from) > 0;
      const std::string at = "node " + std::to_string(i) + " (" + n.what + ")";
      const mir::GuardRole role = n.guard->role;
      if (role == mir::GuardRole::Follow) {
        if (!preceded) return at + " follows its copy's decision, but no node of its copy comes before it";
        continue;
      }
      if (preceded) return at + " decides for its copy, but another node of its copy comes before it";
      if (role == mir::GuardRole::Race) continue;
      ++deciders;
      // Each block decides for itself: they agree only if none can see another's writes.
      const bool writes = writes_condition(n, p.unrolled_loops[static_cast<size_t>(key.first)]);
      if (writes && !one_block(n))
        return at + " lets each of its blocks decide for its copy, but may run more than one block and writes what "
                    "the condition reads";
      // Every thread decides for itself: they agree only if nothing in the kernel changes the
      // condition while its threads read it.
      if (role == mir::GuardRole::Each && writes)
        return at + " lets every thread decide for its copy, but writes what the condition reads";
      if (role == mir::GuardRole::Alone && members.size() != 1)
        return at + " keeps its copy's decision to itself, but its copy has other nodes";
      writing_deciders += writes;
    }
    if (deciders > 0 && members.size() - deciders > 0 &&
        std::any_of(members.begin(), members.end(),
                    [&](size_t i) { return r.nodes[i].guard->role == mir::GuardRole::Race; }))
      return "a copy of loop " + std::to_string(key.first) + " mixes deciders with racing ones";
    if (deciders > 1 && writing_deciders > 0)
      return "a copy of loop " + std::to_string(key.first) +
             " has more than one decider, and one of them writes what the condition reads";
  }
  return "";
}

bool verify_body(const lir::Program& p, const lir::Graph& g, const lir::Body& r, bool in_body,
                 DiagnosticEngine& diags) {
  bool ok = true;
  for (const lir::Node& n : r.nodes)
    if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op))
      for (const lir::Body& b : c->bodies) ok &= verify_body(p, g, b, true, diags);
  if (std::string problem = guard_problem(p, r); !problem.empty()) {
    diags.error(DiagCode::E0899, r.nodes.empty() ? g.loc : r.nodes.front().loc,
                "internal compiler error: in graph `" + g.name + "`, " + problem);
    ok = false;
  }

  const int n = static_cast<int>(r.nodes.size());
  std::vector<std::vector<int>> preds(n);
  for (int to = 0; to < n; ++to) {
    for (const lir::Dep& d : r.nodes[to].deps) {
      if (static_cast<int64_t>(d.from) >= to) {
        diags.error(DiagCode::E0899, r.nodes[to].loc,
                    "internal compiler error: graph `" + g.name + "` has a backward edge");
        return false;
      }
      preds[to].push_back(static_cast<int>(d.from));
      if (d.kind == lir::DepKind::Programmatic) {
        std::string problem = programmatic_problem(p, g, in_body, r.nodes[d.from], r.nodes[to]);
        if (!problem.empty()) {
          Diagnostic& diag = diags.error(DiagCode::E0899, r.nodes[to].loc,
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
  int last_loop = -1;
  for (int j = 0; j < n; ++j) {
    for (const lir::BufferAccess& a : r.nodes[j].accesses) {
      State& s = state[a.buffer];
      std::vector<int> must;
      if (s.writer >= 0) must.push_back(s.writer);
      if (a.write)
        for (int rd : s.readers) must.push_back(rd);
      for (int i : must) {
        if (i == j || reaches(preds, i, j, mark, ++stamp)) continue;
        Diagnostic& d = diags.error(DiagCode::E0899, r.nodes[j].loc,
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
        Diagnostic& d = diags.error(DiagCode::E0899, r.nodes[j].loc,
                                    "internal compiler error: in graph `" + g.name +
                                        "`, nothing orders this node after an earlier node that "
                                        "sets the same conditional handle");
        diags.add_note(d, r.nodes[it->second].loc, "the earlier node");
        ok = false;
      }
      it->second = j;
    }
    // No two nodes that hold while loops run at once (one_loop_at_a_time.cpp says why); each
    // after the one before it orders them all.
    if (lir::holds_while(r.nodes[j])) {
      if (last_loop >= 0 && !reaches(preds, last_loop, j, mark, ++stamp)) {
        Diagnostic& d = diags.error(DiagCode::E0899, r.nodes[j].loc,
                                    "internal compiler error: in graph `" + g.name +
                                        "`, this while loop may run at the same time as an earlier one");
        diags.add_note(d, r.nodes[last_loop].loc, "the earlier loop");
        ok = false;
      }
      last_loop = j;
    }
    // The kernel that sets a conditional node's handle must run before the node.
    if (const auto* c = std::get_if<lir::ConditionalNode>(&r.nodes[j].op); c && c->handle >= 0) {
      for (int i = 0; i < j; ++i) {
        if (!sets_handle(r.nodes[i], c->handle) || reaches(preds, i, j, mark, ++stamp)) continue;
        Diagnostic& d = diags.error(DiagCode::E0899, r.nodes[j].loc,
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

// The memory plan's verifier: plan_memory.cpp's outcome checked again by separate code, from the
// nodes' operands (not the accesses the planner read) and with its own ordering search, so that
// a planner bug is an internal error (E0899) here rather than two buffers corrupting each other
// on the GPU. It proves, for the plan as recorded:
// - every arena buffer may share at all: a device array that is not `keep`, not orchc's, used by
//   no collective and by no graph launched from the device, and used somewhere;
// - every read of an arena buffer follows a write of all of it on every path (the write is a
//   plain node, not guarded, in a body that holds the read, ordered before the read's node there,
//   or at the top level of an earlier launch), so no launch reads what another buffer left;
// - a result (a write no later read consumes) is written at the top level of a launch;
// - any two arena buffers the plan does not list as a conflict are ordered: every use of one
//   before every use of the other (uses in different bodies of one `if`/`switch` exclusive, two
//   in one `while` never ordered), and the earlier one is no result;
// - the layout at the defaults keeps conflicting buffers apart (artifact::check_arena).
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "artifact/arena.h"
#include "lowering/passes.h"

namespace orch::lowering {

namespace {

// A node's place: its launch, then (body, node index) from the top-level graph's body down.
struct Site {
  size_t launch = 0;
  std::vector<std::pair<const lir::Body*, size_t>> path;
  const lir::Node* node = nullptr;
};

struct Access {
  Site site;
  bool read = false, write = false, whole = false, guarded = false;
};

enum class Rel { Earlier, Later, Either, Unordered };

class Verifier {
 public:
  Verifier(const lir::Program& p, DiagnosticEngine& diags) : p_(p), plan_(p.memory_plan), diags_(diags) {}

  bool run() {
    if (!plan_.ran) {
      if (!plan_.slots.empty() || !plan_.conflicts.empty()) fail(nowhere(), "planning is off, yet buffers share an arena");
      return ok_;
    }
    if (!structure()) return ok_;
    collect();
    for (size_t s = 0; s < plan_.slots.size(); ++s) buffer_rules(s);
    if (!ok_) return ok_;
    std::vector<std::vector<bool>> conflict(plan_.slots.size(), std::vector<bool>(plan_.slots.size(), false));
    for (const auto& [a, b] : plan_.conflicts) conflict[a][b] = true;
    for (size_t a = 0; a < plan_.slots.size(); ++a)
      for (size_t b = a + 1; b < plan_.slots.size(); ++b)
        if (!conflict[a][b]) pair_rules(a, b);
    layout_rules();
    return ok_;
  }

 private:
  void fail(const SourceRange& at, const std::string& what) {
    diags_.error(DiagCode::E0899, at, "internal compiler error: the memory plan " + what);
    ok_ = false;
  }
  SourceRange nowhere() const { return p_.main_graph >= 0 ? p_.graphs[p_.main_graph].loc : SourceRange{}; }
  const std::string& name(size_t slot) const { return p_.buffers[plan_.slots[slot].buffer].name; }

  bool structure() {
    const size_t n = p_.buffers.size();
    if (plan_.status.size() != n) {
      fail(nowhere(), "has no status for every buffer");
      return false;
    }
    int last = -1;
    for (const lir::MemoryPlan::Slot& s : plan_.slots) {
      if (s.buffer <= last || static_cast<size_t>(s.buffer) >= n) {
        fail(nowhere(), "lists arena buffers out of order or out of range");
        return false;
      }
      last = s.buffer;
    }
    slot_of_.assign(n, -1);
    for (size_t i = 0; i < plan_.slots.size(); ++i) slot_of_[plan_.slots[i].buffer] = static_cast<int>(i);
    for (size_t b = 0; b < n; ++b)
      if ((slot_of_[b] >= 0) != (plan_.status[b] == lir::PlanStatus::Arena)) {
        fail(p_.buffers[b].loc, "says `" + p_.buffers[b].name + "` " + (slot_of_[b] >= 0 ? "does not share" : "shares") +
                                    ", and lays it out as if it " + (slot_of_[b] >= 0 ? "did" : "did not"));
        return false;
      }
    std::pair<uint32_t, uint32_t> previous{0, 0};
    for (size_t i = 0; i < plan_.conflicts.size(); ++i) {
      const auto c = plan_.conflicts[i];
      if (c.first >= c.second || c.second >= plan_.slots.size() || (i > 0 && !(previous < c))) {
        fail(nowhere(), "lists a conflict that is out of order or names no arena buffer");
        return false;
      }
      previous = c;
    }
    return true;
  }

  // Every use of every buffer, from the operands of every node.
  void collect() {
    std::vector<int> launches = p_.segments;
    if (launches.empty() && p_.main_graph >= 0) launches.push_back(p_.main_graph);
    uses_.assign(p_.buffers.size(), {});
    in_device_graph_.assign(p_.buffers.size(), false);
    in_collective_.assign(p_.buffers.size(), false);
    for (size_t g = 0; g < p_.graphs.size(); ++g) {
      const auto it = std::find(launches.begin(), launches.end(), static_cast<int>(g));
      Site site;
      site.launch = static_cast<size_t>(it - launches.begin());
      visit(p_.graphs[g].body, site, it == launches.end());
    }
  }

  void visit(const lir::Body& body, Site& site, bool device) {
    for (size_t i = 0; i < body.nodes.size(); ++i) {
      const lir::Node& n = body.nodes[i];
      site.path.emplace_back(&body, i);
      if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op)) {
        for (const lir::Body& b : c->bodies) visit(b, site, device);
      } else {
        site.node = &n;
        operands(n, site);
        for (size_t i = 0; i < accesses_.size(); ++i) {
          if (device) in_device_graph_[buffer_of_[i]] = true;
          else uses_[buffer_of_[i]].push_back(accesses_[i]);
        }
      }
      site.path.pop_back();
    }
  }

  // What node `n` reads and writes, one access per buffer, from its operands: into accesses_,
  // with each one's buffer in buffer_of_.
  void operands(const lir::Node& n, const Site& site) {
    accesses_.clear();
    buffer_of_.clear();
    auto add = [&](int b, bool read, bool write, bool whole) {
      if (b < 0 || static_cast<size_t>(b) >= p_.buffers.size()) return;
      for (size_t i = 0; i < accesses_.size(); ++i)
        if (buffer_of_[i] == static_cast<size_t>(b)) {
          accesses_[i].read |= read;
          accesses_[i].write |= write;
          accesses_[i].whole = false;  // a node that touches it twice: never a clean whole write
          return;
        }
      Access a;
      a.site = site;
      a.read = read;
      a.write = write;
      a.whole = whole && write && !read;
      a.guarded = n.guard.has_value();
      accesses_.push_back(std::move(a));
      buffer_of_.push_back(static_cast<size_t>(b));
    };
    std::visit(lir::overloaded{
                   [&](const lir::KernelNode& k) {
                     const lir::Kernel& kernel = p_.kernels[k.kernel];
                     for (size_t i = 0; i < k.args.size() && i < kernel.params.size(); ++i) {
                       if (k.args[i].kind != lir::ArgKind::Buffer) continue;
                       const lir::Access m = kernel.params[i].access;
                       add(k.args[i].ref, m != lir::Access::Out, m != lir::Access::In, m == lir::Access::Out);
                     }
                   },
                   [&](const lir::MemcpyNode& m) {
                     add(m.src, true, false, false);
                     add(m.dst, false, true, same_size(m.src, m.dst));
                   },
                   [&](const lir::MemsetNode& m) { add(m.dst, false, true, true); },
                   [&](const lir::CollectiveNode& c) {
                     for (int b : {c.src, c.dst})
                       if (b >= 0 && static_cast<size_t>(b) < in_collective_.size()) in_collective_[b] = true;
                     add(c.src, true, false, false);
                     add(c.dst, false, true, false);
                   },
                   [](const lir::EmptyNode&) {},
                   [](const lir::ConditionalNode&) {},
               },
               n.op);
  }

  bool same_size(int src, int dst) const {
    const lir::Buffer& s = p_.buffers[src];
    const lir::Buffer& d = p_.buffers[dst];
    if (s.elem != d.elem || !s.count || !d.count || s.count->code.size() != d.count->code.size()) return false;
    for (size_t i = 0; i < s.count->code.size(); ++i) {
      const expr::Instr& x = s.count->code[i];
      const expr::Instr& y = d.count->code[i];
      if (x.kind != y.kind || x.op != y.op || x.type != y.type || x.ref != y.ref || !(x.value == y.value)) return false;
    }
    return true;
  }

  // Does node `from` come before node `to` in `body` (a path of dependencies)? Each node's set
  // of ancestors is found once, by a backward search.
  bool precedes(const lir::Body* body, size_t from, size_t to) {
    auto key = std::make_pair(body, to);
    auto it = ancestors_.find(key);
    if (it == ancestors_.end()) {
      std::vector<bool> seen(to + 1, false);
      std::vector<size_t> stack{to};
      while (!stack.empty()) {
        const size_t x = stack.back();
        stack.pop_back();
        for (const lir::Dep& d : body->nodes[x].deps)
          if (d.from < x && !seen[d.from]) {
            seen[d.from] = true;
            stack.push_back(d.from);
          }
      }
      it = ancestors_.emplace(key, std::move(seen)).first;
    }
    return from < it->second.size() && it->second[from];
  }

  // `within`: two uses of one buffer, ordered inside a `while` body as in one iteration (each
  // iteration repeats the order); between buffers the loop is one use.
  Rel relation(const Access& a, const Access& b, bool within = false) {
    if (a.site.launch != b.site.launch) return a.site.launch < b.site.launch ? Rel::Earlier : Rel::Later;
    const auto& x = a.site.path;
    const auto& y = b.site.path;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (x[k].first != y[k].first) return Rel::Either;  // different bodies of one if/switch
      if (x[k].second != y[k].second) {
        if (precedes(x[k].first, x[k].second, y[k].second)) return Rel::Earlier;
        if (precedes(x[k].first, y[k].second, x[k].second)) return Rel::Later;
        return Rel::Unordered;
      }
      const lir::Node& n = x[k].first->nodes[x[k].second];
      const auto* c = std::get_if<lir::ConditionalNode>(&n.op);
      if (!c || (c->type == lir::ConditionalType::While && !within)) return Rel::Unordered;
    }
    return Rel::Unordered;  // one node holds both
  }

  // Does write `w` cover buffer before read `r` runs, on every path to `r`?
  bool dominates(const Access& w, const Access& r) {
    if (!w.whole || w.guarded) return false;
    if (w.site.launch != r.site.launch) return w.site.launch < r.site.launch && w.site.path.size() == 1;
    const auto& x = w.site.path;
    const auto& y = r.site.path;
    const size_t k = x.size() - 1;  // w's own level
    if (y.size() <= k) return false;
    for (size_t i = 0; i < k; ++i)
      if (x[i] != y[i]) return false;
    return x[k].first == y[k].first && x[k].second != y[k].second && precedes(x[k].first, x[k].second, y[k].second);
  }

  // A write no later read of the buffer consumes: the buffer is a result. Found once per buffer.
  bool result(size_t buffer) {
    if (result_.size() != uses_.size()) result_.assign(uses_.size(), -1);
    if (result_[buffer] < 0) result_[buffer] = find_result(buffer);
    return result_[buffer] == 1;
  }
  bool find_result(size_t buffer) {
    for (const Access& w : uses_[buffer]) {
      if (!w.write) continue;
      bool consumed = false;
      for (const Access& r : uses_[buffer]) consumed |= r.read && &r != &w && relation(w, r, true) == Rel::Earlier;
      if (!consumed) return true;
    }
    return false;
  }

  void buffer_rules(size_t slot) {
    const size_t b = static_cast<size_t>(plan_.slots[slot].buffer);
    const lir::Buffer& buf = p_.buffers[b];
    std::string why;
    if (buf.host) why = "is host memory";
    else if (buf.is_scalar()) why = "is a device scalar";
    else if (buf.keep) why = "is declared `keep`";
    else if (buf.name.rfind("orch.", 0) == 0) why = "is orchc's own";
    else if (in_collective_[b]) why = "is a collective's buffer";
    else if (in_device_graph_[b]) why = "is used by a graph launched from the device";
    else if (uses_[b].empty()) why = "is used by no node";
    if (!why.empty()) return fail(buf.loc, "puts `" + buf.name + "` in the arena, but it " + why);
    for (const Access& r : uses_[b]) {
      if (!r.read) continue;
      bool covered = false;
      for (const Access& w : uses_[b]) covered |= &w != &r && dominates(w, r);
      if (!covered) {
        Diagnostic& d = diags_.error(DiagCode::E0899, buf.loc,
                                     "internal compiler error: the memory plan puts `" + buf.name +
                                         "` in the arena, but a node may read it before anything writes all of it");
        diags_.add_note(d, r.site.node->loc, "the read");
        ok_ = false;
        return;
      }
    }
    if (result(b)) {
      bool top = false;
      for (const Access& w : uses_[b]) top |= w.whole && !w.guarded && w.site.path.size() == 1;
      if (!top)
        fail(buf.loc, "puts `" + buf.name +
                          "` in the arena, but it is a result that some launches may not write at all");
    }
  }

  void pair_rules(size_t a, size_t b) {
    const size_t x = static_cast<size_t>(plan_.slots[a].buffer), y = static_cast<size_t>(plan_.slots[b].buffer);
    bool earlier = false, later = false;
    for (const Access& u : uses_[x])
      for (const Access& v : uses_[y]) {
        const Rel r = relation(u, v);
        earlier |= r == Rel::Earlier;
        later |= r == Rel::Later;
        if (r == Rel::Unordered || (earlier && later)) {
          Diagnostic& d = diags_.error(DiagCode::E0899, u.site.node->loc,
                                       "internal compiler error: the memory plan lets `" + name(a) + "` and `" +
                                           name(b) + "` share memory, but " +
                                           (r == Rel::Unordered ? "nothing orders this use of `" + name(a) + "` and a use of `" + name(b) + "`"
                                                                : "their uses interleave"));
          diags_.add_note(d, v.site.node->loc, "the use of `" + name(b) + "`");
          ok_ = false;
          return;
        }
      }
    // What comes first must not be a result: the later buffer overwrites it before the
    // application reads it.
    const bool x_result = result(x), y_result = result(y);
    if ((x_result && (earlier || !later)) || (y_result && (later || !earlier)))
      fail(p_.buffers[x_result ? x : y].loc,
           "lets `" + name(a) + "` and `" + name(b) + "` share memory, but `" + p_.buffers[x_result ? x : y].name +
               "`, a result the application reads after the launch, is not the later of the two");
  }

  void layout_rules() {
    if (!plan_.laid_out) return;
    std::vector<uint64_t> bytes, offsets;
    for (const lir::MemoryPlan::Slot& s : plan_.slots) {
      bytes.push_back(s.bytes);
      offsets.push_back(s.offset);
    }
    const std::string problem = artifact::check_arena(bytes, offsets, plan_.conflicts, plan_.arena_bytes);
    if (!problem.empty()) fail(nowhere(), "lays the arena out wrongly at the defaults: " + problem);
  }

  const lir::Program& p_;
  const lir::MemoryPlan& plan_;
  DiagnosticEngine& diags_;
  bool ok_ = true;
  std::vector<int> slot_of_;
  std::vector<std::vector<Access>> uses_;  // per buffer, from host-launched graphs
  std::vector<bool> in_device_graph_, in_collective_;
  std::vector<Access> accesses_;   // operands()' result
  std::vector<size_t> buffer_of_;  // the buffer of each of accesses_
  std::map<std::pair<const lir::Body*, size_t>, std::vector<bool>> ancestors_;
  std::vector<int> result_;  // per buffer: -1 not yet known, else result()
};

}  // namespace

bool verify_memory_plan(const lir::Program& program, DiagnosticEngine& diags) {
  return Verifier(program, diags).run();
}

}  // namespace orch::lowering

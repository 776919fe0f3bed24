// Memory planning (issue 24): buffers that are never in use at the same time share memory, in one
// arena the runtime allocates per instantiation.
//
// A use is a node that reads or writes the buffer. Two buffers may share bytes only when every
// use of one is ordered before every use of the other by the final dependencies (full and
// programmatic edges alike: programmatic_edges.cpp shows both order memory), with these extents:
// - Uses in different top-level graphs of one launch (segments) are ordered by launch order.
// - A conditional node holds its bodies' uses: a use inside it against one outside is the
//   conditional node against the other.
// - A `while` body runs many times, so two uses inside one loop are never ordered (the loop is one
//   use for its whole extent). Two uses in different bodies of one `if`/`switch` never run in one
//   execution of it: exclusive, ordered either way; two in the same body are ordered as in it.
// - Graphs launched from the device, collectives' buffers, host buffers, device scalars, `keep`
//   buffers and orchc's own are never planned (lir::PlanStatus says why for each).
// Sharing also must not change what a launch reads or what the application reads afterwards:
// - a planned buffer is written in full before any read, in every launch (ReadFirst otherwise:
//   its contents carry from the last launch or from the application). The first write is one
//   node with no conditional between it and the innermost body holding every use, not guarded
//   (an unrolled copy may not run), and ordered before every other use; it covers the buffer: a
//   memset, a copy from a buffer of the same count and type, or a kernel that only writes it (an
//   `out` parameter: the kernel writes every element a later statement reads, as declared).
// - a result, a buffer some write of which no later read consumes, is what the application reads
//   after the launch: it comes after every buffer it shares with, and it is written at the top
//   level of a launch (ResultSometimes otherwise: some launches would leave the old contents).
//
// verify_memory_plan.cpp checks the outcome with its own code; artifact/arena.h lays it out.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "artifact/arena.h"
#include "lowering/passes.h"

namespace orch::lowering {

namespace {

// Beyond these the pass plans nothing more (TooMany): its work grows with the square of both.
constexpr size_t kMaxPlanned = 1024;
constexpr size_t kMaxUses = 4096;
constexpr size_t kMaxReachWords = size_t(1) << 24;  // 128 MiB of reachability bits in all
constexpr int kLaunches = 0;                         // the body id of the launch order

struct Level {
  int body = 0;       // kLaunches, or a conditional's body (or a top-level graph's)
  uint32_t node = 0;  // the launch (segment) at kLaunches, else the node in the body
  bool operator==(const Level& o) const { return body == o.body && node == o.node; }
};

struct Use {
  std::vector<Level> at;  // from the launch order down to the node itself
  bool read = false, write = false;
  bool full = false;     // its write covers every byte
  bool guarded = false;  // a node of an unrolled copy, which may not run
};

enum class Order { Before, After, Exclusive, Conflict };

// Which relevant nodes of one body reach which: per node, the relevant nodes it depends on
// (transitively), as bits.
struct Reach {
  std::vector<int> index;  // node -> bit, or -1
  size_t words = 0;
  std::vector<uint64_t> ancestors;
  bool reaches(uint32_t from, uint32_t to) const {
    const int r = index[from];
    return r >= 0 && (ancestors[to * words + static_cast<size_t>(r) / 64] >> (r % 64)) & 1;
  }
};

bool same_code(const std::vector<expr::Instr>& a, const std::vector<expr::Instr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].kind != b[i].kind || a[i].op != b[i].op || a[i].type != b[i].type || a[i].ref != b[i].ref ||
        !(a[i].value == b[i].value))
      return false;
  return true;
}

class Planner {
 public:
  explicit Planner(lir::Program& p) : p_(p), plan_(p.memory_plan) {}

  std::vector<std::string> run() {
    const size_t n = p_.buffers.size();
    plan_.status.assign(n, lir::PlanStatus::Unused);
    uses_.resize(n);
    declarations();
    std::vector<int> launches = p_.segments;
    if (launches.empty() && p_.main_graph >= 0) launches.push_back(p_.main_graph);
    bodies_.push_back(nullptr);  // kLaunches
    // In launch order, so that uses come in program order.
    for (size_t l = 0; l < launches.size(); ++l) {
      std::vector<Level> path{{kLaunches, static_cast<uint32_t>(l)}};
      walk(p_.graphs[launches[l]].body, new_body(&p_.graphs[launches[l]].body), path);
    }
    for (size_t g = 0; g < p_.graphs.size(); ++g) {
      if (std::find(launches.begin(), launches.end(), static_cast<int>(g)) != launches.end()) continue;
      // Launched from the device (or never): not a node of any DAG this pass can order.
      lir::for_each_node(p_.graphs[g].body, [&](const lir::Node& node) {
        for (const lir::BufferAccess& a : node.accesses) refuse(a.buffer, lir::PlanStatus::DeviceGraph);
      });
    }
    candidates();
    if (!build_reach()) {
      for (int b : planned_) plan_.status[b] = lir::PlanStatus::TooMany;
      planned_.clear();
    }
    properties();
    pairs();
    layout();
    return notes();
  }

 private:
  bool open(int b) const { return plan_.status[b] == lir::PlanStatus::Unused; }
  void refuse(int b, lir::PlanStatus why) {
    if (b >= 0 && static_cast<size_t>(b) < plan_.status.size() && open(b)) plan_.status[b] = why;
  }

  void declarations() {
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      const lir::Buffer& b = p_.buffers[i];
      if (b.host) plan_.status[i] = lir::PlanStatus::Host;
      else if (b.is_scalar()) plan_.status[i] = lir::PlanStatus::Scalar;
      else if (b.keep) plan_.status[i] = lir::PlanStatus::Keep;
      else if (b.name.rfind("orch.", 0) == 0) plan_.status[i] = lir::PlanStatus::Generated;
    }
  }

  int new_body(const lir::Body* b) {
    bodies_.push_back(b);
    return static_cast<int>(bodies_.size() - 1);
  }

  void walk(const lir::Body& body, int id, std::vector<Level>& path) {
    for (uint32_t i = 0; i < body.nodes.size(); ++i) {
      const lir::Node& n = body.nodes[i];
      path.push_back({id, i});
      if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op)) {
        for (const lir::Body& b : c->bodies) walk(b, new_body(&b), path);
      } else {
        leaf(n, path);
      }
      path.pop_back();
    }
  }

  void leaf(const lir::Node& n, const std::vector<Level>& path) {
    if (const auto* c = std::get_if<lir::CollectiveNode>(&n.op)) {
      refuse(c->src, lir::PlanStatus::Collective);
      refuse(c->dst, lir::PlanStatus::Collective);
    }
    for (const lir::BufferAccess& a : n.accesses) {
      if (a.buffer < 0 || static_cast<size_t>(a.buffer) >= p_.buffers.size()) continue;
      std::vector<Use>& list = uses_[a.buffer];
      if (!list.empty() && list.back().at == path) {  // the same node again: one use
        list.back().read |= a.read;
        list.back().write |= a.write;
        list.back().full = false;
        continue;
      }
      Use u;
      u.at = path;
      u.read = a.read;
      u.write = a.write;
      u.guarded = n.guard.has_value();
      u.full = a.write && !a.read && covers(n, a.buffer);
      list.push_back(std::move(u));
    }
  }

  // Whether node `n`'s write of buffer `b` covers all of it.
  bool covers(const lir::Node& n, int b) const {
    return std::visit(lir::overloaded{
                          [&](const lir::KernelNode&) { return true; },  // `out`: as declared
                          [&](const lir::MemsetNode& m) { return m.dst == b; },
                          [&](const lir::MemcpyNode& m) {
                            const lir::Buffer& s = p_.buffers[m.src];
                            const lir::Buffer& d = p_.buffers[m.dst];
                            return m.dst == b && s.elem == d.elem && s.count && d.count &&
                                   same_code(s.count->code, d.count->code);
                          },
                          [](const lir::EmptyNode&) { return false; },
                          [](const lir::ConditionalNode&) { return false; },
                          [](const lir::CollectiveNode&) { return false; },
                      },
                      n.op);
  }

  void candidates() {
    size_t total = 0;
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      if (!open(static_cast<int>(b))) continue;
      if (uses_[b].empty()) continue;  // stays Unused
      if (planned_.size() >= kMaxPlanned || total + uses_[b].size() > kMaxUses) {
        plan_.status[b] = lir::PlanStatus::TooMany;
        continue;
      }
      total += uses_[b].size();
      planned_.push_back(static_cast<int>(b));
    }
  }

  // Reachability among the nodes where some planned buffer's uses sit, body by body.
  bool build_reach() {
    std::vector<std::vector<uint32_t>> relevant(bodies_.size());
    for (int b : planned_)
      for (const Use& u : uses_[b])
        for (const Level& l : u.at) relevant[l.body].push_back(l.node);
    reach_.assign(bodies_.size(), {});
    size_t words_total = 0;
    for (size_t id = 1; id < bodies_.size(); ++id) {
      std::vector<uint32_t>& r = relevant[id];
      if (r.empty()) continue;
      std::sort(r.begin(), r.end());
      r.erase(std::unique(r.begin(), r.end()), r.end());
      const lir::Body& body = *bodies_[id];
      Reach& x = reach_[id];
      x.index.assign(body.nodes.size(), -1);
      for (size_t k = 0; k < r.size(); ++k) x.index[r[k]] = static_cast<int>(k);
      x.words = (r.size() + 63) / 64;
      words_total += x.words * body.nodes.size();
      if (words_total > kMaxReachWords) return false;
      x.ancestors.assign(x.words * body.nodes.size(), 0);
      // Node order is a topological order (every dependency is an earlier node).
      for (size_t j = 0; j < body.nodes.size(); ++j) {
        uint64_t* to = &x.ancestors[j * x.words];
        for (const lir::Dep& d : body.nodes[j].deps) {
          const uint64_t* from = &x.ancestors[d.from * x.words];
          for (size_t w = 0; w < x.words; ++w) to[w] |= from[w];
          if (const int bit = x.index[d.from]; bit >= 0) to[bit / 64] |= uint64_t(1) << (bit % 64);
        }
      }
    }
    return true;
  }

  // How use `u` stands to use `v`. Between two buffers a `while` is one use; for two uses of one
  // buffer (`within` true) the order inside the body holds in every iteration, which is what
  // the first write and the reads of a result need.
  Order order(const Use& u, const Use& v, bool within = false) const {
    for (size_t k = 0;; ++k) {
      const Level& a = u.at[k];
      const Level& b = v.at[k];
      if (a.node != b.node) {
        if (a.body == kLaunches) return a.node < b.node ? Order::Before : Order::After;
        if (reach_[a.body].reaches(a.node, b.node)) return Order::Before;
        if (reach_[a.body].reaches(b.node, a.node)) return Order::After;
        return Order::Conflict;
      }
      if (k + 1 == u.at.size() || k + 1 == v.at.size()) return Order::Conflict;  // one node uses both
      if (a.body == kLaunches) continue;  // the same launch: into its graph
      const auto& c = std::get<lir::ConditionalNode>(bodies_[a.body]->nodes[a.node].op);
      if (c.type == lir::ConditionalType::While && !within) return Order::Conflict;  // iterations interleave
      if (u.at[k + 1].body != v.at[k + 1].body) return Order::Exclusive;
    }
  }

  // Defined first, results, per planned buffer.
  void properties() {
    result_.assign(p_.buffers.size(), false);
    std::vector<int> kept;
    for (int b : planned_) {
      const std::vector<Use>& uses = uses_[b];
      // The innermost body every use is inside.
      size_t home = 0;
      for (;; ++home) {
        bool same = uses[0].at.size() > home + 1;
        for (size_t i = 1; same && i < uses.size(); ++i)
          same = uses[i].at.size() > home + 1 && uses[i].at[home + 1].body == uses[0].at[home + 1].body;
        if (!same) break;
      }
      // Uses come in program order, and a use ordered before another comes first in it: only
      // the first can be the write before all others.
      const Use& u = uses[0];
      bool first = u.write && !u.read && u.full && !u.guarded &&
                   (u.at.size() == home + 1 || (home == 0 && u.at.size() == 2));
      for (size_t v = 1; first && v < uses.size(); ++v) first = order(u, uses[v], true) == Order::Before;
      if (!first) {
        plan_.status[b] = lir::PlanStatus::ReadFirst;
        continue;
      }
      bool consumed = true;
      for (const Use& w : uses) {
        if (!w.write) continue;
        bool read_after = false;
        for (const Use& r : uses) read_after |= r.read && order(w, r, true) == Order::Before;
        consumed &= read_after;
      }
      if (!consumed && u.at.size() != 2) {
        plan_.status[b] = lir::PlanStatus::ResultSometimes;
        continue;
      }
      result_[b] = !consumed;
      kept.push_back(b);
    }
    planned_ = std::move(kept);
  }

  // May buffers `a` and `b` share bytes?
  bool compatible(int a, int b) const {
    bool before = result_[b], after = result_[a];  // a result comes after what it shares with
    for (const Use& u : uses_[a])
      for (const Use& v : uses_[b]) {
        switch (order(u, v)) {
          case Order::Before: before = true; break;
          case Order::After: after = true; break;
          case Order::Exclusive: break;
          case Order::Conflict: return false;
        }
        if (before && after) return false;
      }
    return !(before && after);
  }

  void pairs() {
    const size_t n = planned_.size();
    std::vector<std::vector<bool>> ok(n, std::vector<bool>(n, false));
    std::vector<bool> partner(n, false);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = i + 1; j < n; ++j)
        if (compatible(planned_[i], planned_[j])) ok[i][j] = ok[j][i] = partner[i] = partner[j] = true;
    std::vector<size_t> slot_of(n, SIZE_MAX);
    for (size_t i = 0; i < n; ++i) {
      if (!partner[i]) {
        plan_.status[planned_[i]] = lir::PlanStatus::NoPartner;
        continue;
      }
      slot_of[i] = plan_.slots.size();
      plan_.status[planned_[i]] = lir::PlanStatus::Arena;
      plan_.slots.push_back({planned_[i], 0, 0});
    }
    for (size_t i = 0; i < n; ++i)
      for (size_t j = i + 1; j < n; ++j)
        if (slot_of[i] != SIZE_MAX && slot_of[j] != SIZE_MAX && !ok[i][j])
          plan_.conflicts.emplace_back(static_cast<uint32_t>(slot_of[i]), static_cast<uint32_t>(slot_of[j]));
  }

  // Bytes of buffer `b` with the params' defaults, or nullopt.
  std::optional<uint64_t> bytes_at_defaults(const lir::Buffer& b) const {
    const uint64_t size = mir::size_of(b.elem);
    if (!b.count) return size;
    expr::Evaluation v = expr::evaluate(b.count->code, [&](const expr::Instr& in) -> std::optional<expr::Value> {
      if (in.kind == expr::InstrKind::Param && in.ref >= 0 && static_cast<size_t>(in.ref) < p_.params.size())
        return p_.params[in.ref].default_value;
      return std::nullopt;  // world_size: known once a communicator is bound
    });
    if (!v.known() || v.value.negative() || v.value.magnitude() > UINT64_MAX / size) return std::nullopt;
    return v.value.magnitude() * size;
  }

  void layout() {
    std::vector<uint64_t> bytes;
    plan_.laid_out = true;
    for (const lir::MemoryPlan::Slot& s : plan_.slots) {
      std::optional<uint64_t> b = bytes_at_defaults(p_.buffers[s.buffer]);
      plan_.laid_out &= b.has_value();
      bytes.push_back(b.value_or(0));
    }
    if (plan_.laid_out) {
      artifact::ArenaLayout l = artifact::pack_arena(bytes, plan_.conflicts);
      plan_.laid_out = l.ok();
      if (l.ok()) {
        for (size_t i = 0; i < plan_.slots.size(); ++i) {
          plan_.slots[i].offset = l.offsets[i];
          plan_.slots[i].bytes = bytes[i];
        }
        plan_.arena_bytes = l.bytes;
      }
    }
    // Device memory at the defaults, one by one and with the arena.
    plan_.sized = plan_.laid_out;
    uint64_t separate = 0, planned = plan_.arena_bytes;
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      if (p_.buffers[i].host) continue;
      std::optional<uint64_t> b = bytes_at_defaults(p_.buffers[i]);
      plan_.sized &= b.has_value();
      separate += b.value_or(0);
      if (plan_.status[i] != lir::PlanStatus::Arena) planned += b.value_or(0);
    }
    plan_.device_bytes_separate = plan_.sized ? separate : 0;
    plan_.device_bytes_planned = plan_.sized ? planned : 0;
  }

  std::vector<std::string> notes() const {
    std::vector<std::string> out;
    if (plan_.slots.empty()) {
      out.push_back("no buffers share memory");
    } else {
      out.push_back(std::to_string(plan_.slots.size()) + " buffers share an arena" +
                    (plan_.laid_out ? " of " + std::to_string(plan_.arena_bytes) + " bytes at the defaults"
                                    : " laid out at instantiate (sizes unknown at the defaults)"));
    }
    for (size_t i = 0; i < p_.buffers.size(); ++i)
      if (plan_.status[i] != lir::PlanStatus::Arena)
        out.push_back("`" + p_.buffers[i].name + "` does not share: " + lir::to_string(plan_.status[i]));
    return out;
  }

  lir::Program& p_;
  lir::MemoryPlan& plan_;
  std::vector<const lir::Body*> bodies_;
  std::vector<std::vector<Use>> uses_;  // per buffer, in program order
  std::vector<int> planned_;
  std::vector<Reach> reach_;
  std::vector<bool> result_;  // per buffer: written last (the application reads it)
};

}  // namespace

std::vector<std::string> plan_memory(lir::Program& program, bool enabled) {
  program.memory_plan = lir::MemoryPlan{};
  if (!enabled) {
    program.memory_plan.status.assign(program.buffers.size(), lir::PlanStatus::Off);
    return {"planning is off (--no-memory-plan): every buffer is allocated alone"};
  }
  program.memory_plan.ran = true;
  return Planner(program).run();
}

}  // namespace orch::lowering

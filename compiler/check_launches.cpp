// The device-launch model, once every graph is built: what runs before what when kernels
// launch graphs, and how many launches of one executable graph can be pending at once
// (E0606-E0611; docs/diagnostics.md). CUDA's rules, from the Programming Guide, "Device Graph
// Launch":
// - a graph launched from the device runs in its own execution environment, which holds its
//   work and all its fire-and-forget launches (and theirs); it is complete when all of it is;
// - tail launches run when the launching graph's environment is complete, one at a time in
//   the order they were enqueued, and tail launches enqueued by a tail graph run before the
//   rest of the list;
// - a sibling launch is a fire-and-forget launch from the launching graph's parent
//   environment, so the launching graph's tail launches do not wait for it;
// - launching a device graph from the device while a launch of it is running fails
//   (cudaErrorInvalidValue); a graph may have one self tail launch pending.
#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <set>

#include "compiler/checker.h"

namespace orch::detail {

namespace {

// One launch a top-level node of a graph makes: a `launch` statement, or a graph argument
// of a kernel with its budget.
struct Site {
  int node = -1;
  int param = -1;  // the kernel's graph parameter; -1 for a `launch` statement
  int target = -1;
  ir::LaunchMode mode = ir::LaunchMode::Tail;
  uint64_t count = 1;
  bool self = false;
  bool whole_family = false;          // a graph[N] argument: up to `count` distinct members
  const ir::Expr* member = nullptr;   // `launch family[e]`
};

bool concurrent(ir::LaunchMode m) { return m != ir::LaunchMode::Tail; }

std::vector<Site> sites_of(const ir::Program& p, int g) {
  std::vector<Site> out;
  const ir::Region& body = p.graphs[g].body;
  for (size_t i = 0; i < body.nodes.size(); ++i) {
    const ir::Node& node = body.nodes[i];
    switch (node.kind()) {
      case ir::NodeKind::LaunchGraph: {
        const ir::LaunchGraphNode& n = node.as<ir::LaunchGraphNode>();
        if (n.graph < 0) break;
        Site s;
        s.node = static_cast<int>(i);
        s.target = n.graph;
        s.mode = n.mode;
        s.member = n.family_member ? &*n.family_member : nullptr;
        // Of a family, only the launching member itself: `launch stage[j]` inside `stage[j: N]`.
        s.self = n.graph == g &&
                 (!s.member || s.member->kind == ir::ExprKind::FamilyIndex);
        out.push_back(s);
        break;
      }
      case ir::NodeKind::Kernel: {
        const ir::KernelNode& n = node.as<ir::KernelNode>();
        if (n.kernel < 0) break;
        const ir::Kernel& k = p.kernels[n.kernel];
        if (n.args.size() != k.params.size()) continue;  // an argument failed to check
        for (const ir::LaunchBudget& b : k.budgets) {
          const ir::KernelArg& a = n.args[b.param];
          if (a.kind != ir::ArgKind::Graph && a.kind != ir::ArgKind::GraphFamily) continue;
          Site s;
          s.node = static_cast<int>(i);
          s.param = b.param;
          s.target = a.ref;
          s.mode = b.mode;
          s.count = b.limit;
          s.whole_family = a.kind == ir::ArgKind::GraphFamily;
          s.self = !s.whole_family && a.ref == g;  // `self`, or the graph's own name
          out.push_back(s);
        }
        break;
      }
      case ir::NodeKind::Copy:
      case ir::NodeKind::Fill:
      case ir::NodeKind::ScalarUpdate:
      case ir::NodeKind::If:
      case ir::NodeKind::While:
      case ir::NodeKind::Switch:
      case ir::NodeKind::Collective:
      case ir::NodeKind::Shmem:
        break;  // launch no graph
    }
  }
  return out;
}

// What a node reads and writes itself, without the work of the graphs it launches (which
// compute_footprints() added to its accesses, for the DAG).
std::vector<ir::BufferAccess> direct_accesses(const ir::Program& p, const ir::Node& n) {
  switch (n.kind()) {
    case ir::NodeKind::LaunchGraph: return {};
    case ir::NodeKind::Kernel: {
      const ir::KernelNode& launch = n.as<ir::KernelNode>();
      if (launch.kernel < 0) return n.accesses;
      const ir::Kernel& k = p.kernels[launch.kernel];
      std::vector<ir::BufferAccess> out;
      if (launch.args.size() != k.params.size()) return n.accesses;
      for (size_t i = 0; i < launch.args.size(); ++i)
        if (launch.args[i].kind == ir::ArgKind::Buffer)
          add_access(out, launch.args[i].ref, k.params[i].access != ir::Access::Out,
                     k.params[i].access != ir::Access::In);
      return out;
    }
    case ir::NodeKind::Copy:
    case ir::NodeKind::Fill:
    case ir::NodeKind::ScalarUpdate:
    case ir::NodeKind::If:
    case ir::NodeKind::While:
    case ir::NodeKind::Switch:
    case ir::NodeKind::Collective:
    case ir::NodeKind::Shmem:
      break;  // its accesses are its own work
  }
  return n.accesses;
}

// Merges `from` into `into`; true if anything was added.
bool merge(std::vector<ir::BufferAccess>& into, const std::vector<ir::BufferAccess>& from) {
  bool changed = false;
  for (const ir::BufferAccess& a : from) {
    bool found = false;
    for (ir::BufferAccess& b : into) {
      if (b.buffer != a.buffer) continue;
      found = true;
      if ((a.read && !b.read) || (a.write && !b.write)) changed = true;
      b.read |= a.read;
      b.write |= a.write;
    }
    if (!found) {
      into.push_back(a);
      changed = true;
    }
  }
  return changed;
}

// A conflict between `later`'s accesses and `earlier`'s: the buffer, and what each does.
struct Conflict {
  int buffer = -1;
  const char* later_does = "";
  const char* earlier_does = "";
};

std::optional<Conflict> conflict(const std::vector<ir::BufferAccess>& later,
                                 const std::vector<ir::BufferAccess>& earlier) {
  for (const ir::BufferAccess& x : later)
    for (const ir::BufferAccess& y : earlier)
      if (x.buffer == y.buffer && (x.write || y.write))
        return Conflict{x.buffer, x.write ? "writes" : "reads", y.write ? "writes" : "reads"};
  return std::nullopt;
}

bool depends_on_params(const ir::Expr& e) {
  if (e.kind == ir::ExprKind::Param || e.kind == ir::ExprKind::Rank ||
      e.kind == ir::ExprKind::WorldSize)
    return true;
  for (const ir::Expr& o : e.operands)
    if (depends_on_params(o)) return true;
  return false;
}

}  // namespace

void Checker::check_launches() {
  const ir::Program& p = *program_;
  const size_t n = p.graphs.size();
  // A graph that is neither main nor `device` is only ever inlined by `call`: its rules are
  // checked where it is inlined, as part of the calling graph.
  auto checked = [&](size_t g) { return p.graphs[g].device || static_cast<int>(g) == p.main_graph; };
  std::vector<std::vector<Site>> sites(n);
  for (size_t g = 0; g < n; ++g)
    if (checked(g)) sites[g] = sites_of(p, static_cast<int>(g));

  // Footprints, per graph, to a fixpoint (graphs launch each other, and themselves):
  //   env  = its own work and everything its fire-and-forget launches do (its environment);
  //   seq  = env and the seq of its tail launches: what finishes before the launching graph's
  //          next tail launch starts;
  //   esc  = what its sibling launches do, and the esc of its tail launches: work that runs in
  //          the parent's environment, which nothing in this graph's tail chain waits for;
  //   full = seq and esc: everything one launch of it touches.
  std::vector<std::vector<ir::BufferAccess>> env(n), seq(n), esc(n), full(n);
  for (size_t g = 0; g < n; ++g)
    if (checked(g))
      for (const ir::Node& node : p.graphs[g].body.nodes) merge(env[g], direct_accesses(p, node));
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t g = 0; g < n; ++g) {
      for (const Site& s : sites[g]) {
        if (s.mode == ir::LaunchMode::FireAndForget) changed |= merge(env[g], full[s.target]);
        if (s.mode == ir::LaunchMode::Sibling) changed |= merge(esc[g], full[s.target]);
        if (s.mode == ir::LaunchMode::Tail) {
          changed |= merge(seq[g], seq[s.target]);
          changed |= merge(esc[g], esc[s.target]);
        }
      }
      changed |= merge(seq[g], env[g]);
      changed |= merge(full[g], seq[g]);
      changed |= merge(full[g], esc[g]);
    }
  }

  auto name_of = [&](const Site& s) {
    std::string name = p.graphs[s.target].name;
    if (s.member) name += "[" + ir::to_string(*s.member, p) + "]";
    return "`" + name + "`";
  };
  auto mode_of = [](const Site& s) {
    return s.mode == ir::LaunchMode::Sibling ? std::string("as a sibling")
                                             : std::string(ir::to_string(s.mode));
  };
  auto kernel_of = [&](const ir::Node& node) { return "`" + p.kernels[node.as<ir::KernelNode>().kernel].name + "`"; };

  // A graph over its launch budget is refused already (E0601, E0602: check_budgets): its
  // launches are not also compared with one another and with every later statement, which
  // for 20,000 launches would take quadratic time.
  const TargetProfile& prof = p.profile;
  auto over_budget = [&](size_t g) {
    return profile_ok_ &&
           (p.graphs[g].fire_and_forget_launches > prof.max_fire_and_forget_launches ||
            p.graphs[g].tail_launches > prof.max_tail_launches);
  };

  // ---- ordering, graph by graph ----
  for (size_t g = 0; g < n; ++g) {
    if (!checked(g)) continue;
    const ir::Region& body = p.graphs[g].body;
    const std::vector<Site>& ss = sites[g];
    const bool pairwise = !ss.empty() && !over_budget(g);
    // What each statement does itself, once (every launch compares with the later ones).
    std::vector<std::vector<ir::BufferAccess>> direct;
    if (pairwise)
      for (const ir::Node& node : body.nodes) direct.push_back(direct_accesses(p, node));
    for (size_t ia = 0; pairwise && ia < ss.size(); ++ia) {
      const Site& a = ss[ia];
      // A graph relaunching itself is a loop: the next round starts when this one is over,
      // after every later statement of it (and E0609 keeps other tail launches out of it).
      if (a.self && a.mode == ir::LaunchMode::Tail) continue;
      const ir::Node& an = body.nodes[a.node];
      const std::vector<ir::BufferAccess>& af = full[a.target];
      // Later statements: what they do themselves.
      for (size_t j = a.node + 1; j < body.nodes.size(); ++j) {
        const ir::Node& later = body.nodes[j];
        auto c = conflict(direct[j], af);
        if (!c) continue;
        CallSites where(diags_, later.call_stack);
        const std::string what = "this statement " + std::string(c->later_does) + " `" +
                                 p.buffers[c->buffer].name + "`, which " + name_of(a) + " " +
                                 c->earlier_does;
        if (a.mode == ir::LaunchMode::Tail) {
          Diagnostic& d = diags_.error(DiagCode::E0607, later.loc,
                                       what + ", but " + name_of(a) +
                                           " is tail-launched: it runs after this whole graph, "
                                           "not before this statement");
          diags_.add_note(d, an.loc, name_of(a) + " is tail-launched here");
        } else {
          Diagnostic& d = diags_.error(DiagCode::E0606, later.loc,
                                       what + "; " + name_of(a) + " is launched " + mode_of(a) +
                                           ", so nothing orders its work before this statement");
          diags_.add_note(d, an.loc,
                          name_of(a) + " is launched " + mode_of(a) +
                              " here; work that needs its results belongs in a graph it "
                              "tail-launches, which runs after it");
        }
        break;  // one report per launch: the first statement that races
      }
      // Later launches (and the other launches of the same kernel): what the launched
      // graphs do.
      for (size_t ib = ia + 1; ib < ss.size(); ++ib) {
        const Site& b = ss[ib];
        if (b.self && b.mode == ir::LaunchMode::Tail) continue;
        const bool same_node = a.node == b.node;
        const ir::Node& bn = body.nodes[b.node];
        const std::vector<ir::BufferAccess>& bf = full[b.target];
        CallSites where(diags_, bn.call_stack);
        auto does = [&](const Conflict& c, const std::string& earlier) {
          return c.later_does + std::string(" `") + p.buffers[c.buffer].name + "`, which " +
                 earlier + " " + c.earlier_does;
        };
        if (concurrent(a.mode) && concurrent(b.mode)) {
          // Members of one family are launched to run at once, like the threads of a kernel:
          // what they share is theirs to divide (E0606 in docs/diagnostics.md).
          // Two launches of one graph are E0608's (one executable graph, one launch at once).
          if (a.target == b.target) continue;
          auto c = conflict(bf, af);
          if (!c) continue;
          if (same_node) {
            diags_.error(DiagCode::E0606, bn.loc,
                         kernel_of(bn) + " launches " + name_of(a) + " " + mode_of(a) + " and " +
                             name_of(b) + " " + mode_of(b) + ": " + name_of(b) + " " +
                             does(*c, name_of(a)) + ", and nothing orders one before the other");
          } else {
            Diagnostic& d = diags_.error(
                DiagCode::E0606, bn.loc,
                name_of(b) + ", launched " + mode_of(b) + " here, " + does(*c, name_of(a)) + "; " +
                    name_of(a) + " is launched " + mode_of(a) + ", so nothing orders its work "
                    "before " + name_of(b) + "'s");
            diags_.add_note(d, an.loc, name_of(a) + " is launched " + mode_of(a) + " here");
          }
        } else if (a.mode == ir::LaunchMode::FireAndForget && b.mode == ir::LaunchMode::Tail) {
          // Ordered: a tail launch waits for the whole environment, fire-and-forget work
          // included.
        } else if (a.mode == ir::LaunchMode::Tail && b.mode == ir::LaunchMode::FireAndForget &&
                   same_node) {
          // Ordered the same way, whatever order the kernel launches them in.
        } else if (a.mode == ir::LaunchMode::Tail && b.mode == ir::LaunchMode::Tail) {
          if (same_node) {
            auto c = conflict(bf, af);
            if (!c) continue;
            diags_.error(DiagCode::E0611, bn.loc,
                         kernel_of(bn) + " tail-launches " + name_of(a) + " and " + name_of(b) +
                             ", and " + name_of(b) + " " + does(*c, name_of(a)) +
                             ": they run in the order the kernel launches them, which orch "
                             "cannot see");
          } else {
            // In program order (their launchers are ordered by the DAG, since they conflict):
            // everything of `a` but its sibling work finishes first.
            auto c = conflict(bf, esc[a.target]);
            if (!c) continue;
            Diagnostic& d = diags_.error(
                DiagCode::E0610, bn.loc,
                name_of(b) + " is tail-launched here and " + c->later_does + " `" +
                    p.buffers[c->buffer].name + "`, which work that " + name_of(a) +
                    " launches as a sibling " + c->earlier_does + "; tail launches wait for " +
                    name_of(a) + " but not for its sibling launches");
            diags_.add_note(d, an.loc, name_of(a) + " is tail-launched here");
          }
        } else if (a.mode == ir::LaunchMode::Tail) {
          // A fire-and-forget or sibling launch after a tail launch, in program order.
          auto c = conflict(bf, af);
          if (!c) continue;
          if (same_node) {
            diags_.error(DiagCode::E0610, bn.loc,
                         kernel_of(bn) + " tail-launches " + name_of(a) + " and launches " +
                             name_of(b) + " as a sibling, which " + does(*c, name_of(a)) +
                             "; a sibling runs in the parent graph's execution, so the tail "
                             "launch does not wait for it");
            continue;
          }
          Diagnostic& d = diags_.error(
              DiagCode::E0607, bn.loc,
              name_of(b) + ", launched " + mode_of(b) + " here, " + does(*c, name_of(a)) +
                  ", but " + name_of(a) + " is tail-launched: it runs after this whole graph, "
                  "not before " + name_of(b));
          diags_.add_note(d, an.loc, name_of(a) + " is tail-launched here");
        } else {
          // A sibling launch, then a tail launch.
          auto c = conflict(bf, af);
          if (!c) continue;
          if (same_node) {
            diags_.error(DiagCode::E0610, bn.loc,
                         kernel_of(bn) + " launches " + name_of(a) + " as a sibling and "
                         "tail-launches " + name_of(b) + ", which " + does(*c, name_of(a)) +
                             "; a sibling runs in the parent graph's execution, so the tail "
                             "launch does not wait for it");
            continue;
          }
          Diagnostic& d = diags_.error(
              DiagCode::E0610, bn.loc,
              name_of(b) + " is tail-launched here and " + does(*c, name_of(a)) + "; " +
                  name_of(a) + " is launched as a sibling, which runs in the parent graph's "
                  "execution, so the tail launch does not wait for it");
          diags_.add_note(d, an.loc,
                          name_of(a) + " is launched as a sibling here; launched fire_and_forget, it "
                                       "would finish before the tail launch starts");
        }
      }
    }

    // A graph that relaunches itself: its other tail launches pile up behind the rounds, and
    // its sibling launches are not waited for by the next round.
    const Site* relaunch = nullptr;
    for (const Site& s : ss)
      if (s.self && s.mode == ir::LaunchMode::Tail && !relaunch) relaunch = &s;
    if (relaunch) {
      const std::string gname = "`" + p.graphs[g].name + "`";
      for (const Site& s : ss) {
        if (s.self || s.mode == ir::LaunchMode::FireAndForget) continue;
        std::string why =
            s.mode == ir::LaunchMode::Tail
                ? "also tail-launches " + name_of(s) +
                      ": each round runs before the tail launches of the rounds before it, so "
                      "several launches of " + name_of(s) + " could be pending at once"
                : "also launches " + name_of(s) +
                      " as a sibling: the next round does not wait for it, so two rounds' "
                      "launches of " + name_of(s) + " could run at once";
        CallSites where(diags_, body.nodes[s.node].call_stack);
        Diagnostic& d = diags_.error(DiagCode::E0609, body.nodes[s.node].loc,
                                     gname + " relaunches itself and " + why);
        if (relaunch->node != s.node)
          diags_.add_note(d, body.nodes[relaunch->node].loc, gname + " relaunches itself here");
      }
    }
  }

  // ---- at most one pending launch per executable graph ----
  // A launch of itself other than a tail launch meets itself running.
  for (size_t g = 0; g < n; ++g) {
    if (!checked(g) || !p.graphs[g].device) continue;
    for (const Site& s : sites[g]) {
      if (!s.self || s.mode == ir::LaunchMode::Tail) continue;
      CallSites where(diags_, p.graphs[g].body.nodes[s.node].call_stack);
      diags_.error(DiagCode::E0608, p.graphs[g].body.nodes[s.node].loc,
                   "`" + p.graphs[g].name + "` launches itself " + ir::to_string(s.mode) +
                       " while it is running; an executable graph runs one launch at a time, "
                       "and CUDA refuses to launch it while a launch is running "
                       "(cudaErrorInvalidValue)");
    }
  }
  // Every launch made while one execution of `main` runs (all of its launch tree), counted per
  // executable graph: a graph, or one member of a family. Launches that cannot overlap in time
  // (two graphs tail-launched one after the other, each launching a third) count too: a family
  // gives each its own member. First which graphs (and members) run at all, then the counts.
  if (p.main_graph < 0) return;
  struct Reach {
    bool all = false;      // every member of a family
    std::set<int> members; // these members (-1: not a family)
    uint64_t size(const ir::Graph& g) const { return all ? g.family_size : members.size(); }
  };
  std::vector<Reach> reach(n);
  auto uses_index = [](const ir::Expr& e) {
    std::function<bool(const ir::Expr&)> f = [&](const ir::Expr& x) {
      if (x.kind == ir::ExprKind::FamilyIndex) return true;
      for (const ir::Expr& o : x.operands)
        if (f(o)) return true;
      return false;
    };
    return f(e);
  };
  // Targets of a site run by member `m` of its graph (-1: not a family): (member or -1 for
  // all members / not a family, whether every member).
  auto member_of = [&](const Site& s, int m) -> std::optional<int> {
    if (!s.member || depends_on_params(*s.member)) return std::nullopt;
    auto v = evaluate(*s.member, m >= 0 ? std::optional<uint32_t>(m) : std::nullopt);
    if (!v || v->is_float()) return std::nullopt;
    if (v->negative() || v->magnitude() >= p.graphs[s.target].family_size) return -2;  // reported (E0504)
    return static_cast<int>(v->magnitude());
  };
  {
    std::deque<std::pair<int, int>> queue;  // (graph, member); member -2: all members
    auto reached = [&](int g, int m) {
      Reach& r = reach[g];
      if (r.all) return;
      if (m == -2) {
        r.all = true;
        r.members.clear();
      } else if (!r.members.insert(m).second) {
        return;
      }
      queue.push_back({g, m});
    };
    reached(p.main_graph, -1);
    while (!queue.empty()) {
      auto [g, m] = queue.front();
      queue.pop_front();
      const uint32_t size = p.graphs[g].family_size;
      for (const Site& s : sites[g]) {
        if (s.self) continue;  // a self tail launch is the next round; others reported above
        if (p.graphs[s.target].family_size == 0) {
          reached(s.target, -1);
        } else if (s.whole_family) {
          reached(s.target, -2);
        } else if (m == -2 && s.member && uses_index(*s.member)) {
          for (uint32_t x = 0; x < size; ++x)
            if (auto t = member_of(s, static_cast<int>(x))) {
              if (*t >= 0) reached(s.target, *t);
            } else {
              reached(s.target, -2);
            }
        } else if (auto t = member_of(s, m == -2 ? 0 : m)) {
          if (*t >= 0) reached(s.target, *t);
        } else {
          reached(s.target, -2);
        }
      }
    }
  }
  struct Use {
    uint64_t all = 0;                   // launches of every member (or of a plain graph)
    std::map<int, uint64_t> member;     // launches of one member
    std::vector<std::pair<int, int>> sites;  // (graph, node), distinct
    std::set<std::pair<int, int>> seen;      // the same, to find one in log time
    std::vector<uint64_t> multiplicity;      // launching members per site
  };
  std::map<int, Use> uses;  // per target graph
  std::vector<int> order;   // targets in the order first met
  for (size_t g = 0; g < n; ++g) {
    const Reach& r = reach[g];
    if (!r.all && r.members.empty()) continue;
    const uint64_t runs = p.graphs[g].family_size == 0 ? 1 : r.size(p.graphs[g]);
    for (const Site& s : sites[g]) {
      if (s.self) continue;
      const ir::Graph& t = p.graphs[s.target];
      if (!uses.count(s.target)) order.push_back(s.target);
      Use& u = uses[s.target];
      std::pair<int, int> where{static_cast<int>(g), s.node};
      if (u.seen.insert(where).second) {
        u.sites.push_back(where);
        u.multiplicity.push_back(runs);
      }
      if (t.family_size == 0) {
        u.all += s.count * runs;
      } else if (s.whole_family) {
        // A graph[N] argument launches distinct members (a budget over N is E0608 at the
        // kernel): at most one launch of each, per launching member.
        u.all += (s.count > 0 ? 1 : 0) * runs;
      } else if (s.member && uses_index(*s.member) && p.graphs[g].family_size > 0) {
        auto each = [&](int m) {
          if (auto x = member_of(s, m)) {
            if (*x >= 0) u.member[*x] += 1;
          } else {
            u.all += 1;
          }
        };
        if (r.all)
          for (uint32_t m = 0; m < p.graphs[g].family_size; ++m) each(static_cast<int>(m));
        else
          for (int m : r.members) each(m);
      } else if (auto x = member_of(s, -1)) {
        if (*x >= 0) u.member[*x] += runs;
      } else {
        u.all += runs;
      }
    }
  }
  for (int t : order) {
    const Use& u = uses[t];
    std::string name = "`" + p.graphs[t].name + "`";
    uint64_t count = u.all;
    if (p.graphs[t].family_size > 0) {
      int worst = -1;
      for (const auto& [m, c] : u.member)
        if (u.all + c > count) count = u.all + c, worst = m;
      name = worst >= 0 ? "`" + p.graphs[t].name + "[" + std::to_string(worst) + "]`"
                        : "each member of " + name;
    }
    if (count <= 1) continue;
    const auto& [lg, ln] = u.sites.back();
    CallSites where(diags_, p.graphs[lg].body.nodes[ln].call_stack);
    Diagnostic& d = diags_.error(
        DiagCode::E0608, p.graphs[lg].body.nodes[ln].loc,
        name + " may be launched " + std::to_string(count) + " times in one execution of `" +
            p.graphs[p.main_graph].name + "`; an executable graph runs one launch at a time, "
            "and CUDA refuses to launch it while a launch is pending or running "
            "(cudaErrorInvalidValue)");
    std::vector<DiagnosticNote> notes;
    for (size_t i = 0; i < u.sites.size(); ++i) {
      const ir::Graph& lgraph = p.graphs[u.sites[i].first];
      const SourceRange& at = lgraph.body.nodes[u.sites[i].second].loc;
      if (u.multiplicity[i] > 1)
        notes.push_back({at, "launched here by each of the " + std::to_string(u.multiplicity[i]) +
                                 " members of `" + lgraph.name + "` that run"});
      else if (i + 1 < u.sites.size())
        notes.push_back({at, name + " is also launched here"});
    }
    add_capped_notes(diags_, d, notes);
  }
}

}  // namespace orch::detail

// Rules that need every graph built: what each graph touches when launched, launch budgets
// per graph execution, the ordering of work launched from the device, and device graphs.
#include <functional>
#include <optional>

#include "compiler/checker.h"

namespace orch::detail {

namespace {

// Graphs a node launches, with the mode: kernel graph arguments by their budgets, and
// `launch` statements.
struct Launch {
  int graph;
  ir::LaunchMode mode;
  uint64_t count;
  bool self;
};

std::vector<Launch> launches_of(const ir::Program& p, const ir::Node& n, int current_graph) {
  std::vector<Launch> out;
  if (n.kind == ir::NodeKind::LaunchGraph) {
    out.push_back({n.graph, n.mode, 1, n.graph == current_graph});
  } else if (n.kind == ir::NodeKind::Kernel && n.kernel >= 0) {
    const ir::Kernel& k = p.kernels[n.kernel];
    if (n.args.size() != k.params.size()) return out;
    for (const ir::LaunchBudget& b : k.budgets) {
      const ir::KernelArg& arg = n.args[b.param];
      if (arg.kind != ir::ArgKind::Graph && arg.kind != ir::ArgKind::GraphFamily) continue;
      out.push_back({arg.ref, b.mode, b.limit, arg.ref == current_graph});
    }
  }
  return out;
}

// Node args may be fewer than the kernel's params when an argument failed to check.
bool args_complete(const ir::Program& p, const ir::Node& n) {
  return n.kind != ir::NodeKind::Kernel || n.args.size() == p.kernels[n.kernel].params.size();
}

void for_each_node(ir::Region& r, const std::function<void(ir::Node&)>& f) {
  for (ir::Node& n : r.nodes) {
    for (ir::Region& b : n.bodies) for_each_node(b, f);
    f(n);  // after the bodies, so containers see their children's updates
  }
}

// A conflict between a statement's accesses and a launched graph's: which buffer, and what
// each side does with it ("reads"/"writes").
struct Conflict {
  int buffer = -1;
  const char* statement_does = "";
  const char* graph_does = "";
};

std::optional<Conflict> conflict(const std::vector<ir::BufferAccess>& statement,
                                 const std::vector<ir::BufferAccess>& graph) {
  for (const ir::BufferAccess& x : statement)
    for (const ir::BufferAccess& y : graph)
      if (x.buffer == y.buffer && (x.write || y.write))
        return Conflict{x.buffer, x.write ? "writes" : "reads", y.write ? "writes" : "reads"};
  return std::nullopt;
}

// Adds accesses to one set like add_access(), through an index by buffer, so that merging the
// accesses of 100,000 statements on distinct buffers takes linear, not quadratic, time.
class AccessMerger {
 public:
  explicit AccessMerger(size_t buffers) : index_(buffers, -1) {}
  // Merges into `set` until done() (which must come before the next into()).
  void into(std::vector<ir::BufferAccess>& set) {
    set_ = &set;
    for (size_t i = 0; i < set.size(); ++i) index_[set[i].buffer] = static_cast<int>(i);
  }
  void add(int buffer, bool read, bool write) {
    if (buffer < 0 || static_cast<size_t>(buffer) >= index_.size()) return;
    int& at = index_[buffer];
    if (at < 0) {
      at = static_cast<int>(set_->size());
      set_->push_back({buffer, read, write});
    } else {
      (*set_)[at].read |= read;
      (*set_)[at].write |= write;
    }
  }
  void done() {
    for (const ir::BufferAccess& a : *set_) index_[a.buffer] = -1;
    set_ = nullptr;
  }

 private:
  std::vector<int> index_;
  std::vector<ir::BufferAccess>* set_ = nullptr;
};

// Notes for the other places that add to a budget: at most kMaxSiteNotes, the last of which
// counts the rest, so that 121 launches give one error with 8 notes, not 120.
constexpr size_t kMaxSiteNotes = 8;
void add_site_notes(DiagnosticEngine& diags, Diagnostic& d, const std::vector<SourceRange>& sites,
                    const std::string& message) {
  for (size_t i = 0; i < sites.size(); ++i) {
    if (sites.size() > kMaxSiteNotes && i + 1 == kMaxSiteNotes) {
      diags.add_note(d, sites[i],
                     message + ", and at " + std::to_string(sites.size() - i - 1) + " more places");
      return;
    }
    diags.add_note(d, sites[i], message);
  }
}

// Reports about a node that `call` inlined carry its call sites as context, as if the node
// were being checked inside the calls.
class CallSites {
 public:
  CallSites(DiagnosticEngine& diags, const std::vector<SourceRange>& call_stack) : diags_(diags) {
    for (const SourceRange& r : call_stack) diags_.push_context(r, "called from here");
    n_ = call_stack.size();
  }
  ~CallSites() {
    for (size_t i = 0; i < n_; ++i) diags_.pop_context();
  }
  CallSites(const CallSites&) = delete;
  CallSites& operator=(const CallSites&) = delete;

 private:
  DiagnosticEngine& diags_;
  size_t n_ = 0;
};

}  // namespace

void Checker::compute_footprints() {
  ir::Program& p = *program_;
  const size_t n = p.graphs.size();
  footprints_.assign(n, {});
  std::vector<std::vector<int>> launched(n);
  AccessMerger merge(p.buffers.size());
  for (size_t g = 0; g < n; ++g) {
    merge.into(footprints_[g]);
    for_each_node(p.graphs[g].body, [&](ir::Node& node) {
      for (const ir::BufferAccess& a : node.accesses) merge.add(a.buffer, a.read, a.write);
      if (!args_complete(p, node)) return;
      for (const Launch& l : launches_of(p, node, static_cast<int>(g)))
        launched[g].push_back(l.graph);
    });
    merge.done();
  }
  // What a graph touches includes what the graphs it launches touch: iterate to a fixpoint
  // (graphs may launch each other, and themselves).
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t g = 0; g < n; ++g) {
      for (int l : launched[g]) {
        for (const ir::BufferAccess& a : footprints_[l]) {
          size_t before = footprints_[g].size();
          bool had_read = false, had_write = false;
          for (const ir::BufferAccess& x : footprints_[g])
            if (x.buffer == a.buffer) had_read = x.read, had_write = x.write;
          add_access(footprints_[g], a.buffer, a.read, a.write);
          if (footprints_[g].size() != before || (a.read && !had_read) || (a.write && !had_write))
            changed = true;
        }
      }
    }
  }
  // A launching node is ordered as if it did the launched work itself, so that everything
  // before it that the launched graph needs is finished when it runs.
  for (size_t g = 0; g < n; ++g) {
    for_each_node(p.graphs[g].body, [&](ir::Node& node) {
      if (args_complete(p, node)) {
        merge.into(node.accesses);
        for (const Launch& l : launches_of(p, node, static_cast<int>(g)))
          for (const ir::BufferAccess& a : footprints_[l.graph]) merge.add(a.buffer, a.read, a.write);
        merge.done();
      }
      if (!node.bodies.empty()) {
        std::vector<ir::BufferAccess> merged = node.accesses;
        merge.into(merged);
        for (ir::Region& r : node.bodies)
          for (ir::Node& child : r.nodes)
            for (const ir::BufferAccess& a : child.accesses) merge.add(a.buffer, a.read, a.write);
        merge.done();
        node.accesses = std::move(merged);
      }
    });
  }
}

void Checker::check_device_graphs() {
  for (ir::Graph& g : program_->graphs) {
    if (!g.device) continue;
    bool has_work = false;
    for (const ir::Node& n : g.body.nodes)
      has_work |= n.kind == ir::NodeKind::Kernel || n.kind == ir::NodeKind::Copy ||
                  n.kind == ir::NodeKind::Fill || n.kind == ir::NodeKind::ScalarUpdate ||
                  n.kind == ir::NodeKind::LaunchGraph;
    if (!has_work && !g.body.nodes.empty()) continue;  // its statements were reported
    if (!has_work)
      diags_.error("E0502", g.loc,
                   "device graph `" + g.name + "` is empty; a graph launched from the device "
                                               "needs at least one kernel, copy or fill");
  }
}

void Checker::check_budgets() {
  const TargetProfile& prof = program_->profile;
  ir::Program& p = *program_;
  for (size_t gi = 0; gi < p.graphs.size(); ++gi) {
    ir::Graph& g = p.graphs[gi];
    bool reported_ff = !profile_ok_, reported_tail = !profile_ok_, reported_self = !profile_ok_;
    (void)reported_ff;
    std::vector<SourceRange> ff_sites, tail_sites;
    // Launches inside conditional bodies are errors of their own (E0402/E0604): count the
    // graph's top level only.
    for (const ir::Node& node : g.body.nodes) {
      if (!args_complete(p, node)) continue;
      for (const Launch& l : launches_of(p, node, static_cast<int>(gi))) {
        bool over_alone;
        if (l.mode == ir::LaunchMode::Tail) {
          g.tail_launches += l.count;
          tail_sites.push_back(node.loc);
          if (l.self) g.self_tail_launches += l.count;
          over_alone = l.count > prof.max_tail_launches;  // reported at the kernel's budget
          if (!reported_tail && !over_alone && g.tail_launches > prof.max_tail_launches) {
            reported_tail = true;
            CallSites where(diags_, node.call_stack);
            Diagnostic& d = diags_.error(
                "E0602", node.loc,
                "one execution of `" + g.name + "` may leave " + std::to_string(g.tail_launches) +
                    " tail launches pending; " + prof.name + " allows at most " +
                    std::to_string(prof.max_tail_launches));
            tail_sites.pop_back();  // the error's own place
            add_site_notes(diags_, d, tail_sites, "tail launches are also made here");
            tail_sites.push_back(node.loc);
          }
          if (!reported_self && g.self_tail_launches > prof.max_self_tail_launches) {
            reported_self = true;
            CallSites where(diags_, node.call_stack);
            diags_.error("E0603", node.loc,
                         "one execution of `" + g.name + "` may leave " +
                             std::to_string(g.self_tail_launches) +
                             " self tail launches pending; at most " +
                             std::to_string(prof.max_self_tail_launches) + " is allowed");
          }
        } else {
          g.fire_and_forget_launches += l.count;
          ff_sites.push_back(node.loc);
          over_alone = l.count > prof.max_fire_and_forget_launches;
          if (!reported_ff && !over_alone &&
              g.fire_and_forget_launches > prof.max_fire_and_forget_launches) {
            reported_ff = true;
            CallSites where(diags_, node.call_stack);
            Diagnostic& d = diags_.error(
                "E0601", node.loc,
                "one execution of `" + g.name + "` may make " +
                    std::to_string(g.fire_and_forget_launches) +
                    " fire-and-forget launches; " + prof.name + " allows at most " +
                    std::to_string(prof.max_fire_and_forget_launches));
            ff_sites.pop_back();  // the error's own place
            add_site_notes(diags_, d, ff_sites, "fire-and-forget launches are also made here");
            ff_sites.push_back(node.loc);
          }
        }
      }
    }
  }
}

void Checker::check_launch_ordering() {
  ir::Program& p = *program_;
  const TargetProfile& prof = p.profile;
  for (size_t gi = 0; gi < p.graphs.size(); ++gi) {
    const ir::Region& body = p.graphs[gi].body;
    // A graph over its launch budget is refused already (E0601, E0602). Its launches are not
    // also compared with every later statement: 100,000 launches would take quadratic time.
    const ir::Graph& graph = p.graphs[gi];
    if (profile_ok_ && (graph.fire_and_forget_launches > prof.max_fire_and_forget_launches ||
                        graph.tail_launches > prof.max_tail_launches))
      continue;
    for (size_t i = 0; i < body.nodes.size(); ++i) {
      const ir::Node& launcher = body.nodes[i];
      if (!args_complete(p, launcher)) continue;
      for (const Launch& l : launches_of(p, launcher, static_cast<int>(gi))) {
        const std::vector<ir::BufferAccess>& launched = footprints_[l.graph];
        const std::string& name = p.graphs[l.graph].name;
        for (size_t j = i + 1; j < body.nodes.size(); ++j) {
          const ir::Node& later = body.nodes[j];
          // The launching node's own accesses include the launched footprint; compare the
          // later node's accesses only.
          auto c = conflict(later.accesses, launched);
          if (!c) continue;
          const std::string& buf = p.buffers[c->buffer].name;
          CallSites where(diags_, later.call_stack);
          std::string what = "this statement " + std::string(c->statement_does) + " `" + buf +
                             "`, which `" + name + "` " + c->graph_does;
          if (l.mode == ir::LaunchMode::Tail) {
            Diagnostic& d = diags_.error(
                "E0607", later.loc,
                what + ", but `" + name + "` is tail-launched: it runs after this whole graph, "
                       "not before this statement");
            diags_.add_note(d, launcher.loc, "`" + name + "` is tail-launched here");
          } else {
            Diagnostic& d = diags_.error(
                "E0606", later.loc,
                what + "; `" + name + "` is launched " + ir::to_string(l.mode) +
                    ", so nothing orders its work before this statement");
            diags_.add_note(d, launcher.loc,
                            "`" + name + "` is launched " + std::string(ir::to_string(l.mode)) +
                                " here; work that needs its results belongs in a graph it "
                                "tail-launches, which runs after it");
          }
          break;  // one report per launch: the first statement that races
        }
      }
    }
  }
}

}  // namespace orch::detail

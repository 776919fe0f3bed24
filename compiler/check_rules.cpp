// Rules that need every graph built: what each graph touches when launched, launch budgets
// per graph execution, and device graphs (the ordering of work launched from the device is
// in check_launches.cpp).
#include <algorithm>
#include <functional>

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
  switch (n.kind()) {
    case ir::NodeKind::LaunchGraph: {
      const ir::LaunchGraphNode& l = n.as<ir::LaunchGraphNode>();
      out.push_back({l.graph, l.mode, 1, l.graph == current_graph});
      break;
    }
    case ir::NodeKind::Kernel: {
      const ir::KernelNode& launch = n.as<ir::KernelNode>();
      if (launch.kernel < 0) break;
      const ir::Kernel& k = p.kernels[launch.kernel];
      if (launch.args.size() != k.params.size()) return out;
      for (const ir::LaunchBudget& b : k.budgets) {
        const ir::KernelArg& arg = launch.args[b.param];
        if (arg.kind != ir::ArgKind::Graph && arg.kind != ir::ArgKind::GraphFamily) continue;
        out.push_back({arg.ref, b.mode, b.limit, arg.ref == current_graph});
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
      break;  // launch no graph (a conditional's bodies are nodes of their own)
  }
  return out;
}

// Node args may be fewer than the kernel's params when an argument failed to check.
bool args_complete(const ir::Program& p, const ir::Node& n) {
  const ir::KernelNode* k = std::get_if<ir::KernelNode>(&n.op);
  return !k || k->args.size() == p.kernels[k->kernel].params.size();
}

void for_each_node(ir::Region& r, const std::function<void(ir::Node&)>& f) {
  for (ir::Node& n : r.nodes) {
    for (ir::Region& b : ir::bodies(n)) for_each_node(b, f);
    f(n);  // after the bodies, so containers see their children's updates
  }
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

}  // namespace

void add_capped_notes(DiagnosticEngine& diags, Diagnostic& d, const std::vector<DiagnosticNote>& notes) {
  for (size_t i = 0; i < notes.size(); ++i) {
    if (notes.size() > kMaxSiteNotes && i + 1 == kMaxSiteNotes) {
      diags.add_note(d, notes[i].range,
                     notes[i].message + ", and at " + std::to_string(notes.size() - i - 1) +
                         " more places");
      return;
    }
    diags.add_note(d, notes[i].range, notes[i].message);
  }
}

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
      if (!ir::bodies(node).empty()) {
        std::vector<ir::BufferAccess> merged = node.accesses;
        merge.into(merged);
        for (ir::Region& r : ir::bodies(node))
          for (ir::Node& child : r.nodes)
            for (const ir::BufferAccess& a : child.accesses) merge.add(a.buffer, a.read, a.write);
        merge.done();
        node.accesses = std::move(merged);
      }
    });
  }
}

namespace {

void collect_scalar_reads(const ir::Expr& e, std::vector<int>& out) {
  if (e.kind == ir::ExprKind::DeviceScalar && std::find(out.begin(), out.end(), e.ref) == out.end())
    out.push_back(e.ref);
  for (const ir::Expr& o : e.operands) collect_scalar_reads(o, out);
}

// "`a`", "`a` or `b`", "`a`, `b` or `c`"
std::string either(const ir::Program& p, const std::vector<int>& buffers) {
  std::string out;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (i) out += i + 1 == buffers.size() ? " or " : ", ";
    out += "`" + p.buffers[buffers[i]].name + "`";
  }
  return out;
}

}  // namespace

// A WHILE node runs its body as long as its condition holds, and only work inside the body runs
// between two evaluations; a condition nothing there can change never turns false once true.
// The body's accesses include nested bodies and, through compute_footprints, what launched
// graphs write. A `host` scalar is exempt: the application's CPU may write it while the graph
// runs.
void Checker::check_loop_conditions() {
  ir::Program& p = *program_;
  for (ir::Graph& g : p.graphs) {
    for_each_node(g.body, [&](ir::Node& node) {
      if (!node.is<ir::WhileNode>()) return;
      const ir::WhileNode& loop_node = node.as<ir::WhileNode>();
      const ir::Node& loop = node;
      if (!loop_node.cond || loop_node.bodies.empty()) return;
      for (const SourceRange& r : loops_with_errors_)
        if (r.file == loop.loc.file && r.begin.line == loop.loc.begin.line &&
            r.begin.col == loop.loc.begin.col)
          return;
      // A graph `call`ed twice holds the loop twice: one report.
      for (const SourceRange& r : reported_loops_)
        if (r.file == loop.loc.file && r.begin.line == loop.loc.begin.line &&
            r.begin.col == loop.loc.begin.col)
          return;
      reported_loops_.push_back(loop.loc);
      std::vector<int> reads;
      collect_scalar_reads(*loop_node.cond, reads);
      const std::string cond_text = ir::to_string(*loop_node.cond, p);
      if (reads.empty()) {
        Diagnostic& d = diags_.error(
            DiagCode::E0410, loop.loc,
            "this `while` loop never ends once it starts: its condition reads no device scalar, "
            "so nothing the loop does can change it");
        diags_.add_note(
            d, loop_node.cond->loc,
            "`" + cond_text +
                "` reads only params and constants, which stay fixed "
                "while the graph runs; loop on a device scalar the body updates, or use "
                "`if`");
        return;
      }
      for (int b : reads)
        if (p.buffers[b].host) return;
      for (const ir::Node& n : loop_node.bodies[0].nodes)
        for (const ir::BufferAccess& a : n.accesses)
          if (a.write && std::find(reads.begin(), reads.end(), a.buffer) != reads.end()) return;
      Diagnostic& d =
          diags_.error(DiagCode::E0410, loop.loc,
                       "this `while` loop never ends once it starts: nothing in its body writes " +
                           either(p, reads) + ", which its condition reads");
      diags_.add_note(d, loop_node.cond->loc,
                      "the condition `" + cond_text + "` can change only if the body writes " +
                          either(p, reads) +
                          ": with a scalar update, a `fill`, a `copy`, or a kernel that takes it "
                          "as `out` or `inout`");
    });
  }
}

// A bind check that reads nothing but constants and `world_size` is decided by the size of the
// communicator alone (a broadcast root of `world_size`, an allgather into a buffer no multiple
// of its source fills): one that holds for no size from 1 to kMaxWorldSize is an error now, at
// its statement, not on every rank at bind time.
void Checker::check_bind_checks_possible() {
  constexpr uint64_t kMaxWorldSize = 65536;
  for (const ir::BindCheck& bc : program_->bind_checks) {
    if (bc.family_size) continue;
    const std::vector<expr::Instr> code = ir::to_postfix(bc.condition);
    bool world_only = !code.empty(), uses_world = false;
    for (const expr::Instr& in : code) {
      uses_world |= in.kind == expr::InstrKind::WorldSize;
      world_only &= in.kind == expr::InstrKind::Const || in.kind == expr::InstrKind::Operator ||
                    in.kind == expr::InstrKind::WorldSize;
    }
    if (!world_only || !uses_world) continue;
    bool possible = false;
    for (uint64_t ws = 1; ws <= kMaxWorldSize && !possible; ++ws) {
      expr::Evaluation v = expr::evaluate(code, [&](const expr::Instr& in) -> std::optional<expr::Value> {
        if (in.kind == expr::InstrKind::WorldSize) return expr::Value::of_uint(in.type, ws);
        return std::nullopt;
      });
      possible = v.known() && v.value.u64() != 0;
    }
    if (possible) continue;
    diags_.error(bc.code, bc.loc,
                 "this needs " + bc.message + ", which holds for no world size from 1 to " +
                     std::to_string(kMaxWorldSize) + " (`" + ir::to_string(bc.condition, *program_) + "`)");
  }
}

// "The graph cannot be empty and must contain at least one kernel, memcpy, or memset node"
// (doc comment of cudaGraphInstantiate). Every statement a device graph may hold becomes one of
// those (a kernel, a copy, a fill, or a generated kernel), and the ones it may not are errors of
// their own (E0501, E0703), so an empty body is the whole rule.
void Checker::check_device_graphs() {
  for (ir::Graph& g : program_->graphs) {
    if (!g.device || !g.body.nodes.empty()) continue;
    diags_.error(DiagCode::E0502, g.loc,
                 "device graph `" + g.name +
                     "` is empty; a graph launched from the device needs at least one kernel, "
                     "copy or fill");
  }
}

void Checker::check_budgets() {
  const TargetProfile& prof = program_->profile;
  ir::Program& p = *program_;
  for (size_t gi = 0; gi < p.graphs.size(); ++gi) {
    ir::Graph& g = p.graphs[gi];
    // A graph only ever `call`ed is counted where it is inlined.
    if (!g.device && static_cast<int>(gi) != p.main_graph) continue;
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
                DiagCode::E0602, node.loc,
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
            diags_.error(DiagCode::E0603, node.loc,
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
                DiagCode::E0601, node.loc,
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

}  // namespace orch::detail

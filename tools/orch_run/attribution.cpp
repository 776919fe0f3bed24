#include "tools/orch_run/attribution.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <tuple>

namespace orch::run {

const char* via_name(Via v) {
  switch (v) {
    case Via::None: return "none";
    case Via::NodeId: return "node id";
    case Via::Graph: return "graph";
    case Via::GraphIndex: return "graph + index";
    case Via::TopIndex: return "top-level graph + index";
  }
  return "?";
}

namespace {

uint32_t high(uint64_t id) { return static_cast<uint32_t>(id >> 32); }
uint32_t low(uint64_t id) { return static_cast<uint32_t>(id); }

// Whether a record CUDA ran can be the work of a site's node: the check of a match by index.
// A kernel node runs its own kernel; a fill runs as a memset or CUDA's memset kernel; a copy as
// a copy; a collective as whatever NCCL captured; a conditional or empty node runs nothing.
bool fits(const Site& s, const NodeRecord& r) {
  switch (s.node->kind()) {
    case orch::fb::NodeKind::Kernel:
      return r.kind == NodeRecord::Kind::Kernel && (s.kernel_symbol.empty() || r.name == s.kernel_symbol);
    case orch::fb::NodeKind::Memset:
      return r.kind == NodeRecord::Kind::Memset ||
             (r.kind == NodeRecord::Kind::Kernel && r.name.rfind("memset", 0) == 0);
    case orch::fb::NodeKind::Memcpy: return r.kind == NodeRecord::Kind::Memcpy;
    case orch::fb::NodeKind::Collective: return true;
    default: return false;
  }
}

}  // namespace

void NodeIds::begin(int site) {
  std::lock_guard<std::mutex> lock(mutex_);
  current_[std::this_thread::get_id()].push_back(site);
}

void NodeIds::end(int site, uint64_t made) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = current_.find(std::this_thread::get_id());
  if (it != current_.end() && !it->second.empty()) {
    it->second.pop_back();
    if (it->second.empty()) current_.erase(it);
  }
  if (made != 0 && site >= 0) {
    site_[made] = site;
    made_.insert(made);
    indexed_ = false;
  }
}

void NodeIds::phase_begin(int graph, int member) {
  std::lock_guard<std::mutex> lock(mutex_);
  phases_[std::this_thread::get_id()].push_back((static_cast<int64_t>(graph) << 32) |
                                                static_cast<uint32_t>(member + 1));
}

void NodeIds::phase_end() {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = phases_.find(std::this_thread::get_id());
  if (it != phases_.end() && !it->second.empty()) {
    it->second.pop_back();
    if (it->second.empty()) phases_.erase(it);
  }
}

bool NodeIds::top_now(TopKey* top) const {
  const std::thread::id me = std::this_thread::get_id();
  // The top-level graph being built, instantiated, uploaded or launched on this thread; else
  // that of the site being made.
  auto p = phases_.find(me);
  if (p != phases_.end() && !p->second.empty()) {
    *top = p->second.back();
    return true;
  }
  auto c = current_.find(me);
  if (sites_ && c != current_.end() && !c->second.empty() && c->second.back() >= 0) {
    const Site& s = (*sites_)[c->second.back()];
    *top = (static_cast<int64_t>(s.graph) << 32) | static_cast<uint32_t>(s.member + 1);
    return true;
  }
  return false;
}

void NodeIds::note_graph(uint32_t graph) {
  if (graph == 0) return;
  graphs_.insert(graph);
  TopKey top;
  if (top_now(&top)) graph_top_.emplace(graph, top);
}

void NodeIds::note_layout(uint64_t node, uint32_t graph) {
  if (node == 0 || graph == 0) return;
  (high(node) == graph ? layout_agree_ : layout_disagree_)++;
}

void NodeIds::created(uint64_t id, uint32_t graph) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (graph != 0) node_graph_[id] = graph;
  note_layout(id, graph);
  note_graph(graph);
  auto it = current_.find(std::this_thread::get_id());
  if (it != current_.end() && !it->second.empty() && it->second.back() >= 0) site_[id] = it->second.back();
  indexed_ = false;
}

void NodeIds::cloned(uint64_t original, uint64_t clone, uint32_t original_graph, uint32_t clone_graph) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (clone_graph != 0) node_graph_[clone] = clone_graph;
  if (original != 0 && original_graph != 0) node_graph_.emplace(original, original_graph);
  note_layout(clone, clone_graph);
  note_graph(clone_graph);
  if (original_graph != 0) graphs_.insert(original_graph);
  if (original_graph != 0 && clone_graph != 0 && original_graph != clone_graph)
    graph_origin_.emplace(clone_graph, original_graph);
  if (original != 0) {
    node_clones_.emplace_back(original, clone);
    auto it = site_.find(original);
    if (it != site_.end()) site_[clone] = it->second;
  }
  indexed_ = false;
}

void NodeIds::graph_created(uint32_t graph) {
  std::lock_guard<std::mutex> lock(mutex_);
  note_graph(graph);
  // Made while a site other than a conditional is being made: the site's own graph (NCCL's
  // capture of a collective). A conditional's windows make its bodies, whose nodes have sites
  // of their own.
  auto it = current_.find(std::this_thread::get_id());
  if (sites_ && graph != 0 && it != current_.end() && !it->second.empty() && it->second.back() >= 0 &&
      (*sites_)[it->second.back()].node->kind() != orch::fb::NodeKind::Conditional)
    graph_site_.emplace(graph, it->second.back());
  indexed_ = false;
}

void NodeIds::graph_cloned(uint32_t original, uint32_t clone) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (original != 0) graphs_.insert(original);
    if (original != 0 && clone != 0 && original != clone) graph_origin_.emplace(clone, original);
  }
  graph_created(clone);
}

void NodeIds::exec_created(uint32_t graph, uint32_t exec) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Exec ids are counted apart from graph ids: kept apart.
  if (exec != 0 && graph != 0) exec_graph_[exec] = graph;
  if (exec != 0) graphs_.insert(exec);
  note_graph(graph);
  TopKey top;
  if (exec != 0 && top_now(&top)) exec_top_[exec] = top;
  indexed_ = false;
}

void NodeIds::add(uint64_t id, int site) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (site >= 0) site_[id] = site;
  indexed_ = false;
}

void NodeIds::add_graph(uint32_t graph, int site) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (graph != 0 && site >= 0) {
    graph_site_[graph] = site;
    graphs_.insert(graph);
  }
  indexed_ = false;
}

int NodeIds::site_of(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = site_.find(id);
  return it == site_.end() ? -1 : it->second;
}

int NodeIds::current_site() const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = current_.find(std::this_thread::get_id());
  return it == current_.end() || it->second.empty() ? -1 : it->second.back();
}

bool NodeIds::busy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_.count(std::this_thread::get_id()) || phases_.count(std::this_thread::get_id());
}

size_t NodeIds::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return site_.size();
}

void NodeIds::index() const {
  if (indexed_) return;
  by_graph_index_.clear();
  by_top_index_.clear();
  clone_graphs_.clear();
  auto put = [](std::unordered_map<Key, int, KeyHash>& m, Key k, int site) {
    auto [it, inserted] = m.emplace(k, site);
    if (!inserted && it->second != site) it->second = -2;  // two sites: ambiguous, never used
  };
  // A node id's high half that is a graph CUDA named is that graph, and its low half the node's
  // index there (the layout CUPTI's ids were seen to have; ids of another layout name no graph).
  // Where no graph was named for it, the layout holding for every node that had one will do.
  auto named = [&](uint32_t g) { return g != 0 && graphs_.count(g) > 0; };
  const bool layout = layout_agree_ > 0 && layout_disagree_ == 0;
  for (const auto& [id, site] : site_) {
    if (high(id) == 0 || (!named(high(id)) && !layout)) continue;
    put(by_graph_index_, Key{high(id), low(id)}, site);
    // The graph CUDA said holds it, where that is another (a body numbered with its top-level
    // graph): the same index identifies it there.
    auto g = node_graph_.find(id);
    const uint32_t holder = g != node_graph_.end() ? g->second : 0;
    if (holder != 0 && holder != high(id)) put(by_graph_index_, Key{holder, low(id)}, site);
    // (top-level graph, index) of the nodes the runtime made (in the top-level graph or a
    // conditional body, numbered together as observed), not of what a collective captured.
    if (!sites_ || site < 0 || static_cast<size_t>(site) >= sites_->size() || !made_.count(id) ||
        graph_site_.count(high(id)) || graph_site_.count(holder))
      continue;
    const Site& s = (*sites_)[site];
    put(by_top_index_,
        Key{static_cast<uint64_t>((static_cast<int64_t>(s.graph) << 32) | static_cast<uint32_t>(s.member + 1)), low(id)},
        site);
  }
  // A node cloned from one graph into another: the clone's graph comes from the original's.
  for (const auto& [o, c] : node_clones_)
    if (high(o) != 0 && high(c) != 0 && high(o) != high(c) && (layout || (named(high(o)) && named(high(c)))))
      clone_graphs_.emplace(high(c), high(o));
  indexed_ = true;
}

NodeIds::Found NodeIds::find(const NodeRecord& r) const {
  std::lock_guard<std::mutex> lock(mutex_);
  Found f;
  if (auto it = site_.find(r.node_id); it != site_.end()) {
    f.site = it->second;
    f.via = Via::NodeId;
    return f;
  }
  index();
  // The graphs the record's node may be in: the record's graph and the id's high half, and
  // every graph those were cloned or instantiated from (a node clone's graphs too).
  std::vector<uint32_t> graphs;
  auto push = [&](uint32_t g) {
    if (g != 0 && std::find(graphs.begin(), graphs.end(), g) == graphs.end()) graphs.push_back(g);
  };
  // The record's ids may name an exec (CUPTI does not say which): its graph and top-level graph.
  std::vector<int64_t> tops;
  for (uint32_t x : {high(r.node_id), r.graph_id}) {
    if (x == 0) continue;
    push(x);
    if (auto e = exec_graph_.find(x); e != exec_graph_.end()) push(e->second);
    if (auto t = exec_top_.find(x); t != exec_top_.end() && std::find(tops.begin(), tops.end(), t->second) == tops.end())
      tops.push_back(t->second);
  }
  for (size_t i = 0; i < graphs.size() && graphs.size() < 256; ++i) {
    auto [a, b] = graph_origin_.equal_range(graphs[i]);
    for (auto it = a; it != b; ++it) push(it->second);
    auto [c, d] = clone_graphs_.equal_range(graphs[i]);
    for (auto it = c; it != d; ++it) push(it->second);
  }
  auto fits_site = [&](int site) {
    return !sites_ || (site >= 0 && static_cast<size_t>(site) < sites_->size() && fits((*sites_)[site], r));
  };
  // One answer from one kind of evidence, or none.
  auto decide = [&](const std::vector<int>& found, Via via, const char* what) {
    std::vector<int> sites, unfit;
    bool ambiguous = false;
    for (int s : found) {
      if (s == -2) {
        ambiguous = true;
        continue;
      }
      if (!fits_site(s)) {
        if (std::find(unfit.begin(), unfit.end(), s) == unfit.end()) unfit.push_back(s);
        continue;
      }
      if (std::find(sites.begin(), sites.end(), s) == sites.end()) sites.push_back(s);
    }
    if (sites.size() == 1 && !ambiguous) {
      f.site = sites[0];
      f.via = via;
      f.why.clear();
      return true;
    }
    if (f.why.empty()) {
      if (sites.size() > 1 || ambiguous)
        f.why = std::string("its ") + what + " names more than one statement";
      else if (!unfit.empty() && sites_)
        f.why = std::string("its ") + what + " names " + (*sites_)[unfit[0]].name + ", which cannot run " +
                record_text(r.kind, r.name, r.bytes, r.copy_kind);
    }
    return false;
  };
  std::vector<int> found;
  for (uint32_t g : graphs)
    if (auto it = graph_site_.find(g); it != graph_site_.end()) found.push_back(it->second);
  if (!found.empty()) {
    // A graph a site owns runs that site's work, whatever it is.
    std::vector<int> sites;
    for (int s : found)
      if (std::find(sites.begin(), sites.end(), s) == sites.end()) sites.push_back(s);
    if (sites.size() == 1) {
      f.site = sites[0];
      f.via = Via::Graph;
      return f;
    }
    f.why = "its graph belongs to more than one statement";
  }
  // The record's index: its node id's low half.
  found.clear();
  for (uint32_t g : graphs)
    if (auto it = by_graph_index_.find(Key{g, low(r.node_id)}); it != by_graph_index_.end()) found.push_back(it->second);
  if (decide(found, Via::GraphIndex, "graph and index")) return f;
  found.clear();
  for (uint32_t g : graphs)
    if (auto it = graph_top_.find(g); it != graph_top_.end() &&
                                      std::find(tops.begin(), tops.end(), it->second) == tops.end())
      tops.push_back(it->second);
  for (int64_t t : tops)
    if (auto it = by_top_index_.find(Key{static_cast<uint64_t>(t), low(r.node_id)}); it != by_top_index_.end())
      found.push_back(it->second);
  if (decide(found, Via::TopIndex, "top-level graph and index")) return f;
  return f;
}

std::string NodeIds::summary() const {
  std::lock_guard<std::mutex> lock(mutex_);
  index();
  std::ostringstream s;
  s << site_.size() << " node ids with a statement (" << made_.size() << " made by the runtime), "
    << node_clones_.size() << " node clones, " << node_graph_.size() << " nodes with a known graph, "
    << graph_origin_.size() << " graph clones, " << exec_graph_.size() << " execs, " << graph_site_.size()
    << " graphs owned by a statement, " << graph_top_.size() << " graphs of a top-level graph; "
    << "node id = (id of the graph CUDA said made it) << 32 | index: held for " << layout_agree_
    << " nodes, not for " << layout_disagree_ << "; " << by_graph_index_.size() << " (graph, index) and "
    << by_top_index_.size() << " (top-level graph, index) keys";
  return s.str();
}

std::string node_id_text(uint64_t id) {
  if (high(id) == 0) return std::to_string(id);
  return std::to_string(id) + " (graph " + std::to_string(high(id)) + ", index " + std::to_string(low(id)) + ")";
}

Attribution attribute(const std::vector<std::vector<NodeRecord>>& launches, const NodeIds& ids) {
  Attribution a;
  a.launches = launches.size();
  for (size_t l = 0; l < launches.size(); ++l) {
    std::vector<Attributed> these;
    for (const NodeRecord& r : launches[l]) {
      Attributed x;
      x.record = r;
      x.launch = static_cast<uint32_t>(l);
      if (outside_graphs(r)) {  // orch-run's or the runtime's own copy, no graph node
        a.outside.push_back(std::move(x));
        continue;
      }
      if (r.end_ns <= r.start_ns) {  // a node that did not run (an IF branch not taken)
        ++a.without_duration;
        continue;
      }
      NodeIds::Found f = ids.find(r);
      x.site = f.site;
      x.via = f.via;
      x.why = std::move(f.why);
      these.push_back(std::move(x));
    }
    std::stable_sort(these.begin(), these.end(),
                     [](const Attributed& x, const Attributed& y) { return x.record.start_ns < y.record.start_ns; });
    // The k-th run of a site in one launch is its k-th record by start: a loop body's iteration.
    std::map<std::pair<int, uint64_t>, uint32_t> seen;
    for (Attributed& x : these) {
      const auto key = x.site >= 0 ? std::make_pair(x.site, uint64_t{0}) : std::make_pair(-1, x.record.node_id);
      x.run = ++seen[key];
      a.records.push_back(std::move(x));
    }
  }
  std::stable_sort(a.outside.begin(), a.outside.end(), [](const Attributed& x, const Attributed& y) {
    return std::make_pair(x.launch, x.record.start_ns) < std::make_pair(y.launch, y.record.start_ns);
  });
  return a;
}

std::string describe_records(const std::vector<NodeRecord>& records, size_t launch, const NodeIds& ids,
                             const SiteTable& sites) {
  std::ostringstream s;
  for (const NodeRecord& r : records) {
    s << "[orch-run cupti] record: launch " << launch + 1 << " " << record_text(r.kind, r.name, r.bytes, r.copy_kind)
      << " graph " << r.graph_id << " node " << node_id_text(r.node_id) << " stream " << r.stream_id
      << (r.device_launched ? " device-launched" : "") << " ";
    if (r.end_ns > r.start_ns)
      s << format_ms(static_cast<double>(r.end_ns - r.start_ns) / 1e6);
    else
      s << "no duration";
    if (outside_graphs(r)) {
      s << " -> outside the pipeline's graphs\n";
      continue;
    }
    const NodeIds::Found f = ids.find(r);
    if (f.site >= 0)
      s << " -> " << sites[f.site].name << " [" << via_name(f.via) << "]\n";
    else
      s << " -> not attributed" << (f.why.empty() ? "" : " (" + f.why + ")") << "\n";
  }
  return s.str();
}

std::vector<NodeRow> node_rows(const Attribution& a) {
  // Attributed records group by site; the others by what CUPTI said of them.
  using Key = std::tuple<int, int, std::string, uint64_t>;
  struct Acc {
    NodeRow row;
    std::map<uint32_t, std::pair<double, uint64_t>> per_launch;  // launch: ms summed, earliest start
    std::vector<double> runs;
  };
  std::map<Key, Acc> acc;
  std::map<uint32_t, uint64_t> first;  // launch: its first record's start
  for (const Attributed& x : a.records) {
    auto [it, inserted] = first.try_emplace(x.launch, x.record.start_ns);
    if (!inserted) it->second = std::min(it->second, x.record.start_ns);
  }
  for (const Attributed& x : a.records) {
    const NodeRecord& r = x.record;
    const Key key = x.site >= 0 ? Key{x.site, 0, std::string(), 0}
                                : Key{-1, static_cast<int>(r.kind), r.name, r.node_id};
    Acc& c = acc[key];
    if (c.runs.empty()) {
      c.row.site = x.site;
      c.row.kind = r.kind;
      c.row.symbol = r.name;
      c.row.bytes = r.bytes;
      c.row.copy_kind = r.copy_kind;
      c.row.node_id = r.node_id;
      c.row.graph_id = r.graph_id;
      c.row.why = x.why;
    }
    c.row.device_launched |= r.device_launched;
    const double ms = static_cast<double>(r.end_ns - r.start_ns) / 1e6;
    c.runs.push_back(ms);
    auto [pl, inserted] = c.per_launch.try_emplace(x.launch, 0.0, r.start_ns);
    pl->second.first += ms;
    pl->second.second = std::min(pl->second.second, r.start_ns);
    c.row.max_runs = std::max<size_t>(c.row.max_runs, x.run);
  }
  std::vector<NodeRow> rows;
  for (auto& [key, c] : acc) {
    std::vector<double> totals, offsets;
    for (const auto& [launch, v] : c.per_launch) {
      totals.push_back(v.first);
      offsets.push_back(static_cast<double>(v.second - first[launch]) / 1e6);
    }
    c.row.per_launch = summarize(totals);
    c.row.per_run = summarize(c.runs);
    c.row.runs_per_launch = a.launches ? static_cast<double>(c.runs.size()) / static_cast<double>(a.launches) : 0;
    c.row.start_offset = summarize(offsets).median;
    rows.push_back(c.row);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const NodeRow& x, const NodeRow& y) {
    if (x.start_offset != y.start_offset) return x.start_offset < y.start_offset;
    return x.site >= 0 && (y.site < 0 || x.site < y.site);
  });
  return rows;
}

std::string record_text(NodeRecord::Kind kind, const std::string& symbol, uint64_t bytes, uint8_t copy_kind) {
  static const char* kCopyKinds[] = {"", " HtoD", " DtoH", " HtoA", " AtoH", " AtoA", " AtoD", " DtoA", " DtoD", " HtoH", " PtoP"};
  switch (kind) {
    case NodeRecord::Kind::Kernel: return "kernel " + symbol;
    case NodeRecord::Kind::Memcpy:
      return "memcpy " + format_bytes(bytes) + (copy_kind <= 10 ? kCopyKinds[copy_kind] : "");
    case NodeRecord::Kind::Memset: return "memset " + format_bytes(bytes);
  }
  return "?";
}

bool uses_device_graphs(const orch::fb::Pipeline& p) {
  if (p.graphs())
    for (const orch::fb::Graph* g : *p.graphs())
      if (g->device()) return true;
  return false;
}

std::string unattributed_text(const NodeRecord::Kind kind, const std::string& symbol, uint64_t bytes, uint8_t copy_kind,
                              uint64_t node_id, const std::string& why) {
  return record_text(kind, symbol, bytes, copy_kind) + ": CUDA graph node " + node_id_text(node_id) +
         " was not made for any statement as orch-run saw the graphs built" + (why.empty() ? "" : " (" + why + ")") +
         "; not attributed";
}

std::string format_node_table(const SiteTable& sites, const std::vector<NodeRow>& rows, const Summary& launch,
                              size_t profiled_launches, const std::vector<Attributed>& outside) {
  std::ostringstream s;
  s << "per node (CUPTI activity records of " << profiled_launches
    << " more launches; GPU time of each graph node per launch, attributed by CUDA's graph node ids):\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %10s %10s %7s  %s\n", "median", "p90", "runs", "node");
  s << line;
  double sum = 0;
  size_t unattributed = 0;
  for (const NodeRow& r : rows) {
    sum += r.per_launch.median;
    std::string label;
    if (r.site < 0) {
      ++unattributed;
      label = unattributed_text(r.kind, r.symbol, r.bytes, r.copy_kind, r.node_id, r.why);
    } else {
      const Site& site = sites[r.site];
      label = site.name;
      const orch::fb::NodeKind nk = site.node->kind();
      // What CUDA ran for it, where that is not the statement's own kind: a fill run as CUDA's
      // memset kernel, a collective's NCCL kernels.
      if (r.kind == NodeRecord::Kind::Kernel && nk != orch::fb::NodeKind::Kernel)
        label += "  (run as kernel " + r.symbol + ")";
      if (site.in_while) {
        if (r.max_runs > 1)
          label += "  [loop body: " + format_ms(r.per_run.median) + " per run, up to " + std::to_string(r.max_runs) +
                   " runs in a launch]";
        else
          label += "  [loop body: CUPTI reported one run per launch]";
      }
    }
    if (r.device_launched) label += "  [device-launched]";
    char runs[32];
    std::snprintf(runs, sizeof runs,
                  r.runs_per_launch == static_cast<double>(static_cast<uint64_t>(r.runs_per_launch)) ? "%.0f" : "%.2f",
                  r.runs_per_launch);
    std::snprintf(line, sizeof line, "  %10s %10s %7s  ", format_ms(r.per_launch.median).c_str(),
                  format_ms(r.per_launch.p90).c_str(), runs);
    s << line << label << "\n";
  }
  if (rows.empty()) s << "  (CUPTI reported no kernel, copy or fill)\n";
  s << "  " << rows.size() - unattributed << " nodes; their medians sum to " << format_ms(sum)
    << ", the launch median is " << format_ms(launch.median)
    << " (concurrent nodes overlap; the rest is launch overhead and dependency gaps)\n";
  if (unattributed > 0)
    s << "  " << unattributed << " row" << (unattributed == 1 ? "" : "s")
      << " not attributed: CUPTI named graph nodes that orch-run did not see the runtime make\n";
  if (!outside.empty()) {
    // What ran outside the graphs, by what it was: "memcpy 16 B DtoH" x 4.
    std::map<std::string, size_t> what;
    for (const Attributed& x : outside)
      ++what[record_text(x.record.kind, x.record.name, x.record.bytes, x.record.copy_kind)];
    s << "  not shown: " << outside.size() << " record" << (outside.size() == 1 ? "" : "s")
      << " of work outside the pipeline's graphs (orch-run's and the runtime's own copies around the launches, "
         "such as reading the device status):";
    bool first = true;
    for (const auto& [text, count] : what) {
      s << (first ? " " : ", ") << text << " x" << count;
      first = false;
    }
    s << "\n";
  }
  (void)sites;
  return s.str();
}

}  // namespace orch::run

#include "tools/orch_run/attribution.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <sstream>
#include <tuple>

namespace orch::run {

const char* via_name(Via v) {
  switch (v) {
    case Via::None: return "none";
    case Via::NodeId: return "node id";
    case Via::Graph: return "graph";
    case Via::GraphIndex: return "graph + index";
    case Via::ExecIndex: return "exec index";
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
  switch (artifact::op_kind(*s.node)) {
    case artifact::NodeKind::Kernel:
      return r.kind == NodeRecord::Kind::Kernel && (s.kernel_symbol.empty() || r.name == s.kernel_symbol);
    case artifact::NodeKind::Memset:
      return r.kind == NodeRecord::Kind::Memset ||
             (r.kind == NodeRecord::Kind::Kernel && r.name.rfind("memset", 0) == 0);
    case artifact::NodeKind::Memcpy: return r.kind == NodeRecord::Kind::Memcpy;
    case artifact::NodeKind::Collective: return true;
    case artifact::NodeKind::Empty:
    case artifact::NodeKind::Conditional: return false;
  }
  return false;  // a kind this build's schema does not name
}

}  // namespace

void NodeIds::begin(int site) {
  std::lock_guard<std::mutex> lock(mutex_);
  current_[std::this_thread::get_id()].push_back(Frame{site, {}});
}

void NodeIds::end(int site, uint64_t made) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint32_t> graphs;
  auto it = current_.find(std::this_thread::get_id());
  if (it != current_.end() && !it->second.empty()) {
    graphs = std::move(it->second.back().graphs);
    it->second.pop_back();
    if (it->second.empty()) current_.erase(it);
  }
  if (made != 0 && site >= 0) {
    site_[made] = site;
    made_.insert(made);
  }
  // The graphs CUDA made in the window belong to the node made: a conditional's bodies, a
  // collective's capture and child graph.
  if (made != 0)
    for (uint32_t g : graphs) window_graphs_.emplace_back(made, g);
  indexed_ = false;
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
  if (sites_ && c != current_.end() && !c->second.empty() && c->second.back().site >= 0) {
    const Site& s = (*sites_)[c->second.back().site];
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
  if (it != current_.end() && !it->second.empty() && it->second.back().site >= 0) site_[id] = it->second.back().site;
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
  if (graph != 0 && it != current_.end() && !it->second.empty()) {
    const int site = it->second.back().site;
    it->second.back().graphs.push_back(graph);
    if (sites_ && site >= 0 && artifact::op_kind(*(*sites_)[site].node) != artifact::NodeKind::Conditional)
      graph_site_.emplace(graph, site);
  }
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

void NodeIds::add_graph(uint32_t graph, int site, uint64_t parent) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (graph != 0 && site >= 0) {
    graph_site_[graph] = site;
    graphs_.insert(graph);
  }
  if (graph != 0 && parent != 0) child_graphs_.emplace_back(parent, graph);
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
  return it == current_.end() || it->second.empty() ? -1 : it->second.back().site;
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
    // The graph CUDA said holds it, where that is another: the same index identifies it there.
    auto g = node_graph_.find(id);
    const uint32_t holder = g != node_graph_.end() ? g->second : 0;
    if (holder != 0 && holder != high(id)) put(by_graph_index_, Key{holder, low(id)}, site);
  }
  // A node cloned from one graph into another: the clone's graph comes from the original's.
  for (const auto& [o, c] : node_clones_)
    if (high(o) != 0 && high(c) != 0 && high(o) != high(c) && (layout || (named(high(o)) && named(high(c)))))
      clone_graphs_.emplace(high(c), high(o));
  number();
  indexed_ = true;
}

std::string NodeIds::site_text(int site) const {
  if (site < 0) return "a node made for no statement";
  if (sites_ && static_cast<size_t>(site) < sites_->size()) return (*sites_)[site].name;
  return "site " + std::to_string(site);
}

void NodeIds::number() const {
  numbering_.clear();
  root_top_.clear();
  nested_.clear();
  // Indices are only known where the ids have the layout (graph << 32 | index).
  if (!(layout_agree_ > 0 && layout_disagree_ == 0)) return;
  // The nodes of every graph, by index.
  std::map<uint32_t, std::set<uint64_t>> members;
  auto member = [&](uint64_t id) {
    if (high(id) != 0) members[high(id)].insert(id);
  };
  for (const auto& [id, g] : node_graph_) member(id);
  for (const auto& [id, site] : site_) member(id);
  for (uint64_t id : made_) member(id);
  auto site_of_node = [&](uint64_t id) {
    auto it = site_.find(id);
    return it == site_.end() ? -1 : it->second;
  };
  auto is_origin = [&](uint32_t of, uint32_t g) {  // g was cloned from `of`
    auto [a, b] = graph_origin_.equal_range(g);
    for (auto it = a; it != b; ++it)
      if (it->second == of) return true;
    auto [c, d] = clone_graphs_.equal_range(g);
    for (auto it = c; it != d; ++it)
      if (it->second == of) return true;
    return false;
  };
  // The graphs nested in each node: the child graphs the observer walked, else the graphs made
  // in the node's window but for one that another of them was cloned from (a collective's
  // capture, whose clone the child graph node holds).
  std::map<uint64_t, std::vector<uint32_t>> children;
  std::unordered_map<uint32_t, uint64_t> parent_of;
  for (const auto& [parent, g] : child_graphs_)
    if (!parent_of.count(g)) {
      parent_of[g] = parent;
      children[parent].push_back(g);
    }
  std::map<uint64_t, std::vector<uint32_t>> window;
  for (const auto& [made, g] : window_graphs_) window[made].push_back(g);
  for (const auto& [made, gs] : window) {
    if (children.count(made)) continue;
    for (uint32_t g : gs) {
      bool cloned_from = false;
      for (uint32_t other : gs) cloned_from |= other != g && is_origin(g, other);
      if (cloned_from || parent_of.count(g)) continue;
      parent_of[g] = made;
      children[made].push_back(g);
    }
  }
  // Several graphs of one node (an if's then and else): in the order of the bodies their
  // statements are in, else as CUDA made them.
  for (auto& [parent, gs] : children) {
    const int ps = site_of_node(parent);
    auto body = [&](uint32_t g) -> uint64_t {
      auto m = members.find(g);
      if (sites_ && ps >= 0 && m != members.end())
        for (uint64_t id : m->second) {
          const int s = site_of_node(id);
          if (s >= 0 && static_cast<size_t>(s) < sites_->size() && (*sites_)[s].parent == ps) return (*sites_)[s].body;
        }
      return 0;
    };
    std::stable_sort(gs.begin(), gs.end(), [&](uint32_t x, uint32_t y) {
      return std::make_pair(body(x), x) < std::make_pair(body(y), y);
    });
    for (uint32_t g : gs) nested_.insert(g);
  }
  auto top_of = [&](int site) -> TopKey {
    const Site& s = (*sites_)[site];
    return (static_cast<int64_t>(s.graph) << 32) | static_cast<uint32_t>(s.member + 1);
  };
  // Top-level templates: graphs in no node holding a node the runtime made for a top-level
  // statement. A graph in no node holding only nested statements' nodes is one whose parent
  // orch-run did not see: its top-level graph's exec cannot be numbered past its own nodes.
  std::map<TopKey, std::string> orphans;
  std::vector<uint32_t> roots;
  for (const auto& [g, ids] : members) {
    if (nested_.count(g)) continue;
    int top_site = -1, nested_site = -1;
    for (uint64_t id : ids) {
      if (!made_.count(id)) continue;
      const int s = site_of_node(id);
      if (s < 0) continue;
      if (!sites_) {
        top_site = s;
        break;
      }
      if (static_cast<size_t>(s) >= sites_->size()) continue;
      if ((*sites_)[s].parent < 0) {
        top_site = s;
        break;
      }
      nested_site = s;
    }
    if (top_site >= 0) {
      roots.push_back(g);
      if (sites_) root_top_[g] = top_of(top_site);
    } else if (nested_site >= 0) {
      orphans.emplace(top_of(nested_site), "graph " + std::to_string(g) + " holds " + site_text(nested_site) +
                                               ", but orch-run did not see which node it is nested in");
    }
  }
  // Indices 0..n-1 as CUDA counts them, every node seen; else a node was made unseen.
  auto gaps = [&](uint32_t g) -> std::string {
    auto m = members.find(g);
    if (m == members.end()) return "";
    uint32_t expect = 0;
    for (uint64_t id : m->second)
      if (low(id) != expect++)
        return "graph " + std::to_string(g) + " has nodes at indices up to " + std::to_string(low(*m->second.rbegin())) +
               " but orch-run saw " + std::to_string(m->second.size());
    return "";
  };
  for (uint32_t root : roots) {
    Numbering& n = numbering_[root];
    // Nodes below a collective's node run its work (NCCL's capture), whatever their ids say.
    std::unordered_map<uint32_t, int> owner;
    owner[root] = -1;
    auto slots = [&](uint32_t g, std::vector<Slot>& out) {
      auto m = members.find(g);
      if (m == members.end()) return;
      for (uint64_t id : m->second) out.push_back(Slot{id, owner[g] >= 0 ? owner[g] : site_of_node(id)});
    };
    auto kids = [&](uint64_t node, uint32_t g) -> const std::vector<uint32_t>* {
      auto c = children.find(node);
      if (c == children.end()) return nullptr;
      for (uint32_t k : c->second) {
        if (owner.count(k)) continue;
        int o = owner[g];
        const int ps = site_of_node(node);
        if (o < 0 && sites_ && ps >= 0 && static_cast<size_t>(ps) < sites_->size() &&
            artifact::op_kind(*(*sites_)[ps].node) == artifact::NodeKind::Collective)
          o = ps;
        if (o < 0)
          if (auto gs = graph_site_.find(k); gs != graph_site_.end()) o = gs->second;
        owner[k] = o;
      }
      return &c->second;
    };
    n.unknown = gaps(root);
    // Breadth-first: the top graph, then every graph nested in it in the order of their nodes,
    // then the graphs nested in those, level by level.
    std::vector<uint32_t> queue = {root};
    std::unordered_set<uint32_t> seen = {root};
    for (size_t i = 0; i < queue.size() && queue.size() < 100000; ++i) {
      const uint32_t g = queue[i];
      if (n.unknown.empty()) n.unknown = gaps(g);
      slots(g, n.bfs);
      auto m = members.find(g);
      if (m == members.end()) continue;
      for (uint64_t id : m->second)
        if (const auto* ks = kids(id, g))
          for (uint32_t k : *ks)
            if (seen.insert(k).second) queue.push_back(k);
    }
    // Recursive: a graph's nodes, then each graph nested in them, flattened the same way.
    std::unordered_set<uint32_t> done;
    std::function<void(uint32_t, int)> flatten = [&](uint32_t g, int depth) {
      if (depth > 64 || !done.insert(g).second) return;
      slots(g, n.recursive);
      auto m = members.find(g);
      if (m == members.end()) return;
      for (uint64_t id : m->second)
        if (const auto* ks = kids(id, g))
          for (uint32_t k : *ks) flatten(k, depth + 1);
    };
    flatten(root, 0);
    auto m = members.find(root);
    n.top = m == members.end() ? 0 : m->second.size();
    if (n.unknown.empty() && sites_)
      if (auto o = orphans.find(root_top_[root]); o != orphans.end()) n.unknown = o->second;
    if (n.bfs.size() != n.recursive.size() && n.unknown.empty()) n.unknown = "its nested graphs do not form a tree";
    if (!n.unknown.empty()) {
      // The top graph's own nodes come first whatever else: those indices stay known.
      if (gaps(root).empty()) {
        n.bfs.resize(std::min(n.bfs.size(), n.top));
        n.recursive.resize(std::min(n.recursive.size(), n.top));
      } else {
        n.top = 0;
        n.bfs.clear();
        n.recursive.clear();
      }
    }
  }
}

std::vector<uint32_t> NodeIds::roots_of(const NodeRecord& r, bool high_only) const {
  std::vector<uint32_t> out;
  auto add = [&](uint32_t g) {
    if (numbering_.count(g) && std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
  };
  for (uint32_t x : {high(r.node_id), r.graph_id}) {
    if (x == 0 || (high_only && x != high(r.node_id))) continue;
    // An exec (its ids are counted apart from graphs' in CUPTI's API; on the H100 they were the
    // exec's own graph's): the template it was instantiated from.
    if (auto e = exec_graph_.find(x); e != exec_graph_.end()) add(e->second);
    // A graph cloned from a top-level template (the exec's graph). A graph cloned from a nested
    // graph (a body's clone) is not numbered as the exec; nor is a graph CUDA made during
    // instantiation that no clone ties to the template (its indices are its own).
    std::vector<uint32_t> stack = {x};
    std::unordered_set<uint32_t> seen;
    while (!stack.empty() && seen.size() < 256) {
      const uint32_t g = stack.back();
      stack.pop_back();
      if (!seen.insert(g).second) continue;
      if (numbering_.count(g)) {
        add(g);
        continue;
      }
      if (nested_.count(g)) continue;
      auto [a, b] = graph_origin_.equal_range(g);
      for (auto it = a; it != b; ++it) stack.push_back(it->second);
      auto [c, d] = clone_graphs_.equal_range(g);
      for (auto it = c; it != d; ++it) stack.push_back(it->second);
    }
  }
  if (out.empty())
    for (uint32_t x : {high(r.node_id), r.graph_id})
      if (auto t = exec_top_.find(x); x != 0 && (!high_only || x == high(r.node_id)) && t != exec_top_.end())
        for (const auto& [g, top] : root_top_)
          if (top == t->second) add(g);
  return out;
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
  // The record's ids may name an exec (CUPTI does not say which): its graph too.
  for (uint32_t x : {high(r.node_id), r.graph_id}) {
    if (x == 0) continue;
    push(x);
    if (auto e = exec_graph_.find(x); e != exec_graph_.end()) push(e->second);
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
  const std::string ran = record_text(r.kind, r.name, r.bytes, r.copy_kind);
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
        f.why = std::string("its ") + what + " names " + (*sites_)[unfit[0]].name + ", which cannot run " + ran;
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
  // The record's index: its node id's low half, an index in the graph of its high half where
  // that is a graph CUDA named (the record's graph id may be another: the exec launched), else
  // in the record's graph.
  const uint32_t k = low(r.node_id);
  const bool named_high = high(r.node_id) != 0 && graphs_.count(high(r.node_id));
  std::vector<uint32_t> holders = graphs;
  if (named_high) {
    // Only what the high half leads to, not the graphs reached from the record's graph alone.
    std::vector<uint32_t> walk = {high(r.node_id)};
    if (auto e = exec_graph_.find(high(r.node_id)); e != exec_graph_.end()) walk.push_back(e->second);
    for (size_t i = 0; i < walk.size() && walk.size() < 256; ++i) {
      auto [a, b] = graph_origin_.equal_range(walk[i]);
      for (auto it = a; it != b; ++it)
        if (std::find(walk.begin(), walk.end(), it->second) == walk.end()) walk.push_back(it->second);
      auto [c, d] = clone_graphs_.equal_range(walk[i]);
      for (auto it = c; it != d; ++it)
        if (std::find(walk.begin(), walk.end(), it->second) == walk.end()) walk.push_back(it->second);
    }
    holders = walk;
  }
  found.clear();
  for (uint32_t g : holders)
    if (auto it = by_graph_index_.find(Key{g, k}); it != by_graph_index_.end()) found.push_back(it->second);
  if (decide(found, Via::GraphIndex, "graph and index")) return f;
  // The exec's numbering of its top-level template, nested graphs after the top graph's nodes.
  std::vector<std::pair<int, int>> candidates;  // (breadth-first, recursive) per template
  std::string unknown;
  for (uint32_t root : roots_of(r, named_high)) {
    const Numbering& n = numbering_.at(root);
    if (k < n.top && k < n.bfs.size())
      candidates.emplace_back(n.bfs[k].site, n.bfs[k].site);
    else if (!n.unknown.empty())
      unknown = n.unknown;
    else if (k < n.bfs.size() && k < n.recursive.size())
      candidates.emplace_back(n.bfs[k].site, n.recursive[k].site);
  }
  if (candidates.empty()) {
    if (!unknown.empty() && f.why.empty())
      f.why = "the exec's numbering of nested graphs is unknown here: " + unknown;
    return f;
  }
  std::vector<int> distinct, fit;
  bool agree = true;
  for (const auto& [b, c] : candidates) {
    agree &= b == c && b == candidates[0].first;
    for (int s : {b, c})
      if (s >= 0 && std::find(distinct.begin(), distinct.end(), s) == distinct.end()) {
        distinct.push_back(s);
        if (fits_site(s)) fit.push_back(s);
      }
  }
  const std::string index = "its exec index " + std::to_string(k);
  if (agree) {
    if (distinct.empty()) return f;  // a node made for no statement
    if (!fit.empty()) {
      f.site = fit[0];
      f.via = Via::ExecIndex;
      f.exec_index = k;
      f.orders = kBreadthFirst | kRecursive;
      f.why.clear();
    } else if (f.why.empty() && sites_) {
      f.why = index + " names " + (*sites_)[distinct[0]].name + ", which cannot run " + ran;
    }
    return f;
  }
  if (fit.size() == 1) {
    f.site = fit[0];
    f.via = Via::ExecIndex;
    f.exec_index = k;
    f.why.clear();
    for (const auto& [b, c] : candidates) {
      if (b == f.site) f.orders |= kBreadthFirst;
      if (c == f.site) f.orders |= kRecursive;
      if (b != f.site && f.other.empty()) f.other = site_text(b);
      if (c != f.site && f.other.empty()) f.other = site_text(c);
    }
    return f;
  }
  // Both orders name something that can run it (or neither does): no guess.
  std::string bfs, rec;
  for (const auto& [b, c] : candidates) {
    bfs += (bfs.empty() ? "" : " or ") + site_text(b);
    rec += (rec.empty() ? "" : " or ") + site_text(c);
  }
  f.why = "the exec's numbering of nested graphs is ambiguous here (" + index + "; candidates: breadth-first " + bfs +
          ", recursive " + rec + (fit.empty() ? "; neither can run " + ran : std::string()) + ")";
  return f;
}

std::string NodeIds::summary() const {
  std::lock_guard<std::mutex> lock(mutex_);
  index();
  size_t nested = 0;
  for (const auto& [root, n] : numbering_) nested += n.bfs.size() - std::min(n.bfs.size(), n.top);
  std::ostringstream s;
  s << site_.size() << " node ids with a statement (" << made_.size() << " made by the runtime), "
    << node_clones_.size() << " node clones, " << node_graph_.size() << " nodes with a known graph, "
    << graph_origin_.size() << " graph clones, " << exec_graph_.size() << " execs, " << graph_site_.size()
    << " graphs owned by a statement, " << graph_top_.size() << " graphs of a top-level graph; "
    << "node id = (id of the graph CUDA said made it) << 32 | index: held for " << layout_agree_
    << " nodes, not for " << layout_disagree_ << "; " << by_graph_index_.size() << " (graph, index) keys; "
    << numbering_.size() << " top-level templates numbered, " << nested_.size() << " nested graphs with " << nested
    << " nodes";
  return s.str();
}

std::string NodeIds::exec_numbering() const {
  std::lock_guard<std::mutex> lock(mutex_);
  index();
  std::ostringstream s;
  for (const auto& [root, n] : numbering_) {
    s << "exec numbering of template graph " << root << ": " << n.top << " top-level nodes (indices 0 to "
      << (n.top ? std::to_string(n.top - 1) : std::string("-")) << "), " << n.bfs.size() << " in all";
    if (!n.unknown.empty()) s << "; past the top-level nodes unknown: " << n.unknown;
    s << "\n";
    for (size_t k = n.top; k < n.bfs.size() && k < n.recursive.size(); ++k) {
      const Slot& b = n.bfs[k];
      const Slot& c = n.recursive[k];
      s << "  index " << k << ": breadth-first " << node_id_text(b.node) << " " << site_text(b.site);
      if (b.node == c.node)
        s << " (both orders)\n";
      else
        s << "; recursive " << node_id_text(c.node) << " " << site_text(c.site) << "\n";
    }
  }
  return s.str();
}

std::string found_text(const NodeIds::Found& f) {
  if (f.via != Via::ExecIndex) return via_name(f.via);
  std::string s = "exec index " + std::to_string(f.exec_index) + ", ";
  if (f.orders == (kBreadthFirst | kRecursive)) return s + "both orders";
  s += f.orders == kBreadthFirst ? "breadth-first order only" : "recursive order only";
  if (!f.other.empty()) s += std::string(" (") + (f.orders == kBreadthFirst ? "recursive" : "breadth-first") + ": " + f.other + ")";
  return s;
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
      if (f.site >= 0) x.how = found_text(f);
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
      s << " -> " << sites[f.site].name << " [" << found_text(f) << "]\n";
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
      const artifact::NodeKind nk = artifact::op_kind(*site.node);
      // What CUDA ran for it, where that is not the statement's own kind: a fill run as CUDA's
      // memset kernel, a collective's NCCL kernels.
      if (r.kind == NodeRecord::Kind::Kernel && nk != artifact::NodeKind::Kernel)
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

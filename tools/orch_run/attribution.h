// Exact attribution of GPU activity to the .orch statements that produced it. CUDA tells a
// profiler, for every kernel, copy and fill of a launched graph, the id of the graph node that ran
// it (CUPTI's graphNodeId). That node is a clone, made when the graph was instantiated, of a node
// the runtime made with an explicit call for one artifact node; the runtime says which
// (orch/observe.h), and CUPTI reports node and graph creations, clones and instantiations (its
// resource callbacks, on the thread that makes them). NodeIds joins the two: every CUPTI node id
// the runtime's graph building produced maps to its Site, and the graphs CUDA made to the sites
// or top-level graphs they belong to; a record found by none of these is reported as
// unattributed, never matched by kernel name or size.
//
// No CUDA or CUPTI in here: the records are plain values (filled from CUPTI's activity records
// by cupti.cpp, or by tests as CUPTI would), so all of it is tested without a GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tools/orch_run/sites.h"
#include "tools/orch_run/values.h"

namespace orch::run {

// One activity record: what ran for one graph node once.
struct NodeRecord {
  enum class Kind { Kernel, Memcpy, Memset } kind = Kind::Kernel;
  std::string name;       // the kernel's symbol (CUDA's own memset8/16/32 for some fills)
  uint64_t bytes = 0;     // copies and fills
  uint8_t copy_kind = 0;  // copies: CUPTI's CUpti_ActivityMemcpyKind (1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH)
  uint32_t graph_id = 0;  // CUDA's ids: a conditional body or a device graph has its own graph
  uint64_t node_id = 0;
  uint64_t start_ns = 0, end_ns = 0;
  bool device_launched = false;
  uint32_t device_id = 0, stream_id = 0, correlation_id = 0;
  // Kernels: the launch as it ran (CUPTI's kernel record), for --profile.
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint32_t registers = 0;  // per thread
  uint32_t static_shared_bytes = 0, dynamic_shared_bytes = 0;  // per block
};

// How a record's graph node was found.
enum class Via : uint8_t {
  None,        // not found: not attributed
  NodeId,      // its node id is one CUDA reported made or cloned for a site (the exact path)
  Graph,       // its graph belongs to a site as a whole (a collective's captured NCCL graph)
  GraphIndex,  // (graph, local index): the node with that index in a graph it was cloned from
  ExecIndex,   // (exec, index): the index in the exec's flattened numbering of its top-level template
};
const char* via_name(Via v);  // "node id", "graph", "graph + index", "exec index"

// The orders an exec's numbering of nested graphs may follow (NodeIds::Found::orders, a mask).
enum ExecOrder : uint8_t { kBreadthFirst = 1, kRecursive = 2 };

// CUPTI graph node ids of the nodes made for each Site, and what CUDA said of the graphs that hold
// them. Thread-safe; the "current site" and "current top-level graph" are per thread (CUDA calls
// the resource callbacks on the thread that makes the node or graph).
//
// CUPTI's node ids are (graph id << 32 | the node's index in its graph), indices counted per
// graph from 0 in creation order. What an H100 (driver 580.159.04, CUDA 13.0) showed
// (docs/observe.md): instantiation clones the top-level template (graph 1) into the exec's graph
// (graph 3) and names every top-level node's clone (GRAPHNODE_CLONED), but the nodes of nested
// graphs (conditional bodies, a collective's child graph) run with ids (exec's graph, k) that no
// callback names, where k numbers the template's top-level nodes first (0..n0-1) and the nested
// graphs' nodes after them (fills: body nodes at 4..6; jacobi: 7..10, after the top-level copy
// at 6; a one-rank allreduce: its captured copy at 2). So a record is found, in this order:
//  1. by node id: a node made for a site, or a clone CUDA named of one;
//  2. by graph: its graph belongs to a site as a whole (a collective's captured graph, clones);
//  3. by (graph, index): its graph (its node id's high half where CUDA named that graph, else
//     the record's graph id too), or any graph that one was cloned or instantiated from, holds
//     a node of a site at that index;
//  4. by exec index: its graph is an exec or the exec's clone of a top-level template T, and its
//     index k is looked up in T's flattened numbering, computed from the callbacks (each
//     template graph's nodes by index; which node each nested graph belongs to: the site whose
//     window made it, or the child graph node the observer walked). The order CUDA gives
//     several nested graphs is not known yet, so k is looked up in two: breadth-first (all
//     bodies of level 1 in the order of their parent nodes, then level 2, ...) and recursive
//     (the top graph's nodes, then each nested graph's own flattened list in the order of its
//     parent node). Where they agree, that node; where they differ, the one candidate that can
//     run the record, else none (ambiguous). Only where every graph holding a nested site's
//     node has a known parent and every graph's indices were all seen (0..n-1).
// A node found by 3 or 4 must be able to run what the record says ran (a kernel node its own
// kernel, a fill a memset or a memset kernel, a copy a copy; a collective's nodes anything),
// else it stays unattributed; so does an index that names two statements. Never by name or size.
class NodeIds {
 public:
  // `sites`: the sites the ids are of, for the kinds of their nodes (the check of a match by
  // index, which graphs a site owns) and their top-level graphs; without it, neither.
  explicit NodeIds(const SiteTable* sites = nullptr) : sites_(sites) {}

  // The runtime starts and ends making the CUDA node(s) of `site` on this thread (nested for
  // conditional bodies).
  void begin(int site);
  // `made` is CUPTI's id of the node the runtime added (0 when unknown).
  void end(int site, uint64_t made);
  // A phase (build, instantiate, upload, launch) of top-level graph `graph` (family member
  // `member`, -1 for none) starts and ends on this thread: graphs CUDA makes meanwhile are part of it.
  void phase_begin(int graph, int member);
  void phase_end();

  // CUDA made node `id` on this thread (CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) in graph `graph`
  // (CUPTI's graph id, 0 unknown): it belongs to the site being made, if any (NCCL's captured
  // kernels of a collective come this way).
  void created(uint64_t id, uint32_t graph = 0);
  // CUDA cloned `original` (0 unknown) of graph `original_graph` into `clone` of `clone_graph`
  // (instantiation, child graph nodes): the clone belongs where the original does.
  void cloned(uint64_t original, uint64_t clone, uint32_t original_graph = 0, uint32_t clone_graph = 0);
  // CUDA made graph `graph` (GRAPH_CREATED): in a collective's window, the graph is the site's.
  void graph_created(uint32_t graph);
  // CUDA cloned graph `original` into `clone` (GRAPH_CLONED).
  void graph_cloned(uint32_t original, uint32_t clone);
  // CUDA instantiated graph `graph` into the executable graph `exec` (GRAPHEXEC_CREATED).
  void exec_created(uint32_t graph, uint32_t exec);
  // Node `id` belongs to `site` (found by walking what the runtime made, e.g. a child graph).
  void add(uint64_t id, int site);
  // Every node of graph `graph` belongs to `site` (a collective's embedded child graph); with
  // `parent`, the graph is the child graph of node `parent` (nested in the exec's numbering).
  void add_graph(uint32_t graph, int site, uint64_t parent = 0);

  // The site of a node id CUDA reported for it, -1 for none.
  int site_of(uint64_t id) const;
  struct Found {
    int site = -1;
    Via via = Via::None;
    std::string why;  // not found: why not, past "not made for any statement" (ambiguous, kinds)
    // Via::ExecIndex: the index, and the orders (ExecOrder mask) whose candidate is the site.
    uint32_t exec_index = 0;
    uint8_t orders = 0;
    std::string other;  // ... and the other order's candidate where they differ ("" none)
  };
  // The site of an activity record's node: by its id, else by its graph (see above).
  Found find(const NodeRecord& r) const;

  // This thread's innermost site being made, -1 for none (ORCH_RUN_CUPTI_DEBUG).
  int current_site() const;
  // Whether a site's window or a phase is open on this thread.
  bool busy() const;
  // What was learned, for ORCH_RUN_CUPTI_DEBUG: counts and the id layout's check.
  std::string summary() const;
  // Every top-level template's exec numbering in both orders, one line per index where they
  // differ or a nested graph starts (ORCH_RUN_CUPTI_DEBUG).
  std::string exec_numbering() const;
  size_t size() const;

 private:
  using TopKey = int64_t;  // (graph << 32) | (member + 1)
  struct Key {
    uint64_t a;
    uint32_t b;
    bool operator==(const Key& o) const { return a == o.a && b == o.b; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.a * 1000003u ^ k.b); }
  };
  // A site's window open on a thread, and the graphs CUDA made in it (not in windows inside it).
  struct Frame {
    int site;
    std::vector<uint32_t> graphs;
  };
  // One entry of an exec's flattened numbering: the template node and the site it runs for.
  struct Slot {
    uint64_t node;
    int site;
  };
  // The flattened numbering of the exec of one top-level template graph.
  struct Numbering {
    size_t top = 0;                       // the template's own nodes: indices 0..top-1
    std::vector<Slot> bfs, recursive;     // every index, in either order
    std::string unknown;                  // why indices from `top` on cannot be numbered
  };
  bool top_now(TopKey* top) const;  // callers hold mutex_
  void note_graph(uint32_t graph);
  void note_layout(uint64_t node, uint32_t graph);  // counts, for summary()
  void index() const;  // (re)builds the (graph, index) tables and the exec numberings
  void number() const;  // the exec numberings (part of index())
  // The top-level templates whose exec a record's graph is (of its node id's high half alone
  // with `high_only`).
  std::vector<uint32_t> roots_of(const NodeRecord& r, bool high_only) const;
  std::string site_text(int site) const;

  const SiteTable* sites_ = nullptr;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, int> site_;             // node id: site
  std::unordered_map<uint64_t, uint32_t> node_graph_;  // node id: the graph CUDA said holds it
  std::unordered_set<uint64_t> made_;                  // node ids the runtime made for a site (end())
  std::unordered_set<uint32_t> graphs_;                // every graph and exec id CUDA named
  std::unordered_map<uint32_t, int> graph_site_;       // graphs a site owns whole
  std::unordered_map<uint32_t, TopKey> graph_top_;     // graphs made in a phase of a top-level graph
  std::unordered_multimap<uint32_t, uint32_t> graph_origin_;  // graph: a graph it was cloned from
  std::unordered_map<uint32_t, uint32_t> exec_graph_;         // exec id: the graph instantiated
  std::unordered_map<uint32_t, TopKey> exec_top_;             // exec id: its top-level graph
  std::vector<std::pair<uint64_t, uint64_t>> node_clones_;    // (original, clone) node ids
  std::vector<std::pair<uint64_t, uint32_t>> window_graphs_;  // (node made, graph made in its window)
  std::vector<std::pair<uint64_t, uint32_t>> child_graphs_;   // (child graph node, its graph): walked
  std::map<std::thread::id, std::vector<Frame>> current_;
  std::map<std::thread::id, std::vector<TopKey>> phases_;
  uint64_t layout_agree_ = 0, layout_disagree_ = 0;
  // Built on demand from the above.
  mutable bool indexed_ = false;
  mutable std::unordered_map<Key, int, KeyHash> by_graph_index_;  // (graph, index): site, -2 ambiguous
  mutable std::unordered_multimap<uint32_t, uint32_t> clone_graphs_;  // from node clones' ids
  mutable std::map<uint32_t, Numbering> numbering_;                 // top-level template graph: its exec's
  mutable std::unordered_map<uint32_t, TopKey> root_top_;           // top-level template graph: its top
  mutable std::unordered_set<uint32_t> nested_;                     // template graphs nested in a node
};

// How a record was found, for people: "node id"; "exec index 9, breadth-first order only
// (recursive: a2<<<...>>>  nested.orch:58:7)"; "exec index 4, both orders".
std::string found_text(const NodeIds::Found& f);

struct Attributed {
  NodeRecord record;
  int site = -1;        // -1: CUPTI named a node the runtime did not make as orch-run saw it
  Via via = Via::None;  // how the site was found
  std::string how;      // found_text(): with an exec index, which and in which order(s)
  std::string why;      // site -1: what more there is to say than "not made for any statement"
  uint32_t launch = 0;  // which profiled launch (0-based)
  uint32_t run = 1;     // the k-th run of its site in its launch, in start order (a loop's iteration)
};

struct Attribution {
  size_t launches = 0;
  std::vector<Attributed> records;  // records with a duration, by launch then start
  size_t without_duration = 0;      // records CUPTI gave no duration (an IF branch not taken)
  // Work outside any graph (graph node id 0): copies orch-run and the runtime make around the
  // launches, such as reading the device status record. Not the pipeline's nodes.
  std::vector<Attributed> outside;
};

// True when a record ran no graph node (CUPTI's graph node id 0: not run by a graph launch).
inline bool outside_graphs(const NodeRecord& r) { return r.node_id == 0; }

// launches[i] = the records of profiled launch i.
Attribution attribute(const std::vector<std::vector<NodeRecord>>& launches, const NodeIds& ids);

// One line per record, with how it was attributed (ORCH_RUN_CUPTI_DEBUG=1).
std::string describe_records(const std::vector<NodeRecord>& records, size_t launch, const NodeIds& ids,
                             const SiteTable& sites);

// One row of --nodes: a site over the profiled launches, or the records of one unknown node id.
struct NodeRow {
  int site = -1;
  NodeRecord::Kind kind = NodeRecord::Kind::Kernel;
  std::string symbol;       // kernel records: the symbol CUDA reported
  uint64_t bytes = 0;
  uint8_t copy_kind = 0;
  uint64_t node_id = 0;     // unattributed rows: CUPTI's node id
  uint32_t graph_id = 0;    // unattributed rows: CUPTI's graph id
  std::string why;          // unattributed rows: more than "not made for any statement"
  bool device_launched = false;
  Summary per_launch;       // ms: the site's runs in one launch, summed
  Summary per_run;          // ms: each run
  double runs_per_launch = 0;
  size_t max_runs = 0;      // the most runs in one launch
  double start_offset = 0;  // median start after the launch's first record, ms (the row order)
};

std::vector<NodeRow> node_rows(const Attribution& a);

// The table orch-run --nodes prints.
// `outside`: the records of work outside the pipeline's graphs (Attribution::outside), summed up
// in one line.
std::string format_node_table(const SiteTable& sites, const std::vector<NodeRow>& rows, const Summary& launch,
                              size_t profiled_launches, const std::vector<Attributed>& outside = {});

// True when the pipeline has device-launched graphs (whose launches CUPTI's tracing breaks).
bool uses_device_graphs(const orch::fb::Pipeline& pipeline);

// "193273528324 (graph 45, index 4)" for a node id whose high half is not 0, else the decimal.
std::string node_id_text(uint64_t id);

// "kernel mystery: CUDA graph node 77 was not made for any statement ...; not attributed".
std::string unattributed_text(NodeRecord::Kind kind, const std::string& symbol, uint64_t bytes, uint8_t copy_kind,
                              uint64_t node_id, const std::string& why);

// "memcpy 16.0 KiB HtoD", "kernel memset32", "memset 4 B".
std::string record_text(NodeRecord::Kind kind, const std::string& symbol, uint64_t bytes, uint8_t copy_kind);

}  // namespace orch::run

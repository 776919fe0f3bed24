// Exact attribution of GPU activity to the .orch statements that produced it. CUDA tells a
// profiler, for every kernel, copy and fill of a launched graph, the id of the graph node that ran
// it (CUPTI's graphNodeId). That node is a clone, made when the graph was instantiated, of a node
// the runtime made with an explicit call for one artifact node; the runtime says which
// (orch/observe.h), and CUPTI reports every node creation and clone (its resource callbacks, on
// the thread that makes the node). NodeIds joins the two: every CUPTI node id the runtime's
// graph building produced maps to its Site, and a record whose id is not there is reported as
// unattributed, never matched by kernel name or size.
//
// No CUDA or CUPTI in here: the records are plain values (filled from CUPTI's activity records
// by cupti.cpp, or by tests as CUPTI would), so all of it is tested without a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
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
};

// CUPTI graph node ids of the nodes made for each Site. Thread-safe; the "current site" is per
// thread (CUDA calls the resource callbacks on the thread that makes the node).
class NodeIds {
 public:
  // The runtime starts and ends making the CUDA node(s) of `site` on this thread (nested for
  // conditional bodies).
  void begin(int site);
  // `made` is CUPTI's id of the node the runtime added (0 when unknown).
  void end(int site, uint64_t made);
  // CUDA made node `id` on this thread (CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED): it belongs to the
  // site being made, if any (NCCL's captured kernels of a collective come this way).
  void created(uint64_t id);
  // CUDA cloned `original` into `clone` (instantiation, child graph nodes): the clone belongs
  // where the original does.
  void cloned(uint64_t original, uint64_t clone);
  // Node `id` belongs to `site` (found by walking what the runtime made, e.g. a child graph).
  void add(uint64_t id, int site);
  // The site of a node id, -1 for none.
  int site_of(uint64_t id) const;
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, int> site_;
  std::map<std::thread::id, std::vector<int>> current_;
};

struct Attributed {
  NodeRecord record;
  int site = -1;        // -1: CUPTI named a node the runtime did not make as orch-run saw it
  uint32_t launch = 0;  // which profiled launch (0-based)
  uint32_t run = 1;     // the k-th run of its site in its launch, in start order (a loop's iteration)
};

struct Attribution {
  size_t launches = 0;
  std::vector<Attributed> records;  // records with a duration, by launch then start
  size_t without_duration = 0;      // records CUPTI gave no duration (an IF branch not taken)
};

// launches[i] = the records of profiled launch i.
Attribution attribute(const std::vector<std::vector<NodeRecord>>& launches, const NodeIds& ids);

// One row of --nodes: a site over the profiled launches, or the records of one unknown node id.
struct NodeRow {
  int site = -1;
  NodeRecord::Kind kind = NodeRecord::Kind::Kernel;
  std::string symbol;       // kernel records: the symbol CUDA reported
  uint64_t bytes = 0;
  uint8_t copy_kind = 0;
  uint64_t node_id = 0;     // unattributed rows: CUPTI's node id
  bool device_launched = false;
  Summary per_launch;       // ms: the site's runs in one launch, summed
  Summary per_run;          // ms: each run
  double runs_per_launch = 0;
  size_t max_runs = 0;      // the most runs in one launch
  double start_offset = 0;  // median start after the launch's first record, ms (the row order)
};

std::vector<NodeRow> node_rows(const Attribution& a);

// The table orch-run --nodes prints.
std::string format_node_table(const SiteTable& sites, const std::vector<NodeRow>& rows, const Summary& launch,
                              size_t profiled_launches);

// True when the pipeline has device-launched graphs (whose launches CUPTI's tracing breaks).
bool uses_device_graphs(const orch::fb::Pipeline& pipeline);

// "memcpy 16.0 KiB HtoD", "kernel memset32", "memset 4 B".
std::string record_text(NodeRecord::Kind kind, const std::string& symbol, uint64_t bytes, uint8_t copy_kind);

}  // namespace orch::run

// Per-node times for orch-run --nodes. CUDA reports what each node of a launched graph did
// through CUPTI's activity records (kernels, copies and fills, each with its graph node id and
// start/end timestamps), so the graph runs exactly as it does without orch-run: nothing is
// replayed or split. libcupti is opened at run time (dlopen), so orch-run starts without it.
//
// The records name kernels by symbol and copies/fills by size and direction, not by .orch
// statement; each row is matched to the statements of the artifact that can have produced it
// (one, or "one of" several when a kernel is launched by more than one statement).
//
// What CUPTI reports, as measured on an H200 (driver 580, CUDA 13.0):
// - a node in the body of a WHILE conditional is reported once per launch, however many
//   iterations ran: its row is one iteration's time, and says so;
// - the nodes of an IF branch not taken are reported with no duration: they are left out;
// - a fill inside a conditional body runs as CUDA's own memset kernel (memset32, ...);
// - with activity tracing on, launches of pipelines that launch graphs from the device fail
//   (cudaErrorLaunchFailure), so --nodes refuses those pipelines (uses_device_graphs).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tools/orch_run/values.h"

namespace orch::run {

// One record: what ran for one graph node in one launch.
struct NodeRecord {
  enum class Kind { Kernel, Memcpy, Memset } kind = Kind::Kernel;
  std::string name;       // the kernel's symbol (empty for copies and fills)
  uint64_t bytes = 0;     // copies and fills
  uint8_t copy_kind = 0;  // copies: CUPTI's CUpti_ActivityMemcpyKind (1 HtoD, 2 DtoH, 8 DtoD, 9 HtoH)
  uint32_t graph_id = 0;  // CUDA's ids: a node of a conditional body or a device graph has its own
  uint64_t node_id = 0;
  uint64_t start_ns = 0, end_ns = 0;
  bool device_launched = false;
};

class NodeProfiler {
 public:
  // Opens libcupti and enables the kernel, memcpy and memset activity records. nullptr (and
  // *error) when CUPTI cannot be loaded or refuses.
  static std::unique_ptr<NodeProfiler> create(std::string* error);
  ~NodeProfiler();
  // Flushes CUPTI's buffers (call after the stream is synchronized) and returns the records
  // delivered since the last call. *error is set (and the result empty) when CUPTI failed.
  std::vector<NodeRecord> take(std::string* error);

  struct Api;

 private:
  explicit NodeProfiler(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

// One row of the table: a graph node, over the profiled launches.
struct NodeRow {
  NodeRecord::Kind kind = NodeRecord::Kind::Kernel;
  std::string name;
  uint64_t bytes = 0;
  uint8_t copy_kind = 0;
  bool device_launched = false;
  Summary per_launch;          // GPU time of the node per launch (summed over its runs), ms
  double runs_per_launch = 0;  // > 1 inside a loop
  double start_offset = 0;     // median start after the launch's first node, ms (for ordering)
};

// Groups the records of each launch (launches[i] = the records of launch i) by graph node,
// leaving out records with no duration. Rows come in order of their median start in a launch.
std::vector<NodeRow> aggregate_nodes(const std::vector<std::vector<NodeRecord>>& launches);

struct Statement {
  std::string text;  // "what  file:line:col"
  bool in_while = false;  // inside the body of a while loop
  bool operator==(const Statement& o) const { return text == o.text && in_while == o.in_while; }
  bool operator<(const Statement& o) const { return text < o.text; }
};
// The .orch statements that can have produced a row. A kernel: the statements that launch it.
// A memcpy: the copies whose source buffer has `bytes` bytes (as told by buffer_bytes(name))
// in the record's direction. A memset: the top-level fills of `bytes` bytes. CUDA's memset
// kernels (memset8/16/32): the fills of that element size inside conditional bodies.
std::vector<Statement> statements_for(const orch::fb::Pipeline& pipeline, const NodeRow& row,
                                      const std::function<size_t(const std::string&)>& buffer_bytes);

// True when the pipeline has device-launched graphs (which CUPTI's tracing breaks).
bool uses_device_graphs(const orch::fb::Pipeline& pipeline);

// The table orch-run prints.
std::string format_node_table(const orch::fb::Pipeline& pipeline, const std::vector<NodeRow>& rows,
                              const std::function<size_t(const std::string&)>& buffer_bytes,
                              const Summary& launch, size_t profiled_launches);

}  // namespace orch::run

// orch-run's use of CUPTI (libcupti, opened at run time with dlopen, so orch-run starts without
// it): the graph node ids of what the runtime builds (resource callbacks, through the runtime's
// observation hook, orch/observe.h), the activity records of profiled launches, timestamps for
// the host-side phases, and the entry points the range profiler (metrics.cpp) needs.
//
// What CUPTI reports, as measured on an H200 and an H100 (driver 580, CUDA 13.0):
// - a node in the body of a conditional runs with a node id no clone callback names (see
//   NodeIds::find for how it is found); a node of a WHILE body was reported once per launch on
//   the H200 and once per iteration on the H100 (driver 580.159; pytorch/kineto#1062 reports
//   once per launch);
// - the nodes of an IF branch not taken are reported with no duration;
// - a fill may run as CUDA's own memset kernel (memset32, ...), reported as a kernel record
//   with the fill's graph node id;
// - with activity tracing on, launches of pipelines that launch graphs from the device fail
//   (cudaErrorLaunchFailure), so orch-run does not trace those pipelines' launches.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "orch/observe.h"
#include "tools/orch_run/attribution.h"
#include "tools/orch_run/sites.h"

namespace orch::run {

// A host-side phase for the trace: CUPTI's clock (the activity records' clock) when CUPTI is
// loaded, in ns.
struct HostSlice {
  std::string name;      // "instantiate main", "launch 3"
  std::string category;  // "load", "build", "instantiate", "upload", "launch", "fill", ...
  uint64_t start_ns = 0, end_ns = 0;
  bool ok = true;
};

class Cupti {
 public:
  struct Api;  // the entry points, looked up in the libcupti that was opened

  // Opens libcupti. Nothing is enabled yet. nullptr (and *error) when it cannot be loaded or
  // is of another CUDA major version than orch-run's headers.
  static std::unique_ptr<Cupti> open(std::string* error);
  ~Cupti();
  Cupti(const Cupti&) = delete;
  Cupti& operator=(const Cupti&) = delete;

  // Becomes the runtime's observer (orch::set_observer) for host phases, and with
  // `node_ids`, subscribes to CUDA's graph and graph node creation and cloning so that the
  // records of later launches can be attributed to `sites`. Call before the pipeline is
  // instantiated. With `debug` (ORCH_RUN_CUPTI_DEBUG=1), every resource callback is printed
  // there as it comes.
  bool observe(const SiteTable& sites, bool node_ids, std::string* error, std::ostream* debug = nullptr);
  const NodeIds& ids() const;
  // ORCH_RUN_CUPTI_DEBUG: where to print (null: off); prints lines to it, one at a time.
  std::ostream* debug() const { return debug_; }
  void debug_line(const std::string& line) const;
  // ORCH_RUN_CUPTI_DEBUG: the template graphs made outside any statement's window (the
  // top-level graphs), as cudaGraphDebugDotPrint writes them, and what the ids said.
  void debug_graphs() const;

  // CUPTI's timestamp now (ns; the activity records' clock).
  uint64_t now_ns() const;
  // Host phases heard from the runtime and added by orch-run, in order of their start.
  void add_host_slice(HostSlice s);
  std::vector<HostSlice> host_slices() const;
  // Launch phases are recorded only while this is on (off during the timed launches, whose
  // host path should not carry even a timestamp per segment).
  void record_launches(bool on);

  // Kernel, memcpy and memset activity records.
  bool enable_activity(std::string* error);
  void disable_activity();
  // Flushes CUPTI's buffers (after the stream is synchronized) and returns the records delivered
  // since the last call; *error is set when CUPTI failed or dropped records.
  std::vector<NodeRecord> take(std::string* error);

  const Api& api() const { return *api_; }
  std::string result_text(int cupti_result) const;

 private:
  explicit Cupti(std::unique_ptr<Api> api);
  class Observer;
  std::unique_ptr<Api> api_;
  std::unique_ptr<Observer> observer_;
  std::ostream* debug_ = nullptr;
};

}  // namespace orch::run

// orch-run --trace: a Chrome trace (JSON object format; opens in ui.perfetto.dev and
// chrome://tracing) of a pipeline run: the host-side phases (load, build, instantiate, upload,
// fills, the timed launches, each profiled launch) on one process, and on another the GPU work of
// the profiled launches, every kernel, copy and fill named by its .orch statement (attribution.h),
// one track per graph level (a top-level graph, a conditional body, a device graph; concurrent
// nodes of one level get lanes of their own), conditionals as spans with their iterations inside.
// No CUDA here: the trace is made from plain values, so it is tested without a GPU.
#pragma once

#include <string>
#include <vector>

#include "tools/orch_run/attribution.h"
#include "tools/orch_run/cupti.h"
#include "tools/orch_run/sites.h"

namespace orch::run {

struct TraceInput {
  const SiteTable* sites = nullptr;
  std::string pipeline;             // the pipeline's name
  std::string device;               // "NVIDIA H200 (device 0)"
  int rank = 0, world_size = 1;     // a pipeline with collectives writes one file per rank
  const Attribution* gpu = nullptr;  // the profiled launches; null when none were traced
  std::vector<HostSlice> host;
  std::vector<std::string> notes;   // what the trace cannot show, and why (instant events)
};

// The JSON text. Times are microseconds from the earliest event (CUPTI's clock for both sides).
std::string trace_json(const TraceInput& in);

}  // namespace orch::run

// Measured bytes and FLOPs per kernel, for --roofline: CUPTI's range profiler (cupti_range_
// profiler.h, CUDA 13) in auto range mode, one range per kernel in the order the kernels ran,
// with kernel replay (CUPTI runs each kernel as often as the metrics need, restoring memory in
// between). Which graph node each range belongs to is told by the activity records of the same
// launch, in start order; where their counts disagree nothing is matched (roofline.cpp falls back
// to the costs declared in the language).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tools/orch_run/cupti.h"

namespace orch::run {

// The metrics asked for, in this order.
const std::vector<std::string>& roofline_metrics();

struct KernelCounters {
  double dram_bytes = 0;        // dram__bytes_read.sum + dram__bytes_write.sum
  double flops[3] = {0, 0, 0};  // f16, f32, f64: add + mul + 2 * fma thread instructions
  double duration_ns = 0;       // gpu__time_duration.sum (under the profiler)
};
// The counters from metric values given in roofline_metrics() order.
KernelCounters counters_from(const std::vector<double>& values);

class RangeProfiler {
 public:
  // Sets up the profiler on the current context of CUDA device `device` for at most
  // `max_ranges` kernels per launch. nullptr (and *error) where CUPTI cannot profile.
  static std::unique_ptr<RangeProfiler> open(Cupti& cupti, int device, size_t max_ranges, std::string* error);
  ~RangeProfiler();
  // Runs `launch` (which launches the pipeline once and waits for it) under the profiler and
  // returns each kernel's counters in the order the kernels ran.
  bool profile(const std::function<bool(std::string*)>& launch, std::vector<KernelCounters>* ranges,
               std::string* error);

  struct State;

 private:
  explicit RangeProfiler(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace orch::run

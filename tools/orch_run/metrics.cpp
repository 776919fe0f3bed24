#include "tools/orch_run/metrics.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "tools/orch_run/cupti_api.h"

namespace orch::run {

namespace {
// CUPTI's parameter structs: zeroed, with the size CUPTI checks the layout by.
template <class T>
T sized(size_t size) {
  T p{};
  p.structSize = size;
  return p;
}
}  // namespace

const std::vector<std::string>& roofline_metrics() {
  static const std::vector<std::string> m = {
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
      "sm__sass_thread_inst_executed_op_hadd_pred_on.sum",
      "sm__sass_thread_inst_executed_op_hmul_pred_on.sum",
      "sm__sass_thread_inst_executed_op_hfma_pred_on.sum",
      "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
      "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
      "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
      "sm__sass_thread_inst_executed_op_dadd_pred_on.sum",
      "sm__sass_thread_inst_executed_op_dmul_pred_on.sum",
      "sm__sass_thread_inst_executed_op_dfma_pred_on.sum",
      "gpu__time_duration.sum",
  };
  return m;
}

KernelCounters counters_from(const std::vector<double>& v) {
  KernelCounters c;
  if (v.size() != roofline_metrics().size()) return c;
  c.dram_bytes = v[0] + v[1];
  for (int p = 0; p < 3; ++p) c.flops[p] = v[2 + 3 * p] + v[3 + 3 * p] + 2 * v[4 + 3 * p];
  c.duration_ns = v[11];
  return c;
}

struct RangeProfiler::State {
  const Cupti* cupti = nullptr;
  const Cupti::Api* api = nullptr;
  bool profiler_initialized = false;
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_RangeProfiler_Object* range = nullptr;
  std::vector<const char*> metric_names;
  std::vector<uint8_t> availability, config, counter_data;
  size_t max_ranges = 0;

  std::string fail(const std::string& call, CUptiResult r) const {
    return call + ": " + cupti->result_text(r) +
           (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
                ? " (the driver restricts GPU performance counters to admin users: NVreg_RestrictProfilingToAdminUsers)"
                : "");
  }

  ~State() {
    if (range) {
      auto p = sized<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
      p.pRangeProfilerObject = range;
      (void)api->range_disable(&p);
    }
    if (host) {
      auto p = sized<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
      p.pHostObject = host;
      (void)api->host_deinitialize(&p);
    }
    if (profiler_initialized && api->profiler_deinitialize) {
      auto p = sized<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
      (void)api->profiler_deinitialize(&p);
    }
  }
};

RangeProfiler::RangeProfiler(std::unique_ptr<State> s) : s_(std::move(s)) {}
RangeProfiler::~RangeProfiler() = default;

std::unique_ptr<RangeProfiler> RangeProfiler::open(Cupti& cupti, int device, size_t max_ranges, std::string* error) {
  const Cupti::Api& api = cupti.api();
  if (!api.profiler_initialize || !api.chip_name || !api.counter_availability || !api.host_initialize ||
      !api.host_deinitialize || !api.host_add_metrics || !api.host_config_size || !api.host_config_image ||
      !api.host_evaluate || !api.range_enable || !api.range_disable || !api.range_counter_data_size ||
      !api.range_counter_data_init || !api.range_set_config || !api.range_start || !api.range_stop ||
      !api.range_decode || !api.range_counter_data_info) {
    *error = "the libcupti that was loaded has no range profiler (CUDA 12.6 or newer has it)";
    return nullptr;
  }
  auto s = std::make_unique<State>();
  s->cupti = &cupti;
  s->api = &api;
  s->max_ranges = max_ranges == 0 ? 1 : max_ranges;
  for (const std::string& m : roofline_metrics()) s->metric_names.push_back(m.c_str());

  // The context CUDA made for the device (orch-run links no driver library: the runtime finds it).
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t ce = cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found);
  if (ce != cudaSuccess || found != cudaDriverEntryPointSuccess || !fn) {
    (void)cudaGetLastError();
    *error = "cannot find the CUDA driver's cuCtxGetCurrent";
    return nullptr;
  }
  CUcontext ctx = nullptr;
  if (reinterpret_cast<CUresult (*)(CUcontext*)>(fn)(&ctx) != CUDA_SUCCESS || !ctx) {
    *error = "no current CUDA context to profile";
    return nullptr;
  }

  CUptiResult r;
  {
    auto p = sized<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    if ((r = api.profiler_initialize(&p)) != CUPTI_SUCCESS) {
      *error = s->fail("cuptiProfilerInitialize", r);
      return nullptr;
    }
    s->profiler_initialized = true;
  }
  std::string chip;
  {
    auto p = sized<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
    p.deviceIndex = static_cast<size_t>(device);
    if ((r = api.chip_name(&p)) != CUPTI_SUCCESS || !p.pChipName) {
      *error = s->fail("cuptiDeviceGetChipName", r);
      return nullptr;
    }
    chip = p.pChipName;
  }
  {
    auto p = sized<CUpti_Profiler_GetCounterAvailability_Params>(CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
    p.ctx = ctx;
    if ((r = api.counter_availability(&p)) != CUPTI_SUCCESS) {
      *error = s->fail("cuptiProfilerGetCounterAvailability", r);
      return nullptr;
    }
    s->availability.assign(p.counterAvailabilityImageSize, 0);
    p.pCounterAvailabilityImage = s->availability.data();
    if ((r = api.counter_availability(&p)) != CUPTI_SUCCESS) {
      *error = s->fail("cuptiProfilerGetCounterAvailability", r);
      return nullptr;
    }
  }
  {
    auto p = sized<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    p.pChipName = chip.c_str();
    p.pCounterAvailabilityImage = s->availability.data();
    if ((r = api.host_initialize(&p)) != CUPTI_SUCCESS) {
      *error = s->fail("cuptiProfilerHostInitialize (chip " + chip + ")", r);
      return nullptr;
    }
    s->host = p.pHostObject;
  }
  {
    auto p = sized<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    p.pHostObject = s->host;
    p.ppMetricNames = s->metric_names.data();
    p.numMetrics = s->metric_names.size();
    if ((r = api.host_add_metrics(&p)) != CUPTI_SUCCESS) {
      *error = s->fail("cuptiProfilerHostConfigAddMetrics", r);
      return nullptr;
    }
    auto sp = sized<CUpti_Profiler_Host_GetConfigImageSize_Params>(CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    sp.pHostObject = s->host;
    if ((r = api.host_config_size(&sp)) != CUPTI_SUCCESS) {
      *error = s->fail("cuptiProfilerHostGetConfigImageSize", r);
      return nullptr;
    }
    s->config.assign(sp.configImageSize, 0);
    auto ip = sized<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
    ip.pHostObject = s->host;
    ip.configImageSize = s->config.size();
    ip.pConfigImage = s->config.data();
    if ((r = api.host_config_image(&ip)) != CUPTI_SUCCESS) {
      *error = s->fail("cuptiProfilerHostGetConfigImage", r);
      return nullptr;
    }
  }
  {
    auto p = sized<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    p.ctx = ctx;
    if ((r = api.range_enable(&p)) != CUPTI_SUCCESS || !p.pRangeProfilerObject) {
      *error = s->fail("cuptiRangeProfilerEnable", r);
      return nullptr;
    }
    s->range = p.pRangeProfilerObject;
  }
  {
    auto p = sized<CUpti_RangeProfiler_GetCounterDataSize_Params>(CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = s->range;
    p.pMetricNames = s->metric_names.data();
    p.numMetrics = s->metric_names.size();
    p.maxNumOfRanges = s->max_ranges;
    p.maxNumRangeTreeNodes = static_cast<uint32_t>(s->max_ranges);
    if ((r = api.range_counter_data_size(&p)) != CUPTI_SUCCESS) {
      *error = s->fail("cuptiRangeProfilerGetCounterDataSize", r);
      return nullptr;
    }
    s->counter_data.assign(p.counterDataSize, 0);
    auto ip = sized<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    ip.pRangeProfilerObject = s->range;
    ip.counterDataSize = s->counter_data.size();
    ip.pCounterData = s->counter_data.data();
    if ((r = api.range_counter_data_init(&ip)) != CUPTI_SUCCESS) {
      *error = s->fail("cuptiRangeProfilerCounterDataImageInitialize", r);
      return nullptr;
    }
  }
  {
    auto p = sized<CUpti_RangeProfiler_SetConfig_Params>(CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = s->range;
    p.configSize = s->config.size();
    p.pConfig = s->config.data();
    p.counterDataImageSize = s->counter_data.size();
    p.pCounterDataImage = s->counter_data.data();
    p.range = CUPTI_AutoRange;
    p.replayMode = CUPTI_KernelReplay;
    p.maxRangesPerPass = s->max_ranges;
    p.numNestingLevels = 1;
    p.minNestingLevel = 1;
    p.passIndex = 0;
    p.targetNestingLevel = 1;
    if ((r = api.range_set_config(&p)) != CUPTI_SUCCESS) {
      *error = s->fail("cuptiRangeProfilerSetConfig", r);
      return nullptr;
    }
  }
  return std::unique_ptr<RangeProfiler>(new RangeProfiler(std::move(s)));
}

bool RangeProfiler::profile(const std::function<bool(std::string*)>& launch, std::vector<KernelCounters>* ranges,
                            std::string* error) {
  const Cupti::Api& api = *s_->api;
  CUptiResult r;
  {
    auto p = sized<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = s_->range;
    if ((r = api.range_start(&p)) != CUPTI_SUCCESS) {
      *error = s_->fail("cuptiRangeProfilerStart", r);
      return false;
    }
  }
  std::string launch_error;
  const bool launched = launch(&launch_error);
  auto stop = sized<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
  stop.pRangeProfilerObject = s_->range;
  r = api.range_stop(&stop);
  if (!launched) {
    *error = launch_error;
    return false;
  }
  if (r != CUPTI_SUCCESS) {
    *error = s_->fail("cuptiRangeProfilerStop", r);
    return false;
  }
  if (!stop.isAllPassSubmitted) {
    *error = "the range profiler needs more passes than kernel replay gave it in one launch";
    return false;
  }
  {
    auto p = sized<CUpti_RangeProfiler_DecodeData_Params>(CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = s_->range;
    if ((r = api.range_decode(&p)) != CUPTI_SUCCESS) {
      *error = s_->fail("cuptiRangeProfilerDecodeData", r);
      return false;
    }
    if (p.numOfRangeDropped > 0) {
      *error = "the range profiler dropped " + std::to_string(p.numOfRangeDropped) + " of its ranges (more than " +
               std::to_string(s_->max_ranges) + " kernels in one launch)";
      return false;
    }
  }
  auto info = sized<CUpti_RangeProfiler_GetCounterDataInfo_Params>(CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = s_->counter_data.data();
  info.counterDataImageSize = s_->counter_data.size();
  if ((r = api.range_counter_data_info(&info)) != CUPTI_SUCCESS) {
    *error = s_->fail("cuptiRangeProfilerGetCounterDataInfo", r);
    return false;
  }
  ranges->clear();
  std::vector<double> values(s_->metric_names.size());
  for (size_t i = 0; i < info.numTotalRanges; ++i) {
    auto p = sized<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    p.pHostObject = s_->host;
    p.pCounterDataImage = s_->counter_data.data();
    p.counterDataImageSize = s_->counter_data.size();
    p.rangeIndex = i;
    p.ppMetricNames = s_->metric_names.data();
    p.numMetrics = s_->metric_names.size();
    p.pMetricValues = values.data();
    if ((r = api.host_evaluate(&p)) != CUPTI_SUCCESS) {
      *error = s_->fail("cuptiProfilerHostEvaluateToGpuValues", r);
      return false;
    }
    ranges->push_back(counters_from(values));
  }
  return true;
}

}  // namespace orch::run

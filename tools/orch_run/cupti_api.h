// The CUPTI entry points orch-run uses, looked up with dlsym in the libcupti it opened (internal
// to cupti.cpp and metrics.cpp). The record and parameter layouts are those of the CUPTI headers
// orch-run was built with; they hold within one CUDA major version, which open() checks.
#pragma once

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <vector>

#include "tools/orch_run/cupti.h"

namespace orch::run {

struct Cupti::Api {
  void* handle = nullptr;
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiGetTimestamp) get_timestamp = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiGetGraphNodeId) graph_node_id = nullptr;
  decltype(&cuptiGetGraphId) graph_id = nullptr;            // null where this libcupti lacks it
  decltype(&cuptiGetGraphExecId) graph_exec_id = nullptr;   // likewise
  // The range profiler (metrics.cpp); null where this libcupti lacks it.
  decltype(&cuptiProfilerInitialize) profiler_initialize = nullptr;
  decltype(&cuptiProfilerDeInitialize) profiler_deinitialize = nullptr;
  decltype(&cuptiDeviceGetChipName) chip_name = nullptr;
  decltype(&cuptiProfilerGetCounterAvailability) counter_availability = nullptr;
  decltype(&cuptiProfilerHostInitialize) host_initialize = nullptr;
  decltype(&cuptiProfilerHostDeinitialize) host_deinitialize = nullptr;
  decltype(&cuptiProfilerHostConfigAddMetrics) host_add_metrics = nullptr;
  decltype(&cuptiProfilerHostGetConfigImageSize) host_config_size = nullptr;
  decltype(&cuptiProfilerHostGetConfigImage) host_config_image = nullptr;
  decltype(&cuptiProfilerHostEvaluateToGpuValues) host_evaluate = nullptr;
  decltype(&cuptiRangeProfilerEnable) range_enable = nullptr;
  decltype(&cuptiRangeProfilerDisable) range_disable = nullptr;
  decltype(&cuptiRangeProfilerGetCounterDataSize) range_counter_data_size = nullptr;
  decltype(&cuptiRangeProfilerCounterDataImageInitialize) range_counter_data_init = nullptr;
  decltype(&cuptiRangeProfilerSetConfig) range_set_config = nullptr;
  decltype(&cuptiRangeProfilerStart) range_start = nullptr;
  decltype(&cuptiRangeProfilerStop) range_stop = nullptr;
  decltype(&cuptiRangeProfilerDecodeData) range_decode = nullptr;
  decltype(&cuptiRangeProfilerGetCounterDataInfo) range_counter_data_info = nullptr;

  std::vector<CUpti_ActivityKind> enabled;
  CUpti_SubscriberHandle subscriber = nullptr;
};

}  // namespace orch::run

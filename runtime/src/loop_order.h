// Launches of pipelines that hold `while` loops run one after another on each device, whatever
// streams and threads they come from.
//
// Why: two WHILE conditional nodes whose bodies run again at the same time fault the GPU
// (cudaErrorLaunchFailure; thousands of launches in a row crash cuGraphLaunch on the host), on an
// H200 with driver 580.159.04, CUDA 13.0, 2026-11-28, also when they sit in two executable graphs
// launched on two streams (lowering/one_loop_at_a_time.cpp keeps the loops of one pipeline in
// order). So every such launch waits, on the GPU, for the end of the one before it on its device;
// the host never waits.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

#include "orch/runtime.h"

namespace orch::rt {

// Makes `stream` wait for the end of the last launch made through here on the stream's device,
// calls `launch` (which enqueues the work on `stream`), then records its end for the next one.
// Holds a process-wide lock meanwhile, so that launches from several threads are ordered too.
Status launch_after_other_loops(cudaStream_t stream, const std::function<Status()>& launch);

}  // namespace orch::rt

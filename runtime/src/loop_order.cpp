#include "runtime/src/loop_order.h"

#include <map>
#include <mutex>

#include "runtime/src/internal.h"

namespace orch::rt {

namespace {

struct LastLaunch {
  cudaEvent_t end = nullptr;  // never destroyed: it lives as long as the process's contexts
  bool recorded = false;
};

std::mutex& lock() {
  static std::mutex m;
  return m;
}

std::map<int, LastLaunch>& last_launches() {
  static std::map<int, LastLaunch> m;  // by device ordinal
  return m;
}

}  // namespace

Status launch_after_other_loops(cudaStream_t stream, const std::function<Status()>& launch) {
  std::lock_guard<std::mutex> hold(lock());
  // The stream's device, which need not be the current one (a process may drive several GPUs).
  int device = 0;
  cudaError_t e = cudaStreamGetDevice(stream, &device);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rt::cuda_error(e, "launch: cannot read the launch stream's device");
  }
  LastLaunch& last = last_launches()[device];
  // An event belongs to the device current when it is made: that one, for the while.
  auto make_event = [&]() -> cudaError_t {
    int current = 0;
    cudaError_t r = cudaGetDevice(&current);
    if (r == cudaSuccess && current != device) r = cudaSetDevice(device);
    if (r == cudaSuccess) r = cudaEventCreateWithFlags(&last.end, cudaEventDisableTiming);
    if (current != device) (void)cudaSetDevice(current);
    if (r != cudaSuccess) {
      (void)cudaGetLastError();
      last.end = nullptr;
    }
    return r;
  };
  if (!last.end) {
    e = make_event();
    if (e != cudaSuccess)
      return rt::cuda_error(e, "launch: cannot create the event that orders launches with while loops");
  }
  if (last.recorded) {
    e = cudaStreamWaitEvent(stream, last.end, 0);
    if (e == cudaErrorInvalidResourceHandle) {
      // The device was reset since: the event went with its context, and so did the launch it
      // marked. A new event, and nothing to wait for.
      (void)cudaGetLastError();
      last = LastLaunch{};
      e = make_event();
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, "launch: cannot wait for the last launch with while loops on this device");
    }
  }
  Status s = launch();
  if (!s.ok()) return s;
  e = cudaEventRecord(last.end, stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rt::cuda_error(e, "launch: cannot record the end of a launch with while loops");
  }
  last.recorded = true;
  return {};
}

}  // namespace orch::rt

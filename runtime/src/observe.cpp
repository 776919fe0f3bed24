#include "orch/observe.h"

#include <atomic>

namespace orch {

namespace {
std::atomic<Observer*> g_observer{nullptr};
}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Build: return "build";
    case Phase::Instantiate: return "instantiate";
    case Phase::Upload: return "upload";
    case Phase::Launch: return "launch";
  }
  return "?";
}

Observer* set_observer(Observer* o) { return g_observer.exchange(o, std::memory_order_acq_rel); }

Observer* observer() { return g_observer.load(std::memory_order_acquire); }

}  // namespace orch

// validate()'s rules for Pipeline.device_order and for the late GraphExec arguments it decides.
#include <string>

#include "artifact/validate_internal.h"

namespace orch::artifact::detail {

// Pipeline.device_order: exactly the device graphs, each once (the runtime instantiates them
// in it); device_pos_ is each graph's place in it, for the late arguments' rule (check_arg).
bool Validator::check_device_order() {
  const auto* order = p_.device_order();
  const uint32_t n = size_of(order);
  if (!charge(4 * uint64_t{n})) return false;
  device_pos_.assign(n_graphs_, -1);
  for (uint32_t i = 0; i < n; ++i) {
    const int g = order->Get(i);
    const std::string label = "device_order[" + std::to_string(i) + "]";
    std::string problem = range_problem("graph index", g, n_graphs_, "graph");
    if (!problem.empty()) return fail(label + ": " + problem);
    if (!graphs_->Get(g)->device())
      return fail(label + ": " + graph_label(g) + " is not a device graph; only device graphs are ordered");
    if (device_pos_[g] >= 0)
      return fail(label + ": " + graph_label(g) + " is listed twice (also at device_order[" +
                  std::to_string(device_pos_[g]) + "])");
    device_pos_[g] = static_cast<int>(i);
  }
  for (uint32_t g = 0; g < n_graphs_; ++g)
    if (graphs_->Get(g)->device() && device_pos_[g] < 0)
      return fail(graph_label(g) + " is a device graph missing from device_order");
  return true;
}

// Whether a GraphExec argument of `ref` in the top-level graph being walked must be late: in a
// device graph, the graph it names is not instantiated before this one (itself, or later).
bool Validator::must_be_late(int ref) const {
  if (!top_device_) return false;  // host graphs are built after every device graph
  return ref == -1 || ref == static_cast<int>(top_) || device_pos_[ref] > device_pos_[top_];
}

// A GraphExec argument is late exactly where its graph is not instantiated before the one
// being walked (Pipeline.device_order): the runtime builds the node with a null exec there and
// sets the exec after instantiation, and only there.
bool Validator::check_late(const fb::KernelArg* arg, int ref) {
  const bool late = must_be_late(ref);
  if (arg->late() == late) return true;
  const bool self = ref == -1 || ref == static_cast<int>(top_);
  const std::string target = self ? "the graph itself" : graph_label(ref);
  if (late) {
    return fail_here("the exec of " + target +
                     (self ? " exists only once it is instantiated"
                           : " is not instantiated before " + graph_label(top_) + " (device_order)") +
                     ", so the argument must be marked late");
  }
  return fail_here("the argument is marked late, but " +
                   (top_device_ ? "the exec of " + target + " is instantiated before " + graph_label(top_) +
                                      " (device_order)"
                                : graph_label(top_) + " is a host graph, built after every device graph"));
}

}  // namespace orch::artifact::detail

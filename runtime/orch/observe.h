// Observation hook: what a tool (orch-run --nodes, --trace, --roofline) needs to learn from the
// runtime to name every piece of GPU work by the .orch statement that produced it. The runtime
// builds its CUDA graphs with explicit node calls; around the calls that make the CUDA node(s) of
// one artifact node it tells the observer which node that is, on the thread that makes them. A
// profiler that hears about graph node creation on that thread (CUPTI's resource callbacks)
// therefore knows exactly which artifact node each CUDA node belongs to, including the nodes NCCL
// records by stream capture for a collective and the clones CUDA makes at instantiation.
//
// The runtime links no profiler: this is an interface the tool implements. With no observer set
// (the default) the cost is one atomic load per node built and per phase.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace orch {

// Where an artifact node sits in pipeline.bin: `graph` is the index into Pipeline.graphs of the
// top-level graph being built, `member` the family member (-1 for a graph that is not a family),
// and `path` the node indices from the top: {3} is node 3 of the top-level graph, {3, 1, 0} is
// node 0 of body 1 of conditional node 3, and so on (node, body, node, body, ..., node).
struct NodeSite {
  int graph = -1;
  int member = -1;
  const std::vector<uint32_t>* path = nullptr;
};

// Host-side phases of an Executable's life, per top-level graph (`graph` is its index).
enum class Phase : uint8_t {
  Build,        // the template graph's nodes are made (NCCL captures included)
  Instantiate,  // cudaGraphInstantiateWithParams
  Upload,       // cudaGraphUpload (waited for at the end of instantiate)
  Launch,       // cudaGraphLaunch of one segment (asynchronous: the GPU work comes later)
};
const char* phase_name(Phase p);  // "build", "instantiate", "upload", "launch"

class Observer {
 public:
  virtual ~Observer() = default;
  // The runtime is about to make the CUDA node of `site` (for a conditional node, its body
  // nodes follow, each with its own begin/end, nested inside this one). Every CUDA graph node
  // created on this thread until node_end belongs to `site`.
  virtual void node_begin(const NodeSite& site) { (void)site; }
  // `made` is the node added to the template graph (nullptr when the call failed).
  virtual void node_end(const NodeSite& site, cudaGraphNode_t made) {
    (void)site;
    (void)made;
  }
  // A phase starts and ends on the calling thread; `member` as in NodeSite. What CUDA makes on
  // this thread meanwhile (the executable graph and the graphs instantiation clones, which hold
  // the nodes of conditional bodies) belongs to this top-level graph.
  virtual void phase_begin(Phase phase, int graph, int member) {
    (void)phase;
    (void)graph;
    (void)member;
  }
  virtual void phase_end(Phase phase, int graph, int member, bool ok) {
    (void)phase;
    (void)graph;
    (void)member;
    (void)ok;
  }
};

// Sets the process-wide observer (nullptr: none). The observer must stay alive until it is
// replaced and no runtime call that may reach it is still running; set it before instantiate()
// to hear about the nodes built there. Returns the previous one.
Observer* set_observer(Observer* observer);
Observer* observer();

}  // namespace orch

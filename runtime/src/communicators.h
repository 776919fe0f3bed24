// The NCCL communicators of one Executable (one per Pipeline.comms): opened from the bindings
// (the application's, checked, or ones orch makes with ncclCommInitRank and destroys), the
// ranks' agreement at instantiate, and issuing one collective for capture. NCCL is loaded at
// run time (runtime/src/nccl.h); nothing else in the runtime calls it.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/pipeline_generated.h"
#include "orch/runtime.h"
#include "runtime/src/nccl.h"

namespace orch::rt {

// One NCCL call as evaluated; a change means a new capture.
struct CollectiveCall {
  fb::CollectiveKind kind = fb::CollectiveKind::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // NCCL's count: elements per rank (allgather: sent; reduce_scatter: received)
  nccl::DataType type = nccl::kFloat32;
  nccl::RedOp op = nccl::kSum;
  int root = 0;
  void* comm = nullptr;
  bool operator==(const CollectiveCall& o) const {
    return kind == o.kind && send == o.send && recv == o.recv && count == o.count && type == o.type && op == o.op &&
           root == o.root && comm == o.comm;
  }
};

// "ncclAllReduce", for messages.
const char* nccl_function(fb::CollectiveKind k);
// NCCL's data type for an element type; false where NCCL has none (u16, i16, bool).
bool nccl_type(fb::ScalarType t, nccl::DataType* out);
nccl::RedOp nccl_op(fb::ReduceOp op);

// The Pipeline.comms index of `name`, or -1.
int comm_index(const fb::Pipeline& p, std::string_view name);

class Communicators {
 public:
  Communicators() = default;
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;

  // Loads NCCL where a communicator is bound or asked for, makes the ones asked for
  // (ncclCommInitRank), and checks the application's against their bindings (and against
  // `device`, the pipeline's); rank and world size read from a communicator go into `b`.
  // Errors that leave a usable communicator (a rank that differs from the binding) are
  // returned with the communicator kept, so that instantiate() still tells the other ranks,
  // which would otherwise wait for this one.
  Status open(const fb::Pipeline& p, Bindings& b, const std::vector<artifact::NodeRef>& collectives, int device,
              const std::string& pipeline_name);

  // Every rank tells every other rank its pipeline's collective hash and whether it got this
  // far (`mine`), through an allgather on each communicator. Returns `mine` if it failed,
  // else a RankMismatch naming the first rank that runs another pipeline or failed, or whose
  // symmetric buffers have other sizes (`symmetric_hash`, rt::symmetric_sizes_hash; 0 where the
  // pipeline has none).
  Status agree(const fb::Pipeline& p, const std::string& pipeline_name, const Status& mine, cudaStream_t stream,
               uint64_t symmetric_hash = 0);
  // The first communicator in use (its Pipeline.comms index), or -1.
  int first_open() const;
  int rank(size_t i) const { return i < comms_.size() ? comms_[i].rank : 0; }
  // Rank 0's `bytes` become every rank's: an ncclBroadcast on communicator `i`, waited for as
  // agree() waits (ORCH_NCCL_TIMEOUT). `what` names it in errors.
  Status broadcast(size_t i, void* bytes, size_t n, cudaStream_t stream, const std::string& what);

  bool any() const;  // some communicator is in use
  size_t size() const { return comms_.size(); }
  void* handle(size_t i) const { return i < comms_.size() ? comms_[i].handle : nullptr; }
  int world_size(size_t i) const { return i < comms_.size() ? comms_[i].world_size : 1; }
  // Comm `i` is `handle`, the application's (not destroyed), without NCCL: for tests that build
  // collectives against a fake GraphApi (graph_api.h), which issues them itself.
  void use_unchecked(size_t i, void* handle, int rank, int world_size) {
    if (comms_.size() <= i) comms_.resize(i + 1);
    comms_[i].handle = handle;
    comms_[i].rank = rank;
    comms_[i].world_size = world_size;
  }

  // Issues `c` on `stream` (capturing it, usually), waiting while a non-blocking communicator
  // says ncclInProgress.
  nccl::Result issue(const CollectiveCall& c, cudaStream_t stream) const;
  // NCCL's words for a failed call.
  std::string describe(nccl::Result r, void* comm) const;

 private:
  // A communicator in use: the application's, or one orch made and destroys.
  class State {
   public:
    State() = default;
    State(State&& o) noexcept { *this = std::move(o); }
    State& operator=(State&& o) noexcept {
      if (this != &o) {
        reset();
        api = o.api;
        handle = std::exchange(o.handle, nullptr);
        owned = std::exchange(o.owned, false);
        rank = o.rank;
        world_size = o.world_size;
      }
      return *this;
    }
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State() { reset(); }
    void reset() {
      if (owned && handle) (void)api->CommDestroy(handle);
      handle = nullptr;
      owned = false;
    }
    // After ncclCommAbort: nothing left to destroy.
    void forget() {
      handle = nullptr;
      owned = false;
    }

    const nccl::Api* api = nullptr;
    void* handle = nullptr;
    bool owned = false;
    int rank = 0;
    int world_size = 1;
  };

  nccl::Result settle(nccl::Result r, void* comm) const;
  Status wait_exchange(cudaStream_t stream, State& c, const std::string& what, bool* stuck);

  const nccl::Api* nccl_ = nullptr;
  std::vector<State> comms_;  // per Pipeline.comms
};

}  // namespace orch::rt

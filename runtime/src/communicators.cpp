// The communicators of one Executable (runtime/src/communicators.h).
#include "runtime/src/communicators.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "runtime/src/internal.h"

namespace orch::rt {

namespace {

std::string str(const flatbuffers::String* s) { return s ? std::string(s->c_str(), s->size()) : std::string(); }

std::string hex64(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Seconds to wait for the other ranks in instantiate's exchanges: $ORCH_NCCL_TIMEOUT, else 600.
double exchange_timeout_s() {
  const char* env = std::getenv("ORCH_NCCL_TIMEOUT");
  if (env && *env) {
    char* end = nullptr;
    double v = std::strtod(env, &end);
    if (end && *end == '\0' && v > 0) return v;
  }
  return 600;
}

}  // namespace

const char* nccl_function(fb::CollectiveKind k) {
  switch (k) {
    case fb::CollectiveKind::AllReduce: return "ncclAllReduce";
    case fb::CollectiveKind::Broadcast: return "ncclBroadcast";
    case fb::CollectiveKind::AllGather: return "ncclAllGather";
    case fb::CollectiveKind::ReduceScatter: return "ncclReduceScatter";
  }
  return "nccl?";
}

bool nccl_type(fb::ScalarType t, nccl::DataType* out) {
  switch (t) {
    case fb::ScalarType::I8: *out = nccl::kInt8; return true;
    case fb::ScalarType::U8: *out = nccl::kUint8; return true;
    case fb::ScalarType::I32: *out = nccl::kInt32; return true;
    case fb::ScalarType::U32: *out = nccl::kUint32; return true;
    case fb::ScalarType::I64: *out = nccl::kInt64; return true;
    case fb::ScalarType::U64: *out = nccl::kUint64; return true;
    case fb::ScalarType::F16: *out = nccl::kFloat16; return true;
    case fb::ScalarType::BF16: *out = nccl::kBfloat16; return true;
    case fb::ScalarType::F32: *out = nccl::kFloat32; return true;
    case fb::ScalarType::F64: *out = nccl::kFloat64; return true;
    default: return false;
  }
}

nccl::RedOp nccl_op(fb::ReduceOp op) {
  switch (op) {
    case fb::ReduceOp::Sum: return nccl::kSum;
    case fb::ReduceOp::Prod: return nccl::kProd;
    case fb::ReduceOp::Min: return nccl::kMin;
    case fb::ReduceOp::Max: return nccl::kMax;
    case fb::ReduceOp::Avg: return nccl::kAvg;
  }
  return nccl::kSum;
}

int comm_index(const fb::Pipeline& p, std::string_view name) {
  const uint32_t n = p.comms() ? p.comms()->size() : 0;
  for (uint32_t i = 0; i < n; ++i)
    if (p.comms()->Get(i)->name()->string_view() == name) return static_cast<int>(i);
  return -1;
}

bool Communicators::any() const {
  for (const State& c : comms_)
    if (c.handle) return true;
  return false;
}

std::string Communicators::describe(nccl::Result r, void* comm) const {
  return nccl_ ? nccl_->describe(r, comm) : "NCCL result " + std::to_string(r);
}

nccl::Result Communicators::settle(nccl::Result r, void* comm) const {
  while (r == nccl::kInProgress) {
    std::this_thread::yield();
    if (nccl_->CommGetAsyncError(comm, &r) != nccl::kSuccess) break;
  }
  return r;
}

nccl::Result Communicators::issue(const CollectiveCall& c, cudaStream_t s) const {
  nccl::Result r = nccl::kSuccess;
  switch (c.kind) {
    case fb::CollectiveKind::AllReduce: r = nccl_->AllReduce(c.send, c.recv, c.count, c.type, c.op, c.comm, s); break;
    case fb::CollectiveKind::Broadcast: r = nccl_->Broadcast(c.send, c.recv, c.count, c.type, c.root, c.comm, s); break;
    case fb::CollectiveKind::AllGather: r = nccl_->AllGather(c.send, c.recv, c.count, c.type, c.comm, s); break;
    case fb::CollectiveKind::ReduceScatter:
      r = nccl_->ReduceScatter(c.send, c.recv, c.count, c.type, c.op, c.comm, s);
      break;
  }
  return settle(r, c.comm);
}

Status Communicators::open(const fb::Pipeline& pipeline, Bindings& b, const std::vector<artifact::NodeRef>& collectives,
                           int device, const std::string& pipeline_name) {
  const fb::Pipeline* p = &pipeline;
  const uint32_t ncomms = p->comms() ? p->comms()->size() : 0;
  comms_.clear();
  comms_.resize(ncomms);
  std::vector<const Bindings::Comm*> bound(ncomms, nullptr);
  bool needs_nccl = false;
  for (const Bindings::Comm& c : b.comms()) {
    const int i = comm_index(pipeline, c.name);
    if (i < 0) continue;  // make_plan names the unknown comm
    bound[i] = &c;
    needs_nccl |= c.handle != nullptr || c.from_unique_id;
  }
  for (const artifact::NodeRef& c : collectives) {
    const fb::Op* n = c.op;
    const uint32_t i = static_cast<uint32_t>(n->body_as_CollectiveOp()->comm());
    if (i < ncomms && bound[i] && !bound[i]->handle && !bound[i]->from_unique_id)
      return Error(ErrorCode::Unbound,
                   "comm '" + str(p->comms()->Get(i)->name()) + "' is bound without an NCCL communicator, but `" +
                       str(n->what()) + "` needs one (Bindings::comm with an ncclComm_t, or comm_from_unique_id)",
                   rt::where(*p, &c.at->loc()));
  }
  if (!needs_nccl) return {};
  Result<const nccl::Api*> api = nccl::api();
  if (!api.ok())
    return Error(ErrorCode::Nccl, api.error().message(),
                 collectives.empty() ? std::string() : rt::where(*p, &collectives.front().at->loc()));
  nccl_ = *api;

  Status first;  // the first problem that keeps the communicators usable
  std::vector<Bindings::Comm> resolved;
  for (uint32_t i = 0; i < ncomms; ++i) {
    if (!bound[i] || (!bound[i]->handle && !bound[i]->from_unique_id)) continue;
    const Bindings::Comm& c = *bound[i];
    State& st = comms_[i];
    st.api = nccl_;
    const std::string cn = "comm '" + c.name + "'";
    if (c.from_unique_id) {
      if (c.world_size < 1 || c.rank < 0 || c.rank >= c.world_size)
        return Error(ErrorCode::InvalidValue, cn + ": rank " + std::to_string(c.rank) + " is not within world size " +
                                                  std::to_string(c.world_size));
      if (std::all_of(c.unique_id.begin(), c.unique_id.end(), [](char ch) { return ch == 0; }))
        return Error(ErrorCode::InvalidArgument,
                     cn + ": the unique id is all zeros (comm_from_unique_id needs the 128 bytes of orch::nccl_unique_id() "
                          "made on one rank)");
      nccl::UniqueId id;
      std::memcpy(id.internal, c.unique_id.data(), sizeof id.internal);
      void* h = nullptr;
      nccl::Result r = nccl_->CommInitRank(&h, c.world_size, id, c.rank);
      if (r != nccl::kSuccess)
        return nccl::error(*nccl_, r, cn + ": ncclCommInitRank(rank " + std::to_string(c.rank) + " of " +
                                             std::to_string(c.world_size) + ")");
      st.handle = h;
      st.owned = true;
      st.rank = c.rank;
      st.world_size = c.world_size;
      continue;
    }
    int rank = -1, count = -1, comm_device = -1;
    nccl::Result r = nccl_->CommUserRank(c.handle, &rank);
    if (r == nccl::kSuccess) r = nccl_->CommCount(c.handle, &count);
    if (r == nccl::kSuccess) r = nccl_->CommCuDevice(c.handle, &comm_device);
    if (r != nccl::kSuccess)
      return nccl::error(*nccl_, r, cn + ": cannot query the bound communicator (is it an ncclComm_t?)", c.handle);
    st.handle = c.handle;
    st.rank = rank;
    st.world_size = count;
    if (comm_device != device && first.ok())
      first = Error(ErrorCode::InvalidArgument, cn + ": the communicator belongs to device " + std::to_string(comm_device) +
                                                    ", but pipeline '" + pipeline_name + "' was loaded on device " +
                                                    std::to_string(device));
    const bool asked = c.rank >= 0 || c.world_size >= 0;
    if (asked && (c.rank != rank || c.world_size != count) && first.ok())
      first = Error(ErrorCode::InvalidValue, cn + " is bound as rank " + std::to_string(c.rank) + " of " +
                                                 std::to_string(c.world_size) + ", but the communicator is rank " +
                                                 std::to_string(rank) + " of " + std::to_string(count));
    Bindings::Comm fixed = c;
    fixed.rank = rank;
    fixed.world_size = count;
    resolved.push_back(fixed);
  }
  for (const Bindings::Comm& c : resolved) b.comm(c.name, c.handle, c.rank, c.world_size);
  return first;
}

Status Communicators::wait_exchange(cudaStream_t stream, State& c, const std::string& what, bool* stuck) {
  *stuck = false;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(exchange_timeout_s());
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return {};
    if (e != cudaErrorNotReady) {
      (void)cudaGetLastError();
      return rt::cuda_error(e, what);
    }
    nccl::Result async = nccl::kSuccess;
    if (nccl_->CommGetAsyncError(c.handle, &async) == nccl::kSuccess && async != nccl::kSuccess &&
        async != nccl::kInProgress)
      return nccl::error(*nccl_, async, what, c.handle);
    if (std::chrono::steady_clock::now() > deadline) {
      *stuck = true;
      std::string msg = what + ": no answer from the other ranks within " +
                        std::to_string(static_cast<long>(exchange_timeout_s())) +
                        " s (ORCH_NCCL_TIMEOUT); does every rank instantiate a pipeline on this communicator?";
      if (c.owned) {
        (void)nccl_->CommAbort(c.handle);  // ends the stuck NCCL kernel
        c.forget();
        msg += " The communicator was aborted.";
      } else {
        msg += " The application's communicator still holds the call on the instantiate stream.";
      }
      return Error(ErrorCode::RankMismatch, msg);
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(2)) pause *= 2;
  }
}

int Communicators::first_open() const {
  for (size_t i = 0; i < comms_.size(); ++i)
    if (comms_[i].handle) return static_cast<int>(i);
  return -1;
}

Status Communicators::broadcast(size_t i, void* bytes, size_t n, cudaStream_t stream, const std::string& what) {
  if (i >= comms_.size() || !comms_[i].handle) return Error(ErrorCode::InvalidArgument, what + ": no communicator");
  State& c = comms_[i];
  void* dev = nullptr;
  cudaError_t e = cudaMalloc(&dev, n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rt::cuda_error(e, what);
  }
  e = cudaMemcpyAsync(dev, bytes, n, cudaMemcpyHostToDevice, stream);
  Status s;
  bool stuck = false;
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    s = rt::cuda_error(e, what);
  } else {
    nccl::Result r = settle(nccl_->Broadcast(dev, dev, n, nccl::kUint8, 0, c.handle, stream), c.handle);
    if (r != nccl::kSuccess) {
      s = nccl::error(*nccl_, r, what + ": ncclBroadcast", c.handle);
    } else {
      s = wait_exchange(stream, c, what, &stuck);
      if (s.ok()) {
        e = cudaMemcpyAsync(bytes, dev, n, cudaMemcpyDeviceToHost, stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess) {
          (void)cudaGetLastError();
          s = rt::cuda_error(e, what);
        }
      }
    }
  }
  if (!stuck) (void)cudaFree(dev);  // else the NCCL call may still use it: leaked on purpose
  return s;
}

Status Communicators::agree(const fb::Pipeline& pipeline, const std::string& pipeline_name, const Status& mine,
                            cudaStream_t stream, uint64_t symmetric_hash) {
  if (!any()) return mine;
  const fb::Pipeline* p = &pipeline;
  const uint64_t hash = p->collective_hash();
  Status verdict = mine;
  for (uint32_t i = 0; i < comms_.size(); ++i) {
    State& c = comms_[i];
    if (!c.handle) continue;
    const std::string cn = "comm '" + str(p->comms()->Get(i)->name()) + "'";
    const std::string what = cn + ": comparing pipelines with the other ranks";
    const size_t world = static_cast<size_t>(c.world_size);
    constexpr size_t kWords = 3;
    const uint64_t local[kWords] = {hash, mine.ok() ? 0u : 1u, symmetric_hash};
    void* dev = nullptr;
    cudaError_t e = cudaMalloc(&dev, (world + 1) * sizeof local);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return mine.ok() ? Status(rt::cuda_error(e, what)) : mine;
    }
    auto* send = static_cast<uint64_t*>(dev);
    uint64_t* recv = send + kWords;
    std::vector<uint64_t> all(kWords * world, 0);
    e = cudaMemcpyAsync(send, local, sizeof local, cudaMemcpyHostToDevice, stream);
    nccl::Result r = nccl::kSuccess;
    if (e == cudaSuccess) r = settle(nccl_->AllGather(send, recv, kWords, nccl::kUint64, c.handle, stream), c.handle);
    Status s;
    bool stuck = false;
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      s = rt::cuda_error(e, what);
    } else if (r != nccl::kSuccess) {
      s = nccl::error(*nccl_, r, what + ": ncclAllGather", c.handle);
    } else {
      s = wait_exchange(stream, c, what, &stuck);
      if (s.ok()) {
        e = cudaMemcpyAsync(all.data(), recv, all.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess) {
          (void)cudaGetLastError();
          s = rt::cuda_error(e, what);
        }
      }
    }
    if (!stuck) (void)cudaFree(dev);  // else the NCCL call may still use it: leaked on purpose
    if (!s.ok()) {
      if (verdict.ok()) verdict = s;
      continue;
    }
    if (!verdict.ok()) continue;
    for (size_t rk = 0; rk < world && verdict.ok(); ++rk) {
      if (static_cast<int>(rk) == c.rank) continue;
      if (all[kWords * rk] != hash)
        verdict = Error(ErrorCode::RankMismatch,
                        "rank " + std::to_string(rk) + " runs a different pipeline (collective sequence hash " +
                            hex64(all[kWords * rk]) + "; this rank, " + std::to_string(c.rank) + ", runs pipeline '" +
                            pipeline_name + "' with hash " + hex64(hash) + " on " + cn +
                            "): every rank must instantiate the same pipeline.bin, or the ranks would wait for "
                            "each other's collectives forever");
      else if (all[kWords * rk + 1] != 0)
        verdict = Error(ErrorCode::RankMismatch,
                        "rank " + std::to_string(rk) + " could not instantiate pipeline '" + pipeline_name +
                            "' (its own error says why); this rank, " + std::to_string(c.rank) +
                            ", stops too rather than wait for it in a collective");
      else if (all[kWords * rk + 2] != symmetric_hash)
        verdict = Error(ErrorCode::RankMismatch,
                        "rank " + std::to_string(rk) + " gives pipeline '" + pipeline_name +
                            "' symmetric buffers of other sizes than this rank, " + std::to_string(c.rank) +
                            ", does (its params are bound to other values): a symmetric buffer must be the same "
                            "size on every PE");
    }
  }
  return verdict;
}

}  // namespace orch::rt

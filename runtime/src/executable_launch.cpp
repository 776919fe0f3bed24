// An instantiated Executable at work: launch() (re-uploading device graphs a patch touched,
// then the segments in order), the device status record that generated kernels report into,
// waiting for the last launch before anything is freed, and the accessors. Apart from building
// and patching: it only launches what instantiation made.
#include "runtime/src/executable_impl.h"
#include "runtime/src/loop_order.h"

namespace orch {

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Executable::~Executable() {
  // The memory freed below may still be in use by a launch: wait for the last one. (After a
  // fault this returns the sticky error at once; nothing is left running to wait for.)
  if (impl_ && impl_->launched && impl_->done) {
    (void)cudaEventSynchronize(impl_->done.get());
    (void)cudaGetLastError();
  }
}

Status Executable::launch(cudaStream_t stream) {
  return rt::guarded([&]() -> Status {
    Impl& x = *impl_;
    if (!x.broken.ok()) return x.broken;
    Status st = x.check_not_capturing(stream, "launch");
    if (!st.ok()) return st;
    for (auto& t : x.tops) {
      if (!t.device || !t.upload_needed) continue;
      cudaError_t e = x.cuda->upload(t.exec.get(), stream);
      if (e != cudaSuccess) {
        (void)x.cuda->get_last_error();
        return rt::cuda_error(e, "cannot upload device graph '" + Impl::str(x.p->graphs()->Get(t.graph)->name()) + "'");
      }
      t.upload_needed = false;
      ++x.stats.device_graph_uploads;
    }
    auto launch_segments = [&]() -> Status {
      for (int s : x.segments) {
        rt::ObservedPhase observed(Phase::Launch, x.tops[s].graph, x.tops[s].member);
        cudaError_t e = x.cuda->launch(x.tops[s].exec.get(), stream);
        observed.ok = e == cudaSuccess;
        if (e != cudaSuccess) {
          (void)x.cuda->get_last_error();
          return rt::cuda_error(e, "cannot launch graph '" + Impl::str(x.p->graphs()->Get(x.tops[s].graph)->name()) + "'");
        }
      }
      return {};
    };
    st = x.has_loops ? rt::launch_after_other_loops(stream, launch_segments) : launch_segments();
    if (!st.ok()) return st;
    // Marks the end of this launch, for the destructor and for rebind's freeing.
    if (x.done) {
      cudaError_t e = cudaEventRecord(x.done.get(), stream);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rt::cuda_error(e, "launch: cannot record the event that marks the launch's end");
      }
      x.launched = true;
    }
    return {};
  });
}

Executable::Stats Executable::stats() const { return impl_->stats; }
Executable::InstantiateTimes Executable::instantiate_times() const { return impl_->times; }

Status Executable::device_status() const {
  const Impl& x = *impl_;
  uint32_t r[4] = {0, 0, 0, 0};
  // No kernel of this pipeline can report anything; a fault that lost the context still shows.
  if (!x.status) return rt::context_status();
  cudaError_t e = cudaMemcpy(r, x.status.get(), sizeof r, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rt::cuda_error(e, "cannot read the device status record");
  }
  const uint32_t code = r[0], site = r[1], detail = r[2], count = r[3];
  if (code == 0) return {};
  std::string what = "a kernel orchc wrote", where;
  const auto* sites = x.p->status_sites();
  if (sites && site < sites->size()) {
    const fb::StatusSite* s = sites->Get(site);
    if (s->what() && s->what()->size() > 0) what = "`" + Impl::str(s->what()) + "`";
    where = rt::where(*x.p, s->loc());
  }
  // A code this runtime does not know (a newer orchc's) is shown as a number.
  std::string message = what + ": device error " + std::to_string(code) + " (detail " + std::to_string(detail) + ")";
  switch (static_cast<fb::DeviceError>(code)) {
    case fb::DeviceError::None: break;  // returned above
    case fb::DeviceError::LaunchFailed: {
      const cudaError_t c = static_cast<cudaError_t>(detail);
      message = what + ": the device graph launch failed on the GPU: " + cudaGetErrorName(c) + " (" +
                cudaGetErrorString(c) + "); the graph did not run";
      break;
    }
    case fb::DeviceError::MemberOutOfRange:
      message = what + ": family index " + std::to_string(detail) + " is outside the family; nothing was launched";
      break;
    case fb::DeviceError::Expression: {
      // The device reports expr::ErrorKind (orch_error_code in expr/ops.h, asserted equal).
      const bool known = detail > 0 && detail <= static_cast<uint32_t>(expr::ErrorKind::Invalid);
      message = what + ": the expression could not be evaluated on the GPU: " +
                (known ? std::string(expr::to_string(static_cast<expr::ErrorKind>(detail)))
                       : "error " + std::to_string(detail)) +
                " (the loop, branch or update it decides did not run)";
      break;
    }
  }
  if (count > 1) message += "; " + std::to_string(count - 1) + " more device error(s) after it";
  return Error(ErrorCode::DeviceError, message, where);
}

Status Executable::clear_device_status() {
  if (!impl_->status) return {};
  cudaError_t e = cudaMemset(impl_->status.get(), 0, Impl::kStatusBytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return rt::cuda_error(e, "cannot clear the device status record");
  }
  return {};
}

void* Executable::comm(std::string_view name) const {
  const int i = rt::comm_index(*impl_->p, name);
  return i < 0 ? nullptr : impl_->comms.handle(static_cast<size_t>(i));
}

int Executable::rank() const { return static_cast<int>(impl_->plan.rank); }
int Executable::world_size() const { return static_cast<int>(impl_->plan.world_size); }

Result<double> Executable::param_as_double(std::string_view name) const {
  return rt::guarded([&]() -> Result<double> {
    const fb::Pipeline& p = *impl_->p;
    const uint32_t n = p.params() ? p.params()->size() : 0;
    for (uint32_t i = 0; i < n; ++i)
      if (p.params()->Get(i)->name()->string_view() == name) return impl_->plan.params[i].as_double();
    return Error(ErrorCode::UnknownName,
                 "pipeline '" + impl_->pipeline->name + "' has no param '" + std::string(name) + "'");
  });
}

}  // namespace orch

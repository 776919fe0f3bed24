// The patcher: set_param and rebind re-evaluate every node with the new plan (or buffer) and
// patch only the nodes whose values changed, in the template and in the executable graph in
// place, falling back to a whole-graph update where CUDA refuses a patch, and building a
// segment again where a collective changed (NCCL's captured work cannot be patched). A
// transaction: on any failure every patch, update and rebuild done so far is undone, so the
// Executable is as it was. Apart from the builder's (executable_build.cpp), so the tests can
// drive every patch path and fail any CUDA call of it through a fake (graph_api.h).
#include <algorithm>

#include "runtime/src/executable_impl.h"

namespace orch {

// Puts back what rebuild_top replaced; the new template, exec and records go.
void Executable::Impl::restore(Rebuilt& old) {
  Top& t = tops[old.top];
  const int top = old.top;
  records.erase(std::remove_if(records.begin(), records.end(), [&](const NodeRecord& r) { return r.top == top; }),
                records.end());
  t.exec = std::move(old.exec);
  t.graph_template = std::move(old.graph_template);
  t.update_needed = old.update_needed;
  for (NodeRecord& r : old.records) records.push_back(std::move(r));
  old.records.clear();
  handles = old.handles;
  index_records();
}

// Builds host segment `top` again from the current plan (capturing its collectives anew),
// instantiates and uploads it, and replaces the old exec, which goes to `*saved` (CUDA frees
// an exec once any launch of it in flight has finished). On failure the old exec stays.
Status Executable::Impl::rebuild_top(int top, Rebuilt* saved) {
  Top& t = tops[top];
  Rebuilt old;
  old.top = top;
  old.graph_template = std::move(t.graph_template);
  old.exec = std::move(t.exec);
  old.update_needed = t.update_needed;
  old.handles = handles;
  std::vector<NodeRecord> kept;
  for (NodeRecord& r : records) (r.top == top ? old.records : kept).push_back(std::move(r));
  records = std::move(kept);
  auto fail = [&](Status s) {
    restore(old);
    return s;
  };
  cudaError_t e = cuda->graph_create(t.graph_template.out(*cuda));
  if (e != cudaSuccess) {
    (void)cuda->get_last_error();
    return fail(rt::cuda_error(e, "cudaGraphCreate"));
  }
  Status s = create_handles(top);
  if (s.ok()) {
    ObservedPhase observed(Phase::Build, t.graph, t.member);
    s = build(t.graph_template.get(), *p->graphs()->Get(t.graph), top);
    observed.ok = s.ok();
  }
  if (!s.ok()) return fail(s);
  index_records();
  s = instantiate_top(top, side_stream.get());
  if (s.ok()) {
    ObservedPhase observed(Phase::Upload, t.graph, t.member);
    e = cuda->upload(t.exec.get(), side_stream.get());
    if (e == cudaSuccess) e = cuda->stream_synchronize(side_stream.get());
    observed.ok = e == cudaSuccess;
    if (e != cudaSuccess) {
      (void)cuda->get_last_error();
      s = rt::cuda_error(e, "cannot upload graph '" + str(p->graphs()->Get(t.graph)->name()) + "'");
    }
  }
  if (!s.ok()) return fail(s);
  t.update_needed = false;
  ++stats.segments_rebuilt;
  *saved = std::move(old);
  return {};
}

// Sets a node's parameters in the template and, with `exec`, in the executable graph; the
// template's call first. Returns the template's error; *exec_error gets the exec's.
cudaError_t Executable::Impl::set_node(NodeRecord& rec, const KernelCall* k, const CopyCall* c, const FillCall* f,
                                       cudaGraphExec_t exec, cudaError_t* exec_error) {
  cudaError_t e = cudaSuccess, x = cudaSuccess;
  if (k) {
    std::vector<void*> ptrs;
    KernelCall call = *k;
    cudaKernelNodeParams kp = call.params(ptrs);
    e = cuda->kernel_node_set_params(rec.handle, &kp);
    if (e == cudaSuccess && exec) x = cuda->exec_kernel_node_set_params(exec, rec.handle, &kp);
  } else if (c) {
    e = cuda->memcpy_node_set_params_1d(rec.handle, c->dst, c->src, c->bytes);
    if (e == cudaSuccess && exec)
      x = cuda->exec_memcpy_node_set_params_1d(exec, rec.handle, c->dst, c->src, c->bytes);
  } else if (f) {
    e = cuda->memset_node_set_params(rec.handle, &f->p);
    if (e == cudaSuccess && exec) x = cuda->exec_memset_node_set_params(exec, rec.handle, &f->p);
  }
  *exec_error = x;
  return e;
}

// Re-evaluates every node of the tops in `scope` and patches the ones whose values
// changed: the template node, then the executable node in place; a refused in-place patch
// marks the top for a whole-graph cudaGraphExecUpdate. A transaction: everything that can
// fail without touching a graph (evaluation, shared memory limits) comes first, and a CUDA
// failure after the first patch undoes every patch, rebuild and update done so far, so that
// on error the graphs, the records and the stats are as they were. Where even the undo fails,
// `broken` is set.
Status Executable::Impl::refresh(Scope scope) {
  struct Change {
    cudaGraphNode_t node;
    int top;
    KernelCall kernel;
    CopyCall copy;
    FillCall fill;
  };
  std::vector<Change> changes;
  // Segments whose collectives changed: NCCL's captured work cannot be patched from outside,
  // so these are built, captured and instantiated again (their other changes included).
  std::vector<bool> rebuild(tops.size(), false);
  for (size_t r = 0; r < records.size(); ++r) {
    NodeRecord& rec = records[r];
    if (scope == Scope::LateArguments && !(tops[rec.top].device && rt::has_late_argument(*rec.node.op)))
      continue;
    const Top& t = tops[rec.top];
    Change c;
    c.node = rec.handle;
    c.top = rec.top;
    switch (artifact::op_kind(*rec.node.op)) {
      case artifact::NodeKind::Kernel: {
        Status s = compute_kernel(rec.node, t, &c.kernel);
        if (!s.ok()) return s;
        if (!(c.kernel == rec.kernel)) changes.push_back(std::move(c));
        break;
      }
      case artifact::NodeKind::Memcpy: {
        Status s = compute_copy(rec.node, t, &c.copy);
        if (!s.ok()) return s;
        if (!(c.copy == rec.copy)) changes.push_back(std::move(c));
        break;
      }
      case artifact::NodeKind::Memset: {
        Status s = compute_fill(rec.node, t, &c.fill);
        if (!s.ok()) return s;
        if (!(c.fill == rec.fill)) changes.push_back(std::move(c));
        break;
      }
      case artifact::NodeKind::Collective: {
        CollectiveCall call;
        Status s = compute_collective(rec.node, t, &call);
        if (!s.ok()) return s;
        if (!(call == rec.collective)) rebuild[rec.top] = true;
        break;
      }
      case artifact::NodeKind::Empty:
      case artifact::NodeKind::Conditional:  // its handle and bodies do not depend on params
        break;
    }
  }
  // Kernel attributes for more dynamic shared memory: may fail, and patch nothing.
  for (const Change& c : changes) {
    if (rebuild[c.top]) continue;
    const NodeRecord& rec = records[record_of().at(c.node)];
    const fb::KernelOp* k = rec.node.op->body_as_KernelOp();
    if (!k) continue;
    Status s = pipeline->allow_shared_bytes(k->kernel(), c.kernel.shared);
    if (!s.ok()) return s;
  }

  // What undo needs.
  const Executable::Stats stats_before = stats;
  std::vector<std::pair<bool, bool>> flags_before;  // per top: upload_needed, update_needed
  for (const Top& t : tops) flags_before.emplace_back(t.upload_needed, t.update_needed);
  struct Applied {
    cudaGraphNode_t node;
    KernelCall kernel;  // the old values
    CopyCall copy;
    FillCall fill;
    bool exec_patched = false;
  };
  std::vector<Applied> applied;
  std::vector<Rebuilt> rebuilt;
  std::vector<bool> updated(tops.size(), false);
  auto undo = [&](Status failure) -> Status {
    Status undo_error;
    auto note = [&](cudaError_t e, const std::string& what) {
      if (e == cudaSuccess) return;
      (void)cuda->get_last_error();
      if (undo_error.ok()) undo_error = rt::cuda_error(e, what);
    };
    for (auto it = applied.rbegin(); it != applied.rend(); ++it) {
      NodeRecord& rec = records[record_of().at(it->node)];
      Top& t = tops[rec.top];
      const artifact::NodeKind kind = artifact::op_kind(*rec.node.op);
      cudaError_t x = cudaSuccess;
      cudaError_t e = set_node(rec, kind == artifact::NodeKind::Kernel ? &it->kernel : nullptr,
                               kind == artifact::NodeKind::Memcpy ? &it->copy : nullptr,
                               kind == artifact::NodeKind::Memset ? &it->fill : nullptr,
                               it->exec_patched ? t.exec.get() : nullptr, &x);
      note(e, "undoing a patch of " + node_name(rec.node, t));
      note(x, "undoing a patch of " + node_name(rec.node, t));
      rec.kernel = std::move(it->kernel);
      rec.copy = it->copy;
      rec.fill = it->fill;
    }
    for (size_t i = 0; i < tops.size(); ++i) {
      if (!updated[i]) continue;
      cudaGraphExecUpdateResultInfo info = {};
      note(cuda->exec_update(tops[i].exec.get(), tops[i].graph_template.get(), &info),
           "undoing the update of graph '" + str(p->graphs()->Get(tops[i].graph)->name()) + "'");
    }
    for (auto it = rebuilt.rbegin(); it != rebuilt.rend(); ++it) restore(*it);
    stats = stats_before;
    for (size_t i = 0; i < tops.size() && i < flags_before.size(); ++i) {
      tops[i].upload_needed = flags_before[i].first;
      tops[i].update_needed = flags_before[i].second;
    }
    if (undo_error.ok()) return failure;
    const Error& u = undo_error.error();
    broken = Error(u.code(),
                   "this Executable's graphs may hold a half-applied set_param or rebind, which could not be "
                   "undone (" + u.message() + "); instantiate the pipeline again",
                   {}, u.cuda_error());
    const Error& f = failure.error();
    if (f.code() == ErrorCode::ContextLost) return failure;
    return Error(f.code(), f.message() + "; undoing the patches failed too (" + u.message() +
                               "), so this Executable refuses further use",
                 f.where(), f.cuda_error());
  };

  // Rebuilds first (they reorder the records), then patches, then whole-graph updates.
  for (size_t i = 0; i < tops.size(); ++i) {
    if (!rebuild[i]) continue;
    Rebuilt r;
    Status s = rebuild_top(static_cast<int>(i), &r);
    if (!s.ok()) return undo(s);
    rebuilt.push_back(std::move(r));
  }
  for (Change& c : changes) {
    if (rebuild[c.top]) continue;  // built again from the new plan: its old nodes are gone
    NodeRecord& rec = records[record_of().at(c.node)];
    Top& t = tops[rec.top];
    const NodeRef& at = rec.node;
    const artifact::NodeKind kind = artifact::op_kind(*at.op);
    cudaError_t x = cudaSuccess;
    cudaError_t e = set_node(rec, kind == artifact::NodeKind::Kernel ? &c.kernel : nullptr,
                             kind == artifact::NodeKind::Memcpy ? &c.copy : nullptr,
                             kind == artifact::NodeKind::Memset ? &c.fill : nullptr, t.exec.get(), &x);
    if (e != cudaSuccess) return undo(node_cuda_error(e, at, t, "cannot set the node's parameters"));
    Applied a;
    a.node = c.node;
    a.kernel = std::move(rec.kernel);
    a.copy = rec.copy;
    a.fill = rec.fill;
    a.exec_patched = t.exec && x == cudaSuccess;
    switch (kind) {
      case artifact::NodeKind::Kernel: rec.kernel = std::move(c.kernel); break;
      case artifact::NodeKind::Memcpy: rec.copy = c.copy; break;
      case artifact::NodeKind::Memset: rec.fill = c.fill; break;
      case artifact::NodeKind::Empty:
      case artifact::NodeKind::Conditional:
      case artifact::NodeKind::Collective: break;  // never a Change (rebuilt instead, or nothing to patch)
    }
    applied.push_back(std::move(a));
    if (x != cudaSuccess) {
      (void)cuda->get_last_error();
      // A sticky error is no refusal: the context is gone, and the update would fail too.
      if (rt::is_sticky(x)) return undo(node_cuda_error(x, at, t, "cannot patch the executable graph"));
      t.update_needed = true;  // refused in place: the whole graph is updated below
      ++stats.patches_refused;
    } else if (t.exec) {
      ++stats.nodes_patched_in_place;
    }
    if (t.device) t.upload_needed = true;
  }
  for (size_t i = 0; i < tops.size(); ++i) {
    Top& t = tops[i];
    if (!t.update_needed || !t.exec) continue;
    cudaGraphExecUpdateResultInfo info = {};
    cudaError_t e = cuda->exec_update(t.exec.get(), t.graph_template.get(), &info);
    if (e != cudaSuccess) {  // not performed: the exec is unchanged
      (void)cuda->get_last_error();
      std::string w;
      std::string what = "cannot update graph '" + str(p->graphs()->Get(t.graph)->name()) + "' in place (result " +
                         std::to_string(static_cast<int>(info.result)) + ")";
      const auto& index = record_of();
      auto it = info.errorNode ? index.find(info.errorNode) : index.end();
      if (it != index.end()) {
        what += " at " + node_name(records[it->second].node, t);
        w = node_where(records[it->second].node);
      }
      return undo(rt::cuda_error(e, what, w));
    }
    updated[i] = true;
    t.update_needed = false;
    ++stats.graph_updates;
    if (t.device) t.upload_needed = true;
  }
  return {};
}

// ---- the public calls ------------------------------------------------------------------

Status Executable::set_param_value(std::string_view name, ScalarValue value) {
  return rt::guarded([&]() -> Status {
    Impl& x = *impl_;
    if (!x.broken.ok()) return x.broken;
    Bindings next = x.bindings;
    next.set_param(name, value);
    if (next.incomplete()) return rt::out_of_memory();
    Result<rt::Plan> plan = x.replan(next);
    if (!plan.ok()) return plan.error();
    Status s = x.check_overlaps(*plan, next);  // new sizes may make bound buffers overlap
    if (!s.ok()) return s;
    rt::Plan old = std::move(x.plan);
    x.plan = std::move(plan.value());
    s = x.refresh(Impl::Scope::Everything);
    if (!s.ok()) {
      x.plan = std::move(old);  // refresh undid its patches (or marked the Executable broken)
      return s;
    }
    x.bindings = std::move(next);
    return {};
  });
}

Status Executable::rebind(std::string_view name, void* device_ptr, size_t bytes) {
  return rt::guarded([&]() -> Status {
    Impl& x = *impl_;
    if (!x.broken.ok()) return x.broken;
    const int i = x.buffer_index(name);
    if (i < 0)
      return Error(ErrorCode::UnknownName,
                   "pipeline '" + x.pipeline->name + "' has no buffer '" + std::string(name) + "'");
    Bindings next = x.bindings;
    next.buffer(name, device_ptr, bytes);
    if (next.incomplete()) return rt::out_of_memory();
    Result<rt::Plan> plan = x.replan(next);
    if (!plan.ok()) return plan.error();
    Impl::BufferState fresh;
    Status s = x.bind_buffer(static_cast<uint32_t>(i), device_ptr, bytes, &fresh);
    if (!s.ok()) return s;
    s = x.check_overlaps(*plan, next, i, fresh.ptr);
    if (!s.ok()) return s;
    Impl::BufferState old = std::move(x.buffers[i]);
    rt::Plan old_plan = std::move(x.plan);
    x.buffers[i] = std::move(fresh);
    x.plan = std::move(plan.value());
    s = x.refresh(Impl::Scope::Everything);
    if (!s.ok()) {  // refresh undid its patches (or marked the Executable broken)
      x.buffers[i] = std::move(old);
      x.plan = std::move(old_plan);
      return s;
    }
    x.bindings = std::move(next);
    // Memory the runtime had allocated is freed once no launch uses it any more.
    if (old.owned && x.launched && x.done) {
      cudaError_t e = cudaEventSynchronize(x.done.get());
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        // Not freed: a launch may still use it (leaked rather than freed under the GPU).
        (void)old.device_memory.release();
        (void)old.host_memory.release();
      }
    }
    return {};  // `old` frees memory the runtime had allocated
  });
}

}  // namespace orch

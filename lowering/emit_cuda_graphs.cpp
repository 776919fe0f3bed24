// The ejected file's graph builders: device graphs, patchers and host graphs, region by region
// and node by node (kernels with their parameters, memcpy, memset, conditionals, collectives).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "lowering/emit_cuda_internal.h"

namespace orch::eject {

void Emitter::graph_builders() {
  for (int g : device_order_) {
    device_builder(g);
    if (!late_nodes_[g].empty()) patcher(g);
  }
  for (int s : p_.segments) host_builder(s);
}

void Emitter::device_builder(int g) {
  const lir::Graph& x = p_.graphs[g];
  bool family = x.family_size > 0;
  in_family_ = family;
  line("// graph " + x.name +
       (family ? "[" + x.family_index + ": " + std::to_string(x.family_size) + "]" : "") +
       " device  (" + at(x.loc) + ")");
  if (family)
    line("// One member of the family; `member` is the family index `" + x.family_index +
         "`, a constant in each member's graph.");
  open("static cudaError_t orch_build_" + graph_names_[g] + "(const " + params_type() +
       "& p, const " + buffers_type() + "& b, " + graphs_type() + "* out" +
       (family ? ", int member" : "") + ") {");
  unused_guard();
  std::string gw = where(x.loc, "graph " + x.name);
  line("cudaGraph_t graph = nullptr;");
  line("ORCH_CHECK(cudaGraphCreate(&graph, 0), " + gw + ");");
  line("out->" + graph_names_[g] + member_index(g) + " = graph;");
  Scope s;
  s.graph = g;
  s.graph_var = "graph";
  s.device = true;
  region(x.body, s);
  line("// Instantiated for launch from the GPU; uploaded once every device graph is ready.");
  line("ORCH_CHECK(cudaGraphInstantiateWithFlags(&out->" + exec_names_[g] + member_index(g) +
       ", graph, cudaGraphInstantiateFlagDeviceLaunch), " + gw + ");");
  line("return cudaSuccess;");
  close();
  line();
  in_family_ = false;
}

void Emitter::patcher(int g) {
  const lir::Graph& x = p_.graphs[g];
  bool family = x.family_size > 0;
  in_family_ = family;
  line("// Graph arguments of " + x.name +
       " that name a graph instantiated after it (or itself):");
  line("// set on the executable graph now that every exec exists.");
  open("static cudaError_t orch_patch_" + graph_names_[g] + "(const " + params_type() +
       "& p, const " + buffers_type() + "& b, " + graphs_type() + "* out" +
       (family ? ", int member" : "") + ") {");
  unused_guard();
  Scope s;
  s.graph = g;
  s.device = true;
  patching_ = true;
  for (size_t k = 0; k < late_nodes_[g].size(); ++k) {
    const lir::Node& n = *late_nodes_[g][k];
    node_comment(n);
    open("{");
    kernel_params(n, std::get<lir::KernelNode>(n.op), s);
    line("ORCH_CHECK(cudaGraphExecKernelNodeSetParams(out->" + exec_names_[g] + member_index(g) +
         ", out->" + patch_names_[g] + "[" + (family ? "member" : "0") + "][" +
         std::to_string(k) + "], &kernel), " + where(n.loc, n.what) + ");");
    close();
  }
  patching_ = false;
  line("return cudaSuccess;");
  close();
  line();
  in_family_ = false;
}

void Emitter::host_builder(int g) {
  const lir::Graph& x = p_.graphs[g];
  line("// graph " + x.name + "  (" + at(x.loc) + ")");
  open("static cudaError_t orch_build_" + graph_names_[g] + "(const " + params_type() +
       "& p, const " + buffers_type() + "& b, " + graphs_type() + "* out) {");
  unused_guard();
  std::string gw = where(x.loc, "graph " + x.name);
  line("cudaGraph_t graph = nullptr;");
  line("ORCH_CHECK(cudaGraphCreate(&graph, 0), " + gw + ");");
  line("out->" + graph_names_[g] + " = graph;");
  std::vector<size_t> handles;
  for (size_t h = 0; h < p_.handles.size(); ++h)
    if (p_.handles[h].graph == g) handles.push_back(h);
  if (!handles.empty()) {
    line(
        "// Conditional handles: the GPU sets them (cudaGraphSetConditional) before their node "
        "runs.");
    line("cudaGraphConditionalHandle handle[" + std::to_string(p_.handles.size()) + "] = {};");
    for (size_t h : handles) {
      const lir::ConditionalHandle& ch = p_.handles[h];
      const lir::Node* n = handle_nodes_[h];
      SourceRange loc = n ? n->loc : x.loc;
      std::string what = n ? n->what : "handle " + std::to_string(h);
      if (ch.set_default)
        line("// handle " + std::to_string(h) + ": `" + comment_text(what) + "`, reset to " +
             std::to_string(ch.default_value) + " at every launch (the body runs at least once)");
      else
        line("// handle " + std::to_string(h) + ": `" + comment_text(what) + "`");
      line("ORCH_CHECK(cudaGraphConditionalHandleCreate(&handle[" + std::to_string(h) +
           "], graph, " + std::to_string(ch.default_value) + ", " +
           (ch.set_default ? "cudaGraphCondAssignDefault" : "0") + "), " + where(loc, what) +
           ");");
    }
  }
  Scope s;
  s.graph = g;
  s.graph_var = "graph";
  region(x.body, s);
  // Node priorities where a collective has kernels beside it (lowering/prioritize_collectives.cpp;
  // the runtime does the same: runtime/src/executable_build.cpp, prioritize_new_kernels).
  const bool priorities = std::any_of(x.body.nodes.begin(), x.body.nodes.end(), [](const lir::Node& n) {
    const auto* c = std::get_if<lir::CollectiveNode>(&n.op);
    return c && c->high_priority;
  });
  line("ORCH_CHECK(cudaGraphInstantiateWithFlags(&out->" + exec_names_[g] + ", graph, " +
       (priorities ? "cudaGraphInstantiateFlagUseNodePriority" : "0") + "), " + gw + ");");
  line("ORCH_CHECK(cudaGraphUpload(out->" + exec_names_[g] + ", 0), " + gw + ");");
  line("return cudaSuccess;");
  close();
  line();
}

void Emitter::region(const lir::Body& r, const Scope& s) {
  std::string nodes = s.depth == 0 ? "node" : "node" + std::to_string(s.depth);
  if (r.nodes.empty()) {
    line("// (empty)");
    return;
  }
  line("cudaGraphNode_t " + nodes + "[" + std::to_string(r.nodes.size()) + "] = {};");
  // Collectives are top-level nodes of host graphs only. Their NCCL work is recorded by stream
  // capture straight into this graph, in one capture session (the runtime does the same:
  // runtime/src/executable_build.cpp, begin_capture), with the other nodes added beside it.
  const bool collectives = std::any_of(r.nodes.begin(), r.nodes.end(), [](const lir::Node& n) {
    return std::holds_alternative<lir::CollectiveNode>(n.op);
  });
  if (collectives) {
    line("cudaStream_t capture = nullptr;");
    line("ORCH_CHECK(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking), \"the stream that captures NCCL's work\");");
    line("ORCH_CHECK(cudaStreamBeginCaptureToGraph(capture, " + s.graph_var +
         ", nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal), \"capturing NCCL's work\");");
  }
  for (int i : topological_order(r)) {
    const lir::Node& n = r.nodes[i];
    line();
    node_comment(n);
    open("{");
    std::string dep_args = "nullptr, 0";
    std::map<int, bool> d;  // dependency -> programmatic
    for (const lir::Dep& dep : n.deps) d[static_cast<int>(dep.from)] |= dep.kind == lir::DepKind::Programmatic;
    bool programmatic = false;
    if (!d.empty()) {
      std::string list;
      for (const auto& [j, prog] : d) {
        list += (list.empty() ? "" : ", ") + nodes + "[" + std::to_string(j) + "]";
        programmatic |= prog;
      }
      line("const cudaGraphNode_t deps[] = {" + list + "};  // must finish first");
      dep_args = "deps, " + std::to_string(d.size());
    }
    if (programmatic) {
      // The kernel waits at entry (griddepcontrol.wait), so it may start as soon as the
      // kernels of its programmatic edges have all started: their launch latency is hidden.
      line("cudaGraphEdgeData edges[" + std::to_string(d.size()) + "] = {};  // programmatic edges:");
      size_t k = 0;
      for (const auto& [j, prog] : d) {
        if (prog) {
          line("edges[" + std::to_string(k) + "].from_port = cudaGraphKernelNodePortProgrammatic;");
          line("edges[" + std::to_string(k) + "].type = cudaGraphDependencyTypeProgrammatic;");
        }
        ++k;
      }
    }
    node(n, s, nodes + "[" + std::to_string(i) + "]", dep_args, programmatic);
    close();
  }
  if (collectives) {
    line("cudaGraph_t captured = nullptr;  // the same graph");
    line("const cudaError_t ended = cudaStreamEndCapture(capture, &captured);");
    line("cudaStreamDestroy(capture);");
    line("ORCH_CHECK(ended, \"capturing NCCL's work\");");
  }
}

void Emitter::node(const lir::Node& n, const Scope& s, const std::string& slot, const std::string& deps,
          bool programmatic) {
  std::string w = where(n.loc, n.what);
  std::string g = s.graph_var;
  std::visit(
      lir::overloaded{
          [&](const lir::KernelNode& k) {
            kernel_params(n, k, s);
            if (programmatic) {
              // Edge data goes only through cudaGraphAddNode.
              line("cudaGraphNodeParams node_params = {};");
              line("node_params.type = cudaGraphNodeTypeKernel;");
              line("node_params.kernel.func = kernel.func;");
              line("node_params.kernel.gridDim = kernel.gridDim;");
              line("node_params.kernel.blockDim = kernel.blockDim;");
              line("node_params.kernel.sharedMemBytes = kernel.sharedMemBytes;");
              line("node_params.kernel.kernelParams = kernel.kernelParams;");
              line("ORCH_CHECK(cudaGraphAddNode(&" + slot + ", " + g + ", deps, edges, " +
                   deps.substr(deps.find(',') + 2) + ", &node_params), " + w + ");");
            } else {
              line("ORCH_CHECK(cudaGraphAddKernelNode(&" + slot + ", " + g + ", " + deps + ", &kernel), " + w + ");");
            }
            auto& late = late_nodes_[s.graph];
            auto it = std::find(late.begin(), late.end(), &n);
            if (s.device && it != late.end())
              line("out->" + patch_names_[s.graph] + "[" + (in_family_ ? "member" : "0") + "][" +
                   std::to_string(it - late.begin()) + "] = " + slot + ";");
          },
          [&](const lir::MemcpyNode& m) {
            line("ORCH_CHECK(cudaGraphAddMemcpyNode1D(&" + slot + ", " + g + ", " + deps + ", b." +
                 buffer_names_[m.dst] + ", b." + buffer_names_[m.src] + ", " + bytes_of(m.src, w) +
                 ", cudaMemcpyDefault), " + w + ");");
          },
          [&](const lir::MemsetNode& m) {
            uint32_t elem = expr::size_of(p_.buffers[m.dst].elem);
            uint32_t per = elem / m.element_size;
            char value[16];
            std::snprintf(value, sizeof value, "0x%x", m.value);
            line("cudaMemsetParams fill = {};");
            line("fill.dst = b." + buffer_names_[m.dst] + ";");
            line("fill.value = " + std::string(value) + "u;  // the fill value's bytes, " +
                 std::to_string(m.element_size) + "-byte pattern");
            line("fill.elementSize = " + std::to_string(m.element_size) + ";");
            line("fill.width = " + count_of(m.dst, w) + (per > 1 ? " * " + std::to_string(per) : "") +
                 ";  // elements of the pattern");
            line("fill.height = 1;");
            line("ORCH_CHECK(cudaGraphAddMemsetNode(&" + slot + ", " + g + ", " + deps + ", &fill), " +
                 w + ");");
          },
          [&](const lir::EmptyNode&) {
            // Not expected after lowering; an empty node keeps the dependencies.
            line("// (" + n.what + ": nothing to do here)");
            line("ORCH_CHECK(cudaGraphAddEmptyNode(&" + slot + ", " + g + ", " + deps + "), " + w + ");");
          },
          [&](const lir::ConditionalNode& c) { conditional(c, s, slot, deps, w); },
          [&](const lir::CollectiveNode& c) { collective(c, s, slot, deps, w); },
      },
      n.op);
}

void Emitter::kernel_params(const lir::Node& n, const lir::KernelNode& kn, const Scope& s) {
  const lir::Kernel& k = p_.kernels[kn.kernel];
  const std::string w = where(n.loc, n.what);
  std::vector<std::string> pointers;
  for (size_t i = 0; i < kn.args.size(); ++i) {
    const lir::KernelArg& a = kn.args[i];
    const lir::KernelParam& q = k.params[i];
    std::string var = "arg" + std::to_string(i);
    switch (a.kind) {
      case lir::ArgKind::Value:
        line(std::string(k.generated ? expr::storage_type(q.elem) : cuda_type(q.elem)) + " " + var + " = " +
             (k.generated ? generated_arg(a.value, q.elem, w) : host_as(a.value, q.elem, w)) +
             ";  // " + comment_text(q.name + " = " + a.value.text));
        pointers.push_back("&" + var);
        break;
      case lir::ArgKind::Buffer:
        pointers.push_back("(void*)&b." + buffer_names_[a.ref]);
        break;
      case lir::ArgKind::CondHandle:
        pointers.push_back("&handle[" + std::to_string(a.ref) + "]");
        break;
      case lir::ArgKind::GraphExec: {
        const lir::Graph& t = p_.graphs[a.ref];
        std::string exec = "out->" + exec_names_[a.ref] + (t.family_size > 0 ? "[member]" : "");
        if (s.device && a.late && !patching_)
          line("cudaGraphExec_t " + var + " = nullptr;  // " + q.name + " = " +
               (a.self ? "self" : t.name) + ": set by orch_patch_" + graph_names_[s.graph] +
               "() after instantiation");
        else
          line("cudaGraphExec_t " + var + " = " + exec + ";  // " + q.name + " = " +
               (a.self ? "self" : t.name));
        pointers.push_back("&" + var);
        break;
      }
      case lir::ArgKind::GraphTable:
        pointers.push_back("(void*)&out->" + table_names_[a.ref]);
        break;
      case lir::ArgKind::Status:
        pointers.push_back("(void*)&out->orch_status");
        break;
    }
  }
  if (!pointers.empty()) {
    std::string list;
    for (const std::string& x : pointers) list += (list.empty() ? "" : ", ") + x;
    line("void* args[] = {" + list + "};");
  }
  line("cudaKernelNodeParams kernel = {};");
  // `::`: the kernel, whatever the locals here are called.
  std::string entry = k.entry.empty() ? k.name : k.entry;
  line("kernel.func = (void*)&" + (entry.rfind("::", 0) == 0 ? "" : std::string("::")) + entry +
       ";");
  std::string grid[3], block[3];
  for (int d = 0; d < 3; ++d) {
    grid[d] = dim(kn.grid[d], w);
    block[d] = dim(kn.block[d], w);
  }
  std::string shared = dim(kn.shared_bytes, w);
  line("kernel.gridDim = dim3(" + grid[0] + ", " + grid[1] + ", " + grid[2] + ");");
  line("kernel.blockDim = dim3(" + block[0] + ", " + block[1] + ", " + block[2] + ");");
  line("kernel.sharedMemBytes = " + shared + ";");
  line(std::string("kernel.kernelParams = ") + (pointers.empty() ? "nullptr;" : "args;"));
}

void Emitter::conditional(const lir::ConditionalNode& n, const Scope& s, const std::string& slot,
                 const std::string& deps, const std::string& w) {
  std::string cond = "cond" + (s.depth ? std::to_string(s.depth) : "");
  const char* type = n.type == lir::ConditionalType::If      ? "cudaGraphCondTypeIf"
                     : n.type == lir::ConditionalType::While ? "cudaGraphCondTypeWhile"
                                                             : "cudaGraphCondTypeSwitch";
  line("cudaGraphNodeParams " + cond + " = {};");
  line(cond + ".type = cudaGraphNodeTypeConditional;");
  line(cond + ".conditional.handle = handle[" + std::to_string(n.handle) + "];");
  line(cond + ".conditional.type = " + type + ";");
  line(cond + ".conditional.size = " + std::to_string(n.bodies.size()) + ";");
  line("ORCH_CHECK(cudaGraphAddNode(&" + slot + ", " + s.graph_var + ", " +
       (deps == "nullptr, 0"
            ? "nullptr, nullptr, 0"
            : deps.substr(0, deps.find(',')) + ", nullptr" + deps.substr(deps.find(','))) +
       ", &" + cond + "), " + w + ");");
  for (size_t i = 0; i < n.bodies.size(); ++i) {
    std::string what;
    switch (n.type) {
      case lir::ConditionalType::While:
        what = n.set_by_kernel
                   ? "the loop body, run until its kernel sets the handle to 0"
                   : "the loop body, run while the condition holds (it ends by evaluating it again)";
        break;
      case lir::ConditionalType::If:
        what = i == 0 ? "then: run when the condition is non-zero" : "else: run when it is zero";
        break;
      case lir::ConditionalType::Switch:
        what = i < n.cases.size()
                   ? "case " + n.cases[i].to_string() + " (body " + std::to_string(i) + ")"
                   : "default (body " + std::to_string(i) + "): any other value";
        break;
    }
    line("// " + what);
    open("{");
    Scope inner = s;
    inner.depth = s.depth + 1;
    inner.graph_var = "body" + std::to_string(inner.depth);
    line("cudaGraph_t " + inner.graph_var + " = " + cond + ".conditional.phGraph_out[" +
         std::to_string(i) + "];");
    region(n.bodies[i], inner);
    close();
  }
}

void Emitter::collective(const lir::CollectiveNode& n, const Scope& s, const std::string& slot,
                const std::string& deps, const std::string& w) {
  const lir::Buffer& src = p_.buffers[n.src];
  std::string type = nccl_type(src.elem);
  std::string comm = "p." + comm_names_[n.comm];
  std::string send = "b." + buffer_names_[n.src], recv = "b." + buffer_names_[n.dst];
  const std::string src_count = count_of(n.src, w), dst_count = count_of(n.dst, w);
  const std::string root = n.root ? "static_cast<int>(" + eval(*n.root, lir::ScalarType::U32, w) + ")" : "0";
  std::string call;
  switch (n.kind) {
    case lir::CollectiveKind::AllReduce:
      call = "ncclAllReduce(" + send + ", " + recv + ", " + src_count + ", " + type + ", " +
             nccl_op(n.op) + ", " + comm + ", capture)";
      break;
    case lir::CollectiveKind::Broadcast:
      call = "ncclBroadcast(" + send + ", " + recv + ", " + src_count + ", " + type + ", " +
             root + ", " +
             comm + ", capture)";
      break;
    case lir::CollectiveKind::AllGather:
      call = "ncclAllGather(" + send + ", " + recv + ", " + src_count + ", " + type + ", " +
             comm + ", capture)";
      break;
    case lir::CollectiveKind::ReduceScatter:
      call = "ncclReduceScatter(" + send + ", " + recv + ", " + dst_count + ", " + type +
             ", " + nccl_op(n.op) + ", " + comm + ", capture)";
      break;
  }
  // Captured after the node's dependencies; what depends on it waits for NCCL's last nodes
  // (joined by an empty node where there are several).
  const bool none = deps.rfind("nullptr", 0) == 0;
  const std::string count = deps.substr(deps.find(',') + 2);
  if (n.high_priority) {
    line("// Kernels may run beside it: NCCL's kernels (the kernel nodes its capture adds) at the");
    line("// device's greatest priority, first on the SMs.");
    line("size_t before_count = 0;");
    line("ORCH_CHECK(cudaGraphGetNodes(" + s.graph_var + ", nullptr, &before_count), " + w + ");");
    line("std::vector<cudaGraphNode_t> before(before_count);");
    line("ORCH_CHECK(cudaGraphGetNodes(" + s.graph_var + ", before.data(), &before_count), " + w + ");");
  }
  line("ORCH_CHECK(cudaStreamUpdateCaptureDependencies(capture, " +
       std::string(none ? "nullptr" : "const_cast<cudaGraphNode_t*>(deps)") + ", nullptr, " + count +
       ", cudaStreamSetCaptureDependencies), " + w + ");");
  line("ORCH_NCCL_CHECK(" + call + ", " + w + ");");
  line("cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;");
  line("const cudaGraphNode_t* last = nullptr;");
  line("size_t nlast = 0;");
  line("ORCH_CHECK(cudaStreamGetCaptureInfo(capture, &status, nullptr, nullptr, &last, nullptr, &nlast), " + w +
       ");");
  line("if (status != cudaStreamCaptureStatusActive || nlast == 0) ORCH_CHECK(cudaErrorStreamCaptureInvalidated, " +
       w + ");");
  line("if (nlast == 1) " + slot + " = last[0];");
  line("else ORCH_CHECK(cudaGraphAddEmptyNode(&" + slot + ", " + s.graph_var + ", last, nlast), " + w + ");");
  if (n.high_priority) {
    line("size_t after_count = 0;");
    line("ORCH_CHECK(cudaGraphGetNodes(" + s.graph_var + ", nullptr, &after_count), " + w + ");");
    line("std::vector<cudaGraphNode_t> after(after_count);");
    line("ORCH_CHECK(cudaGraphGetNodes(" + s.graph_var + ", after.data(), &after_count), " + w + ");");
    line("int least = 0, greatest = 0;");
    line("ORCH_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest), " + w + ");");
    open("for (cudaGraphNode_t made : after) {");
    line("if (std::find(before.begin(), before.end(), made) != before.end()) continue;");
    line("cudaGraphNodeType type = cudaGraphNodeTypeEmpty;");
    line("ORCH_CHECK(cudaGraphNodeGetType(made, &type), " + w + ");");
    line("if (type != cudaGraphNodeTypeKernel) continue;");
    line("cudaLaunchAttributeValue priority = {};");
    line("priority.priority = greatest;");
    line("ORCH_CHECK(cudaGraphKernelNodeSetAttribute(made, cudaLaunchAttributePriority, &priority), " + w + ");");
    close();
  }
}

}  // namespace orch::eject

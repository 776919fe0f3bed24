// validate()'s rules for each op kind's table (kernel, memcpy, memset, conditional,
// collective) and for a kernel node's arguments.
#include <string>

#include "artifact/validate_internal.h"

namespace orch::artifact::detail {

namespace {

// Which argument kind binds which kernel parameter kind.
fb::ArgKind arg_kind_for(fb::KernelParamKind kind) {
  switch (kind) {
    case fb::KernelParamKind::Value:
      return fb::ArgKind::Value;
    case fb::KernelParamKind::Scalar:
    case fb::KernelParamKind::Array:
      return fb::ArgKind::Buffer;
    case fb::KernelParamKind::Cond:
      return fb::ArgKind::CondHandle;
    case fb::KernelParamKind::Graph:
      return fb::ArgKind::GraphExec;
    case fb::KernelParamKind::GraphFamily:
      return fb::ArgKind::GraphTable;
    case fb::KernelParamKind::Status:
      return fb::ArgKind::Status;
  }
  return fb::ArgKind::Value;
}

}  // namespace

bool Validator::check_kernel_node(const fb::KernelOp* node, bool in_body) {
  const int kernel_index = node->kernel();
  if (!in_table(kernel_index, n_kernels_))
    return fail_here(range_problem("kernel index", kernel_index, n_kernels_, "kernel"));
  const fb::Kernel* kernel = kernels_->Get(kernel_index);
  // CUDA dynamic parallelism is not permitted in a graph instantiated for device launch (doc
  // comment of cudaGraphInstantiate) nor in a conditional body (CUDA C++ Programming Guide,
  // "Conditional Node Body Graph Requirements", which also forbids device graph launch).
  if (kernel->launches_kernels()) {
    if (top_device_)
      return fail_here(kernel_label(node->kernel()) +
                       " launches kernels from the device, which a device graph cannot hold");
    if (in_body)
      return fail_here(kernel_label(node->kernel()) +
                       " launches kernels from the device, which a conditional body cannot hold");
    top_launcher_ = true;
  }
  bool launches_graphs = false;
  const auto* args = node->args();
  for (uint32_t j = 0; j < size_of(args); ++j) {
    const fb::ArgKind k = args->Get(j)->kind();
    launches_graphs |= k == fb::ArgKind::GraphExec || k == fb::ArgKind::GraphTable;
  }
  if (launches_graphs) {
    if (in_body)
      return fail_here(kernel_label(node->kernel()) +
                       " launches graphs from the device, which a conditional body cannot hold");
    top_launcher_ = true;
  }
  // A launch shape of constants (any u32 is well formed; the runtime checks the ranges when
  // it builds the node, as it does an expression's value), or the expressions.
  if (node->launch()) {
    if (!charge(sizeof(fb::LaunchShape))) return false;
    if (node->grid() || node->block() || node->shared_bytes())
      return fail_here("a kernel node has both a launch shape and grid, block or shared_bytes expressions");
  } else {
    const struct {
      const char* name;
      const flatbuffers::Vector<flatbuffers::Offset<fb::Expr>>* exprs;
    } shapes[] = {{"grid", node->grid()}, {"block", node->block()}};
    for (const auto& shape : shapes) {
      const uint32_t n = size_of(shape.exprs);
      if (n != 3) {
        return fail_here(std::string(shape.name) + " has " + plural(n, "expression") +
                         ", expected 3");
      }
      for (uint32_t j = 0; j < 3; ++j) {
        if (!check_node_expr(shape.exprs->Get(j), true, shape.name, static_cast<int>(j))) {
          return false;
        }
      }
    }
    if (!check_node_expr(node->shared_bytes(), false, "shared_bytes")) return false;
  }
  if (!check_node_expr(node->cost_bytes(), false, "cost_bytes")) return false;
  if (!check_node_expr(node->cost_flops(), false, "cost_flops")) return false;

  const auto* params = kernel->params();
  const uint32_t n_params = size_of(params);
  const uint32_t n_args = size_of(args);
  if (n_args != n_params) {
    return fail_here(kernel_label(node->kernel()) + " takes " + plural(n_params, "argument") +
                     ", the node passes " + std::to_string(n_args));
  }
  for (uint32_t j = 0; j < n_args; ++j) {
    Scope scope(*this, FrameKind::Arg, j);
    if (!check_arg(args->Get(j), params->Get(j))) return false;
  }
  return true;
}

bool Validator::check_arg(const fb::KernelArg* arg, const fb::KernelParam* param) {
  if (!charge(8)) return false;
  const fb::ArgKind kind = arg->kind();
  if (!in_range(kind)) {
    return fail_here("unknown argument kind " + std::to_string(static_cast<unsigned>(kind)));
  }
  if (kind != arg_kind_for(param->kind())) {
    return fail_here(std::string("a ") + fb::EnumNameArgKind(kind) +
                     " argument cannot bind kernel param '" + printable(param->name()) +
                     "' of kind " + fb::EnumNameKernelParamKind(param->kind()));
  }
  const int ref = arg->ref();
  if (arg->late() && kind != fb::ArgKind::GraphExec)
    return fail_here(std::string("a ") + fb::EnumNameArgKind(kind) +
                     " argument is marked late; only a GraphExec argument can be set after instantiation");
  switch (kind) {
    case fb::ArgKind::Value: {
      if (!in_range(arg->type())) {
        return fail_here("unknown argument type " +
                         std::to_string(static_cast<unsigned>(arg->type())));
      }
      if (arg->type() != param->type()) {
        return fail_here("argument type " + type_name(arg->type()) +
                         " does not match kernel param '" + printable(param->name()) +
                         "' of type " + type_name(param->type()));
      }
      return check_node_expr(arg->value(), true, "value");
    }
    case fb::ArgKind::Buffer:
      return check_buffer_ref("buffer index", ref);
    case fb::ArgKind::CondHandle: {
      std::string problem = range_problem("handle index", ref, n_handles_, "handle");
      if (!problem.empty()) return fail_here(problem);
      // cudaGraphSetConditional: the handle must belong to the graph the kernel runs in.
      const int owner = handles_->Get(ref)->graph();
      if (owner != static_cast<int>(top_)) {
        return fail_here("conditional handle " + std::to_string(ref) + " belongs to " +
                         graph_label(owner) + ", not to " + graph_label(top_) +
                         " which holds this kernel");
      }
      return true;
    }
    case fb::ArgKind::GraphExec: {
      if (ref == -1) {
        if (!top_device_)
          return fail_here("a graph exec of the graph itself (ref -1) is only valid in a device graph");
        return check_late(arg, ref);
      }
      std::string problem = range_problem("graph index", ref, n_graphs_, "graph");
      if (!problem.empty()) return fail_here(problem);
      const fb::Graph* g = graphs_->Get(ref);
      if (!g->device()) {
        return fail_here(graph_label(ref) +
                         " is not a device graph, so a kernel cannot launch it");
      }
      if (g->family_size() > 0) {
        return fail_here(graph_label(ref) + " is a graph family; pass it as a GraphTable");
      }
      return check_late(arg, ref);
    }
    case fb::ArgKind::GraphTable: {
      std::string problem = range_problem("graph index", ref, n_graphs_, "graph");
      if (!problem.empty()) return fail_here(problem);
      if (graphs_->Get(ref)->family_size() == 0) {
        return fail_here(graph_label(ref) + " is not a graph family (family_size 0)");
      }
      return true;
    }
    case fb::ArgKind::Status:
      return true;  // the runtime's record; nothing to look up
  }
  return true;
}

bool Validator::check_memcpy(const fb::MemcpyOp* node) {
  if (!check_buffer_ref("memcpy source buffer index", node->src())) return false;
  if (!check_buffer_ref("memcpy destination buffer index", node->dst())) return false;
  if (node->src() == node->dst()) {
    return fail_here("memcpy source and destination are the same " + buffer_label(node->src()));
  }
  return true;
}

bool Validator::check_memset(const fb::MemsetOp* node) {
  if (!check_buffer_ref("memset buffer index", node->dst())) return false;
  const unsigned size = node->element_size();
  if (size != 1 && size != 2 && size != 4) {
    return fail_here("memset element size " + std::to_string(size) + " is not 1, 2 or 4");
  }
  if (size < 4 && node->value() >> (8 * size) != 0) {
    return fail_here("memset value " + std::to_string(node->value()) +
                     " does not fit in " + plural(size, "byte"));
  }
  const size_t element = scalar_size(buffers_->Get(node->dst())->type());
  if (element % size != 0) {
    return fail_here("memset element size " + std::to_string(size) + " does not divide the " +
                     std::to_string(element) + "-byte elements of " + buffer_label(node->dst()));
  }
  return true;
}

bool Validator::check_conditional(const fb::ConditionalOp* node, uint32_t depth) {
  if (top_device_) return fail_here("a device graph cannot hold a conditional node");
  const fb::ConditionalType type = node->type();
  if (!in_range(type)) {
    return fail_here("unknown conditional type " + std::to_string(static_cast<unsigned>(type)));
  }
  const uint32_t n = size_of(node->bodies());
  switch (type) {
    case fb::ConditionalType::If:
      if (n < 1 || n > 2)
        return fail_here("If conditional has " + plural(n, "body", "bodies") +
                         ", expected 1 or 2");
      break;
    case fb::ConditionalType::While:
      if (n != 1)
        return fail_here("While conditional has " + plural(n, "body", "bodies") + ", expected 1");
      break;
    case fb::ConditionalType::Switch:
      if (n < 1) return fail_here("Switch conditional has no bodies, expected at least 1");
      break;
  }
  const int h = node->handle();
  std::string problem = range_problem("conditional handle index", h, n_handles_, "handle");
  if (!problem.empty()) return fail_here(problem);
  const int owner = handles_->Get(h)->graph();
  if (owner != static_cast<int>(top_)) {
    return fail_here("conditional handle " + std::to_string(h) + " belongs to " +
                     graph_label(owner) + ", not to " + graph_label(top_) +
                     " which holds this node");
  }
  if (handle_users_[h]++ > 0) {
    return fail_here("conditional handle " + std::to_string(h) +
                     " is already used by another conditional node (a handle drives one node)");
  }
  for (uint32_t b = 0; b < n; ++b) {
    Scope scope(*this, FrameKind::Body, b);
    const fb::Graph* body = node->bodies()->Get(b);
    if (depth + 1 > kMaxGraphDepth) {
      return fail_here("conditional bodies are nested more than " +
                       std::to_string(kMaxGraphDepth) + " deep");
    }
    if (body->device()) return fail_here("a conditional body cannot be a device graph");
    if (body->family_size() > 0) return fail_here("a conditional body cannot be a graph family");
    if (!check_graph(body, depth + 1, true)) return false;
  }
  return true;
}

bool Validator::check_collective(const fb::CollectiveOp* node, bool in_body) {
  if (top_device_) return fail_here("a device graph cannot hold a collective");
  if (in_body) {
    return fail_here("a collective cannot be inside a conditional body (ranks could diverge)");
  }
  if (!in_range(node->collective())) {
    return fail_here("unknown collective kind " +
                     std::to_string(static_cast<unsigned>(node->collective())));
  }
  if (!in_range(node->reduce_op())) {
    return fail_here("unknown reduce op " +
                     std::to_string(static_cast<unsigned>(node->reduce_op())));
  }
  std::string problem = range_problem("comm index", node->comm(), n_comms_, "comm");
  if (!problem.empty()) return fail_here(problem);
  if (!check_buffer_ref("collective source buffer index", node->src())) return false;
  if (!check_buffer_ref("collective destination buffer index", node->dst())) return false;
  const bool needs_root = node->collective() == fb::CollectiveKind::Broadcast;
  return check_node_expr(node->root(), needs_root, "root");
}

}  // namespace orch::artifact::detail

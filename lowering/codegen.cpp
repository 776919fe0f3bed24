#include "lowering/codegen.h"

#include <sstream>

#include "compiler/dag.h"

namespace orch::lowering {

// One line per definition: --emit=cuda writes the generated kernels' preamble lines once each.
// The first error wins (atomicCAS on code); count counts every report. Codes are
// fb::DeviceError (artifact/pipeline.fbs): 1 a device graph launch failed (detail: the
// cudaError_t), 2 a family index out of range (detail: the index), 3 an expression could not be
// evaluated (detail: the expression's error code).
const char* const kDeviceStatusPreamble =
    R"(struct OrchDeviceStatus { unsigned code; unsigned site; unsigned detail; unsigned count; };
__device__ __forceinline__ void orch_report_error(OrchDeviceStatus* s, unsigned code, unsigned site, unsigned detail) { if (atomicCAS(&s->code, 0u, code) == 0u) { s->site = site; s->detail = detail; } atomicAdd(&s->count, 1u); __threadfence_system(); }
#define orch_expr_error(code) orch_report_error(orch_status, 3u, orch_site, (unsigned)(code))
)";

namespace {

bool host_only(const ir::Expr& e) {
  if (e.kind == ir::ExprKind::DeviceScalar) return false;
  for (const ir::Expr& o : e.operands)
    if (!host_only(o)) return false;
  return true;
}

}  // namespace

const char* cuda_type(ir::ScalarType t) {
  switch (t) {
    case ir::ScalarType::U8:
      return "unsigned char";
    case ir::ScalarType::U16:
      return "unsigned short";
    case ir::ScalarType::U32:
      return "unsigned";
    case ir::ScalarType::U64:
      return "unsigned long long";
    case ir::ScalarType::I8:
      return "signed char";
    case ir::ScalarType::I16:
      return "short";
    case ir::ScalarType::I32:
      return "int";
    case ir::ScalarType::I64:
      return "long long";
    case ir::ScalarType::F16:
      return "__half";
    case ir::ScalarType::BF16:
      return "__nv_bfloat16";
    case ir::ScalarType::F32:
      return "float";
    case ir::ScalarType::F64:
      return "double";
    case ir::ScalarType::Bool:
      return "bool";
  }
  return "int";
}

ir::Expr int_constant(int64_t v, ir::ScalarType type) { return ir::constant(ir::Value::of_int(type, v)); }

std::string GeneratedKernel::buffer(int buffer, bool write) {
  const ir::Buffer& b = program_.buffers[buffer];
  for (size_t i = 0; i < args_.size(); ++i) {
    if (args_[i].kind == ir::ArgKind::Buffer && args_[i].ref == buffer) {
      // Seen before: widen the access if needed.
      if (write && params_[i].access == ir::Access::In) {
        params_[i].access = ir::Access::InOut;
        param_code_[i] = std::string(expr::storage_type(b.elem)) + "* b" + std::to_string(buffer);
      }
      for (ir::BufferAccess& a : accesses_)
        if (a.buffer == buffer) a.write |= write;
      return "b" + std::to_string(buffer);
    }
  }
  ir::KernelParam p;
  p.name = "b" + std::to_string(buffer);
  p.kind = b.is_scalar() ? ir::KernelParamKind::Scalar : ir::KernelParamKind::Array;
  p.access = write ? ir::Access::InOut : ir::Access::In;
  p.elem = b.elem;
  params_.push_back(p);
  ir::KernelArg a;
  a.kind = ir::ArgKind::Buffer;
  a.ref = buffer;
  args_.push_back(a);
  // f16 and bf16 as their bits: expr/'s preamble reads and writes them (no cuda_fp16.h).
  param_code_.push_back(std::string(write ? "" : "const ") + expr::storage_type(b.elem) + "* " + p.name);
  accesses_.push_back({buffer, !write, write});
  return p.name;
}

std::string GeneratedKernel::handle(int handle) {
  ir::KernelParam p;
  p.name = "h" + std::to_string(handle);
  p.kind = ir::KernelParamKind::Cond;
  params_.push_back(p);
  ir::KernelArg a;
  a.kind = ir::ArgKind::CondHandle;
  a.ref = handle;
  args_.push_back(a);
  param_code_.push_back("cudaGraphConditionalHandle " + p.name);
  return p.name;
}

std::string GeneratedKernel::graph(int graph, bool family, bool self) {
  ir::KernelParam p;
  p.name = "g" + std::to_string(params_.size());
  p.kind = family ? ir::KernelParamKind::GraphFamily : ir::KernelParamKind::Graph;
  p.family_size = family ? program_.graphs[graph].family_size : 0;
  params_.push_back(p);
  ir::KernelArg a;
  a.kind = family ? ir::ArgKind::GraphFamily : ir::ArgKind::Graph;
  a.ref = graph;
  a.self = self;
  args_.push_back(a);
  param_code_.push_back(family ? "const cudaGraphExec_t* " + p.name : "cudaGraphExec_t " + p.name);
  return p.name;
}

std::string GeneratedKernel::value(const ir::Expr& e, ir::ScalarType type) {
  ir::KernelParam p;
  p.name = "v" + std::to_string(params_.size());
  p.kind = ir::KernelParamKind::Value;
  p.elem = type;
  params_.push_back(p);
  ir::KernelArg a;
  a.kind = ir::ArgKind::Value;
  a.value = e;
  args_.push_back(a);
  param_code_.push_back(std::string(expr::storage_type(type)) + " " + p.name);
  return p.name;
}

void GeneratedKernel::status(const SourceRange& loc, const std::vector<SourceRange>& call_stack,
                             const std::string& what) {
  if (site_ >= 0) return;
  site_ = static_cast<int>(program_.status_sites.size());
  program_.status_sites.push_back({loc, call_stack, what});
  ir::KernelParam p;
  p.name = "orch_status";
  p.kind = ir::KernelParamKind::Status;
  params_.push_back(p);
  ir::KernelArg a;
  a.kind = ir::ArgKind::Status;
  args_.push_back(a);
  param_code_.push_back("OrchDeviceStatus* orch_status");
}

// Postfix code of `e` for the device: anything the host can compute becomes one value argument
// (a leaf read from its parameter), device scalars are read through their pointers.
void GeneratedKernel::postfix(const ir::Expr& e, std::vector<expr::Instr>& code,
                              std::vector<std::string>& leaves) {
  expr::Instr leaf;
  leaf.kind = expr::InstrKind::Param;  // a leaf whose code is leaves[ref]
  leaf.type = e.type;
  if (e.kind == ir::ExprKind::Const) {
    leaf.kind = expr::InstrKind::Const;
    leaf.value = e.value;
    code.push_back(leaf);
    return;
  }
  if (host_only(e)) {
    leaf.ref = static_cast<int32_t>(leaves.size());
    leaves.push_back(expr::from_storage(e.type, value(e, e.type)));
    code.push_back(leaf);
    return;
  }
  if (e.kind == ir::ExprKind::DeviceScalar) {
    leaf.ref = static_cast<int32_t>(leaves.size());
    leaves.push_back(expr::from_storage(e.type, "*" + buffer(e.ref, false)));
    code.push_back(leaf);
    return;
  }
  for (const ir::Expr& o : e.operands) postfix(o, code, leaves);
  expr::Instr op;
  op.kind = expr::InstrKind::Operator;
  op.op = e.op;
  op.type = e.type;
  code.push_back(op);
}

std::string GeneratedKernel::expr(const ir::Expr& e) {
  std::vector<expr::Instr> code;
  std::vector<std::string> leaves;
  postfix(e, code, leaves);
  return expr::print(code, [&](const expr::Instr& in) { return leaves[in.ref]; });
}

ir::Node GeneratedKernel::finish(const SourceRange& loc,
                                 const std::vector<SourceRange>& call_stack) {
  return finish_with_shape(loc, call_stack, int_constant(1), int_constant(1));
}

ir::Node GeneratedKernel::finish_with_shape(const SourceRange& loc,
                                            const std::vector<SourceRange>& call_stack,
                                            ir::Expr grid, ir::Expr block) {
  if (site_ < 0 && body_.find("orch_expr_error(") != std::string::npos)
    status(loc, call_stack, "an expression evaluated by " + name_);
  std::string code = "// Generated by orchc.\n";
  // Before expr/'s preamble, whose no-op orch_expr_error steps aside for this one's macro.
  if (site_ >= 0) code += kDeviceStatusPreamble;
  code += expr::preamble();
  code += "extern \"C\" __global__ void " + name_ + "(";
  for (size_t i = 0; i < param_code_.size(); ++i) code += (i ? ", " : "") + param_code_[i];
  code += ") {\n";
  if (site_ >= 0) code += "  const unsigned orch_site = " + std::to_string(site_) + "u;\n";
  code += body_ + "}\n";

  ir::Kernel k;
  k.name = name_;
  k.entry = name_;
  k.params = params_;
  k.inline_source = true;
  k.source = code;
  k.generated = true;
  k.loc = loc;
  for (const ir::KernelParam& p : params_)
    k.uses_device_runtime |= p.kind == ir::KernelParamKind::Cond ||
                             p.kind == ir::KernelParamKind::Graph ||
                             p.kind == ir::KernelParamKind::GraphFamily;
  program_.kernels.push_back(std::move(k));

  ir::Node node;
  node.kind = ir::NodeKind::Kernel;
  node.loc = loc;
  node.call_stack = call_stack;
  node.kernel = static_cast<int>(program_.kernels.size() - 1);
  node.grid[0] = std::move(grid);
  node.block[0] = std::move(block);
  for (int i = 1; i < 3; ++i) node.grid[i] = node.block[i] = int_constant(1);
  node.shared_bytes = int_constant(0);
  node.args = args_;
  node.accesses = accesses_;
  return node;
}

}  // namespace orch::lowering

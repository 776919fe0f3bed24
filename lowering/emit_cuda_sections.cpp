// The ejected file's sections before its graphs: the header, the kernels, host helpers, the
// params/buffers/graphs structs, allocation and the bind checks.
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

void Emitter::header() {
  std::string path = sources_.path(p_.file);
  std::string base = path.substr(path.find_last_of('/') + 1);
  std::string stem = base.substr(0, base.find_last_of('.'));
  std::string arch = p_.targets.empty() ? "sm_90" : p_.targets.front();
  line("// " + comment_text("Pipeline `" + p_.name + "`, ejected from " + path +
                            " by `orchc --emit=cuda`."));
  line("//");
  line("// One standalone file: every kernel's source, then host code that builds the same CUDA");
  line("// graph as the orch runtime with plain CUDA runtime calls. It no longer needs orch.");
  line("//");
  line("//   nvcc -arch=" + arch + " -rdc=true " + stem + ".cu -lcudadevrt" +
       (has_collectives() ? " -lnccl" : "") + " -o " + stem);
  line("//");
  line("//   ./" + stem + " --in DIR --out DIR --launches N   (main: a harness, at the end of the file)");
  line("//");
  line("// Build with -DORCH_EJECT_NO_MAIN to use it as a library: allocate_" + fn_ +
       "() (or your own");
  line("// buffers), build_" + fn_ + "(), then launch_" + fn_ + "() as often as you like.");
  line(
      "// Comments name the .orch statement every node came from; errors print its "
      "file:line:col.");
  line();
  line("#include <cuda_runtime.h>");
  line("#include <cuda_fp16.h>");
  line("#include <cuda_bf16.h>");
  if (has_collectives()) line("#include <nccl.h>");
  line();
  line("#include <cmath>");
  line("#include <cstdint>");
  line("#include <cstdio>");
  line("#include <cstring>");
  if (has_collectives()) {  // a high-priority collective's capture lists the graph's nodes
    line("#include <algorithm>");
    line("#include <vector>");
  }
  line();
  line("// ==== Expression helpers (orch's expr/ops.h): every operator, checked, on the host and");
  line("// the device; printed expressions call them and get a value or an error code.");
  if (uses_status_) {
    line("// The device status record orchc's kernels report errors to (first, so that expr/'s");
    line("// no-op orch_expr_error steps aside for its macro).");
    out_ += lowering::kDeviceStatusPreamble;
  }
  out_ += expr::preamble();
  line();
}

void Emitter::kernels() {
  line(
      "// ==== Kernels "
      "==========================================================================");
  // Generated kernels start with expr/'s preamble, which the file holds once (above).
  std::vector<std::string> generated_bodies(p_.kernels.size());
  for (size_t i = 0; i < p_.kernels.size(); ++i) {
    const lir::Kernel& k = p_.kernels[i];
    if (!k.generated || !used_kernels_.count(static_cast<int>(i))) continue;
    size_t cut = k.source.find("extern \"C\"");
    if (cut == std::string::npos) cut = 0;
    generated_bodies[i] = k.source.substr(cut);
  }

  // User kernels: each `from` file once, each distinct inline source once.
  std::map<std::string, std::vector<size_t>> by_text;  // source text -> kernels
  std::vector<std::string> order;
  for (size_t i = 0; i < p_.kernels.size(); ++i) {
    const lir::Kernel& k = p_.kernels[i];
    if (k.generated) continue;
    auto [it, inserted] = by_text.emplace(k.source, std::vector<size_t>{});
    if (inserted) order.push_back(k.source);
    it->second.push_back(i);
  }
  for (const std::string& text : order) {
    const std::vector<size_t>& ks = by_text[text];
    const lir::Kernel& first = p_.kernels[ks.front()];
    std::string names;
    for (size_t i : ks) names += (names.empty() ? "" : ", ") + p_.kernels[i].name;
    line();
    if (!first.inline_source && !first.source_path.empty()) {
      line("// ---- " + comment_text(first.source_path) + " (kernel" +
           (ks.size() > 1 ? "s " : " ") + names + ")");
    } else {
      SourceRange where;
      where.file = first.source_file;
      where.begin = {first.source_first_line, first.source_first_col};
      line("// ---- kernel " + names + ": inline source at " +
           (first.source_file ? at(where) : at(first.loc)));
    }
    out_ += text;
    if (!text.empty() && text.back() != '\n') out_ += "\n";
  }

  bool any_generated = false;
  for (size_t i = 0; i < p_.kernels.size(); ++i)
    any_generated |= p_.kernels[i].generated && used_kernels_.count(static_cast<int>(i));
  if (any_generated) {
    line();
    line("// ---- kernels orchc wrote: conditions, scalar updates, fills and graph launches");
    for (size_t i = 0; i < p_.kernels.size(); ++i) {
      const lir::Kernel& k = p_.kernels[i];
      if (!k.generated || !used_kernels_.count(static_cast<int>(i))) continue;
      line();
      line("// " + generated_role(k) + " (" + at(k.loc) + ")");
      out_ += generated_bodies[i];
      if (!generated_bodies[i].empty() && generated_bodies[i].back() != '\n') out_ += "\n";
    }
  }
  line();
}

std::string Emitter::generated_role(const lir::Kernel& k) const {
  std::string s = statement(k.loc);
  if (k.name.rfind("orch_condition_", 0) == 0)
    return k.name + ": evaluates the condition of `" + s + "`";
  if (k.name.rfind("orch_update_", 0) == 0) return k.name + ": device scalar update `" + s + "`";
  if (k.name.rfind("orch_fill_", 0) == 0)
    return k.name + ": `" + s + "` (no memset pattern does it)";
  if (k.name.rfind("orch_launch_", 0) == 0) return k.name + ": `" + s + "` from the GPU";
  return k.name + ": `" + s + "`";
}

void Emitter::host_helpers() {
  line(
      "// ==== Host side "
      "========================================================================");
  line();
  line("// Size, launch-shape and argument expressions: a value, or the error is printed and the");
  line("// function returns (as the orch runtime refuses the values).");
  line("#define ORCH_EVAL(var, type, where, ...)                                               \\");
  line("  const orch_v<type> var = (__VA_ARGS__);                                              \\");
  line("  if (var.e) {                                                                         \\");
  line("    std::fprintf(stderr, \"%s: error: %s\\n\", where, orch_error_text(var.e));            \\");
  line("    return cudaErrorInvalidValue;                                                      \\");
  line("  }");
  line();
  line(
      "// Every CUDA call is checked: a failure prints the .orch statement it builds and "
      "returns.");
  line(
      "#define ORCH_CHECK(call, where)                                                          "
      "\\");
  line(
      "  do {                                                                                   "
      "\\");
  line(
      "    cudaError_t orch_err_ = (call);                                                      "
      "\\");
  line(
      "    if (orch_err_ != cudaSuccess) {                                                      "
      "\\");
  line(
      "      std::fprintf(stderr, \"%s: %s failed: %s (%s)\\n\", where, #call,                   "
      "\\");
  line(
      "                   cudaGetErrorName(orch_err_), cudaGetErrorString(orch_err_));         "
      "\\");
  line(
      "      return orch_err_;                                                                  "
      "\\");
  line(
      "    }                                                                                    "
      "\\");
  line("  } while (0)");
  line("// Passes on an error that was already reported.");
  line("#define ORCH_TRY(call)                          \\");
  line("  do {                                          \\");
  line("    cudaError_t orch_err_ = (call);             \\");
  line("    if (orch_err_ != cudaSuccess) return orch_err_; \\");
  line("  } while (0)");
  if (has_collectives()) {
    line(
        "#define ORCH_NCCL_CHECK(call, where)                                                    "
        " \\");
    line(
        "  do {                                                                                  "
        " \\");
    line(
        "    ncclResult_t orch_nccl_ = (call);                                                   "
        " \\");
    line(
        "    if (orch_nccl_ != ncclSuccess) {                                                    "
        " \\");
    line(
        "      std::fprintf(stderr, \"%s: %s failed: %s\\n\", where, #call,                      "
        "  \\");
    line(
        "                   ncclGetErrorString(orch_nccl_));                                     "
        " \\");
    line(
        "      return cudaErrorUnknown;                                                          "
        " \\");
    line(
        "    }                                                                                   "
        " \\");
    line("  } while (0)");
  }
  line();
}

void Emitter::structs() {
  // Params
  line("// Host-set values (the .orch `param`s, with their defaults).");
  open("struct " + params_type() + " {");
  for (size_t i = 0; i < p_.params.size(); ++i) {
    const lir::Param& x = p_.params[i];
    std::string init = x.default_value ? literal(*x.default_value, x.type) : "{}";
    std::string what = "param " + x.name + ": " + expr::to_string(x.type);
    if (!x.default_text.empty())
      what += " = " + x.default_text;
    else
      what += "  (no default: set it)";
    line(std::string(cuda_type(x.type)) + " " + param_names_[i] + " = " + init + ";  // " +
         comment_text(what + "  (" + at(x.loc) + ")"));
  }
  for (size_t i = 0; i < p_.comms.size(); ++i)
    line("ncclComm_t " + comm_names_[i] + " = nullptr;  // comm " + p_.comms[i].name +
         ": an NCCL communicator you create (" + at(p_.comms[i].loc) + ")");
  if (!rank_.empty()) {
    line("int " + rank_ + " = 0;        // this process's rank in the communicator");
    line("int " + world_size_ + " = 1;  // the communicator's size");
  }
  close("};");
  line();

  // Buffers
  line("// Device pointers of every buffer: allocate_" + fn_ +
       "() fills them, or point them at your own memory.");
  open("struct " + buffers_type() + " {");
  for (size_t i = 0; i < p_.buffers.size(); ++i) {
    const lir::Buffer& b = p_.buffers[i];
    std::string type = std::string(cuda_type(b.elem)) + "*";
    std::string what = "buffer " + b.name + ": " + expr::to_string(b.elem) +
                       (b.count ? "[" + b.count->text + "]" : "") +
                       (b.host ? " host" : "");
    std::string note = b.is_scalar() ? ", a device scalar" : "";
    if (b.host) note = ", pinned mapped host memory (device address)";
    line(type + " " + buffer_names_[i] + " = nullptr;  // " +
         comment_text(what + note + "  (" + at(b.loc) + ")"));
    if (b.host)
      line(type + " " + host_names_[i] + " = nullptr;  // the same memory at its host address");
  }
  close("};");
  line();

  // Graphs
  line("// The CUDA graphs and executable graphs build_" + fn_ + "() makes; destroy_" + fn_ +
       "() releases them.");
  open("struct " + graphs_type() + " {");
  for (int g : device_order_) {
    const lir::Graph& x = p_.graphs[g];
    std::string n = graph_names_[g];
    if (x.family_size > 0) {
      std::string size = std::to_string(x.family_size);
      line("// graph " + x.name + "[" + x.family_index + ": " + size +
           "] device: one graph per member, instantiated for device launch");
      line("cudaGraph_t " + n + "[" + size + "] = {};");
      line("cudaGraphExec_t " + exec_names_[g] + "[" + size + "] = {};");
      line("cudaGraphExec_t* " + table_names_[g] + " = nullptr;  // device array of " +
           exec_names_[g] + ", for graph[" + size + "] arguments");
      if (!patch_names_[g].empty())
        line("cudaGraphNode_t " + patch_names_[g] + "[" + size + "][" +
             std::to_string(late_nodes_[g].size()) +
             "] = {};  // kernel nodes whose graph arguments are set after instantiation");
    } else {
      line("// graph " + x.name + " device: instantiated for device launch");
      line("cudaGraph_t " + n + " = nullptr;");
      line("cudaGraphExec_t " + exec_names_[g] + " = nullptr;");
      if (!patch_names_[g].empty())
        line("cudaGraphNode_t " + patch_names_[g] + "[1][" +
             std::to_string(late_nodes_[g].size()) +
             "] = {};  // kernel nodes whose graph arguments are set after instantiation");
    }
  }
  if (p_.segments.size() > 1)
    line(
        "// host graphs, launched in this order (main is split where one executable graph cannot "
        "hold it all)");
  else
    line("// the host graph");
  for (int s : p_.segments) {
    line("cudaGraph_t " + graph_names_[s] + " = nullptr;");
    line("cudaGraphExec_t " + exec_names_[s] + " = nullptr;");
  }
  if (uses_status_)
    line("OrchDeviceStatus* orch_status = nullptr;  // device memory: where orchc's kernels "
         "report errors (device_status_" + fn_ + "())");
  close("};");
  line();
}

void Emitter::allocate() {
  bool any_device = false, any_host = false;
  for (const lir::Buffer& b : p_.buffers) (b.host ? any_host : any_device) = true;
  if (any_device) alloc_device_helper();
  if (any_host) alloc_mapped_helper();
  allocate_function();
}

void Emitter::alloc_device_helper() {
  open(
      "static cudaError_t orch_alloc_device(void** ptr, unsigned long long count, size_t element, "
      "const char* where) {");
  line("if (count < 1 || count > SIZE_MAX / element) {");
  line("  std::fprintf(stderr, \"%s: error: size %llu is not positive or too large\\n\", where, count);");
  line("  return cudaErrorInvalidValue;");
  line("}");
  line("size_t bytes = static_cast<size_t>(count) * element;");
  line("ORCH_CHECK(cudaMalloc(ptr, bytes), where);");
  line("ORCH_CHECK(cudaMemset(*ptr, 0, bytes), where);");
  line("return cudaSuccess;");
  close();
  line();
}

void Emitter::alloc_mapped_helper() {
  open(
      "static cudaError_t orch_alloc_mapped(void** device, void** host, unsigned long long count, "
      "size_t element,");
  line("                                     const char* where) {");
  line("if (count < 1 || count > SIZE_MAX / element) {");
  line("  std::fprintf(stderr, \"%s: error: size %llu is not positive or too large\\n\", where, count);");
  line("  return cudaErrorInvalidValue;");
  line("}");
  line("size_t bytes = static_cast<size_t>(count) * element;");
  line("ORCH_CHECK(cudaHostAlloc(host, bytes, cudaHostAllocMapped), where);");
  line("std::memset(*host, 0, bytes);");
  line("ORCH_CHECK(cudaHostGetDevicePointer(device, *host, 0), where);");
  line("return cudaSuccess;");
  close();
  line();
}

void Emitter::allocate_function() {
  const std::string n = std::to_string(p_.buffers.size());
  line("// Elements of every buffer (in declaration order), computed from the params; a device");
  line("// scalar has one.");
  open("cudaError_t buffer_counts_" + fn_ + "(const " + params_type() +
       "& p, unsigned long long* count) {");
  unused_guard();
  if (p_.buffers.empty()) line("(void)count;");
  for (size_t i = 0; i < p_.buffers.size(); ++i) {
    const lir::Buffer& b = p_.buffers[i];
    line("count[" + std::to_string(i) + "] = " +
         count_of(static_cast<int>(i), where(b.loc, "buffer " + b.name)) + ";");
  }
  line("return cudaSuccess;");
  close();
  line();
  line("// Allocates every buffer, sized with the params, and zeroes it.");
  open("cudaError_t allocate_" + fn_ + "(const " + params_type() + "& p, " + buffers_type() +
       "* b) {");
  if (p_.buffers.empty()) line("(void)b;");
  line("unsigned long long count[" + std::string(p_.buffers.empty() ? "1" : n) + "] = {};");
  line("ORCH_TRY(buffer_counts_" + fn_ + "(p, count));");
  for (size_t i = 0; i < p_.buffers.size(); ++i) {
    const lir::Buffer& b = p_.buffers[i];
    std::string w = where(b.loc, "buffer " + b.name);
    std::string count = "count[" + std::to_string(i) + "]";
    std::string size = "sizeof(" + std::string(cuda_type(b.elem)) + ")";
    if (b.host)
      line("ORCH_TRY(orch_alloc_mapped((void**)&b->" + buffer_names_[i] + ", (void**)&b->" +
           host_names_[i] + ", " + count + ", " + size + ", " + w + "));");
    else
      line("ORCH_TRY(orch_alloc_device((void**)&b->" + buffer_names_[i] + ", " + count + ", " +
           size + ", " + w + "));");
  }
  line("return cudaSuccess;");
  close();
  line();
  line("// Frees what allocate_" + fn_ + "() allocated.");
  open("void free_" + fn_ + "(" + buffers_type() + "* b) {");
  if (p_.buffers.empty()) line("(void)b;");
  for (size_t i = 0; i < p_.buffers.size(); ++i) {
    if (p_.buffers[i].host)
      line("if (b->" + host_names_[i] + ") cudaFreeHost(b->" + host_names_[i] + ");");
    else
      line("if (b->" + buffer_names_[i] + ") cudaFree(b->" + buffer_names_[i] + ");");
  }
  line("*b = " + buffers_type() + "{};");
  close();
  line();
}

void Emitter::bind_checks() {
  line("// What the compiler proved with the defaults, checked again with the params you set.");
  open("static cudaError_t orch_check_params(const " + params_type() + "& p) {");
  unused_guard();
  for (const lir::BindCheck& c : p_.bind_checks) {
    if (c.always_holds) continue;  // true whatever the params: nothing to check
    // A check that uses a family's index holds for every member.
    if (c.family_size > 0) {
      open("for (int member = 0; member < " + std::to_string(c.family_size) + "; ++member) {");
      in_family_ = true;
    }
    std::string holds = eval(c.condition, lir::ScalarType::Bool,
                             c_string(at(c.loc) + ": " + c.code + " (" + c.message + ")"));
    open("if (!" + holds + ") {");
    line("std::fprintf(stderr, \"%s\\n\", " +
         c_string(at(c.loc) + ": error[" + c.code + "]: " + c.message + " (" +
                  c.condition.text + ")") +
         ");");
    line("return cudaErrorInvalidValue;");
    close();
    if (c.family_size > 0) {
      in_family_ = false;
      close();
    }
  }
  line("return cudaSuccess;");
  close();
  line();
}

}  // namespace orch::eject

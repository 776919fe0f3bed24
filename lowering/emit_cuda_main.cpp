// The ejected file's end: build (instantiate every graph), launch and destroy, and a main()
// that parses params from the command line and runs the pipeline.
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

void Emitter::build() {
  line(
      "// Builds every graph of the pipeline with the given params and buffers: the device "
      "graphs");
  line(
      "// (instantiated for device launch and uploaded), then the host graph(s), instantiated "
      "and");
  line(
      "// uploaded. On failure the error is printed with the .orch statement and returned; call");
  line("// destroy_" + fn_ + "() either way.");
  open("cudaError_t build_" + fn_ + "(const " + params_type() + "& p, const " + buffers_type() +
       "& b, " + graphs_type() + "* out) {");
  line("ORCH_TRY(orch_check_params(p));");
  if (uses_status_) {
    line("// The record orchc's kernels report device-side errors in (the first one wins).");
    line("ORCH_CHECK(cudaMalloc(&out->orch_status, sizeof(OrchDeviceStatus)), " +
         where(p_.graphs[p_.main_graph].loc, "device status") + ");");
    line("ORCH_CHECK(cudaMemset(out->orch_status, 0, sizeof(OrchDeviceStatus)), " +
         where(p_.graphs[p_.main_graph].loc, "device status") + ");");
  }
  bool any_family = false;
  for (int g : device_order_) any_family |= p_.graphs[g].family_size > 0;
  if (any_family) {
    line(
        "// Tables of family execs, for kernels that take a whole family (graph[N] parameters).");
    for (int g : device_order_) {
      const lir::Graph& x = p_.graphs[g];
      if (x.family_size == 0) continue;
      line("ORCH_CHECK(cudaMalloc(&out->" + table_names_[g] + ", sizeof(out->" + exec_names_[g] +
           ")), " + where(x.loc, "graph " + x.name) + ");");
    }
  }
  if (!device_order_.empty()) {
    line("// Device graphs, each after the graphs its kernels take as arguments.");
    for (int g : device_order_) {
      const lir::Graph& x = p_.graphs[g];
      if (x.family_size > 0)
        line("for (int member = 0; member < " + std::to_string(x.family_size) +
             "; ++member) ORCH_TRY(orch_build_" + graph_names_[g] + "(p, b, out, member));");
      else
        line("ORCH_TRY(orch_build_" + graph_names_[g] + "(p, b, out));");
    }
    for (int g : device_order_) {
      if (late_nodes_[g].empty()) continue;
      const lir::Graph& x = p_.graphs[g];
      if (x.family_size > 0)
        line("for (int member = 0; member < " + std::to_string(x.family_size) +
             "; ++member) ORCH_TRY(orch_patch_" + graph_names_[g] + "(p, b, out, member));");
      else
        line("ORCH_TRY(orch_patch_" + graph_names_[g] + "(p, b, out));");
    }
    for (int g : device_order_) {
      const lir::Graph& x = p_.graphs[g];
      if (x.family_size == 0) continue;
      line("ORCH_CHECK(cudaMemcpy(out->" + table_names_[g] + ", out->" + exec_names_[g] +
           ", sizeof(out->" + exec_names_[g] + "), cudaMemcpyHostToDevice), " +
           where(x.loc, "graph " + x.name) + ");");
    }
    for (int g : device_order_) {
      const lir::Graph& x = p_.graphs[g];
      std::string w = where(x.loc, "graph " + x.name);
      if (x.family_size > 0)
        line("for (int member = 0; member < " + std::to_string(x.family_size) +
             "; ++member) ORCH_CHECK(cudaGraphUpload(out->" + exec_names_[g] + "[member], 0), " +
             w + ");");
      else
        line("ORCH_CHECK(cudaGraphUpload(out->" + exec_names_[g] + ", 0), " + w + ");");
    }
  }
  line(p_.segments.size() > 1 ? "// Host graphs, launched one after another."
                              : "// The host graph.");
  for (int s : p_.segments) line("ORCH_TRY(orch_build_" + graph_names_[s] + "(p, b, out));");
  line("return cudaSuccess;");
  close();
  line();
}

void Emitter::launch_and_destroy() {
  line("// One run of the pipeline: the host graph" +
       std::string(p_.segments.size() > 1 ? "s in order" : "") + " on `stream`.");
  open("cudaError_t launch_" + fn_ + "(const " + graphs_type() + "& g, cudaStream_t stream) {");
  for (int s : p_.segments)
    line("ORCH_CHECK(cudaGraphLaunch(g." + exec_names_[s] + ", stream), " +
         where(p_.graphs[s].loc, "graph " + p_.graphs[s].name) + ");");
  line("return cudaSuccess;");
  close();
  line();
  open("void destroy_" + fn_ + "(" + graphs_type() + "* g) {");
  for (int s : p_.segments) {
    line("if (g->" + exec_names_[s] + ") cudaGraphExecDestroy(g->" + exec_names_[s] + ");");
    line("if (g->" + graph_names_[s] + ") cudaGraphDestroy(g->" + graph_names_[s] + ");");
  }
  for (int d : device_order_) {
    const lir::Graph& x = p_.graphs[d];
    if (x.family_size > 0) {
      open("for (unsigned i = 0; i < " + std::to_string(x.family_size) + "; ++i) {");
      line("if (g->" + exec_names_[d] + "[i]) cudaGraphExecDestroy(g->" + exec_names_[d] +
           "[i]);");
      line("if (g->" + graph_names_[d] + "[i]) cudaGraphDestroy(g->" + graph_names_[d] + "[i]);");
      close();
      line("if (g->" + table_names_[d] + ") cudaFree(g->" + table_names_[d] + ");");
    } else {
      line("if (g->" + exec_names_[d] + ") cudaGraphExecDestroy(g->" + exec_names_[d] + ");");
      line("if (g->" + graph_names_[d] + ") cudaGraphDestroy(g->" + graph_names_[d] + ");");
    }
  }
  if (uses_status_) line("if (g->orch_status) cudaFree(g->orch_status);");
  line("*g = " + graphs_type() + "{};");
  close();
  line();
  if (!uses_status_) return;
  line("// After the stream has finished: the first error orchc's kernels met on the GPU (a device");
  line("// graph launch that failed, a family index out of range), printed with its .orch place.");
  open("cudaError_t device_status_" + fn_ + "(const " + graphs_type() + "& g) {");
  std::string sites;
  for (const lir::StatusSite& x : p_.status_sites)
    sites += (sites.empty() ? "" : ", ") + c_string(at(x.loc) + ": " + x.what);
  line("static const char* const sites[] = {" + sites + "};");
  line("static const char* const kinds[] = {\"no error\", \"device graph launch failed\", "
       "\"family index out of range\", \"expression error\"};");
  line("OrchDeviceStatus s = {};");
  line("cudaError_t e = cudaMemcpy(&s, g.orch_status, sizeof s, cudaMemcpyDeviceToHost);");
  line("if (e != cudaSuccess) return e;");
  line("if (s.code == 0) return cudaSuccess;");
  line("const char* kind = s.code < 4 ? kinds[s.code] : \"unknown device error\";");
  line("const char* site = s.site < sizeof sites / sizeof sites[0] ? sites[s.site] : \"<unknown site>\";");
  line("if (s.code == 1)");
  line("  std::fprintf(stderr, \"%s: error: %s: %s (%u report(s))\\n\", site, kind, "
       "cudaGetErrorName(static_cast<cudaError_t>(s.detail)), s.count);");
  line("else");
  line("  std::fprintf(stderr, \"%s: error: %s: %u (%u report(s))\\n\", site, kind, s.detail, "
       "s.count);");
  line("return cudaErrorLaunchFailure;");
  close();
  line();
}

std::string Emitter::param_parser(const lir::Param& x, const std::string& member) const {
  switch (x.type) {
    case lir::ScalarType::F16:
      return "orch_parse_real(value, &d) && ((p->" + member + " = __float2half(static_cast<float>(d))), true)";
    case lir::ScalarType::BF16:
      return "orch_parse_real(value, &d) && ((p->" + member +
             " = __float2bfloat16(static_cast<float>(d))), true)";
    case lir::ScalarType::F32:
      return "orch_parse_real(value, &d) && ((p->" + member + " = static_cast<float>(d)), true)";
    case lir::ScalarType::F64:
      return "orch_parse_real(value, &p->" + member + ")";
    case lir::ScalarType::Bool:
      return "orch_parse_bool(value, &p->" + member + ")";
    default:
      return "orch_parse_int(value, &p->" + member + ")";
  }
}

void Emitter::main_function() {
  const size_t n = p_.buffers.size();
  const std::string arrays = std::to_string(n == 0 ? 1 : n);
  line("#ifndef ORCH_EJECT_NO_MAIN");
  line("// A harness for the graph:");
  line("//");
  line("//   ./" + fn_ + " [--param NAME=VALUE]... [--in DIR] [--out DIR] [--launches N]");
  line("//");
  line("// sets the params given (the rest keep their defaults), allocates every buffer zeroed, fills");
  line("// each from DIR/<buffer>.bin of --in where that file exists (its size must be the buffer's),");
  line("// builds the graphs, launches them N times (default 1) and waits, then writes every buffer");
  line("// to DIR/<buffer>.bin of --out. Exit 0 on success, 1 on an error, 2 on a usage error.");
  line("#include <cerrno>");
  line("#include <cstdlib>");
  line("#include <limits>");
  line("#include <string>");
  line("#include <vector>");
  line();
  std::string names, sizes, hosts;
  for (size_t i = 0; i < n; ++i) {
    names += (i ? ", " : "") + c_string(p_.buffers[i].name);
    sizes += (i ? ", " : "") + std::string("sizeof(") + cuda_type(p_.buffers[i].elem) + ")";
    hosts += (i ? ", " : "") + std::string(p_.buffers[i].host ? "true" : "false");
  }
  line("static const int orch_buffers = " + std::to_string(n) + ";");
  line("static const char* const orch_buffer_name[] = {" + (n ? names : "nullptr") + "};");
  line("static const size_t orch_element_size[] = {" + (n ? sizes : "0") + "};");
  line();
  open("template <class T> static bool orch_parse_int(const char* s, T* out) {");
  line("char* end = nullptr;");
  line("errno = 0;");
  open("if (std::numeric_limits<T>::is_signed) {");
  line("long long v = std::strtoll(s, &end, 0);");
  line("if (errno || end == s || *end || v < static_cast<long long>(std::numeric_limits<T>::min()) ||");
  line("    v > static_cast<long long>(std::numeric_limits<T>::max()))");
  line("  return false;");
  line("*out = static_cast<T>(v);");
  close("} else {");
  ++indent_;
  line("if (*s == '-') return false;");
  line("unsigned long long v = std::strtoull(s, &end, 0);");
  line("if (errno || end == s || *end || v > static_cast<unsigned long long>(std::numeric_limits<T>::max()))");
  line("  return false;");
  line("*out = static_cast<T>(v);");
  close();
  line("return true;");
  close();
  open("template <class T> static bool orch_parse_real(const char* s, T* out) {");
  line("char* end = nullptr;");
  line("errno = 0;");
  line("double v = std::strtod(s, &end);");
  line("if (errno || end == s || *end) return false;");
  line("*out = static_cast<T>(v);");
  line("return true;");
  close();
  open("template <class T> static bool orch_parse_bool(const char* s, T* out) {");
  line("if (!std::strcmp(s, \"1\") || !std::strcmp(s, \"true\")) *out = true;");
  line("else if (!std::strcmp(s, \"0\") || !std::strcmp(s, \"false\")) *out = false;");
  line("else return false;");
  line("return true;");
  close();
  line();
  line("// Sets param `name` from text; false for an unknown name or a value its type cannot hold.");
  open("static bool orch_set_param(" + params_type() + "* p, const char* name, const char* value) {");
  bool rounded = false;  // a param parsed through a double
  for (const lir::Param& x : p_.params)
    rounded |= x.type == lir::ScalarType::F16 || x.type == lir::ScalarType::BF16 ||
               x.type == lir::ScalarType::F32;
  if (rounded) line("double d = 0;");
  line("(void)p;");
  line("(void)name;");
  line("(void)value;");
  for (size_t i = 0; i < p_.params.size(); ++i)
    line("if (!std::strcmp(name, " + c_string(p_.params[i].name) + ")) return " +
         param_parser(p_.params[i], param_names_[i]) + ";");
  line("return false;");
  close();
  line();
  open("static int orch_usage(const char* self, const std::string& why) {");
  line("std::fprintf(stderr, \"%s: %s\\nusage: %s [--param NAME=VALUE]... [--in DIR] [--out DIR] "
       "[--launches N]\\n\", self, why.c_str(), self);");
  line("return 2;");
  close();
  line();
  line("// The bytes of a file; false with errno set when it cannot be read (ENOENT: there is none).");
  open("static bool orch_read_file(const std::string& path, std::vector<unsigned char>* out) {");
  line("std::FILE* f = std::fopen(path.c_str(), \"rb\");");
  line("if (!f) return false;");
  line("unsigned char chunk[65536];");
  line("size_t got = 0;");
  line("while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) out->insert(out->end(), chunk, chunk + got);");
  line("const bool ok = !std::ferror(f);");
  line("std::fclose(f);");
  line("if (!ok) errno = EIO;");
  line("return ok;");
  close();
  line();
  open("static bool orch_write_file(const std::string& path, const std::vector<unsigned char>& bytes) {");
  line("std::FILE* f = std::fopen(path.c_str(), \"wb\");");
  line("if (!f) return false;");
  line("const bool wrote = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();");
  line("return (std::fclose(f) == 0) && wrote;");
  close();
  line();
  open("int main(int argc, char** argv) {");
  line(params_type() + " p;  // the defaults");
  for (size_t i = 0; i < p_.params.size(); ++i)
    if (!p_.params[i].default_value)
      line("// p." + param_names_[i] + " has no default in the .orch file: set it here or with --param.");
  line("const char* in = nullptr;");
  line("const char* out = nullptr;");
  line("unsigned long long launches = 1;");
  open("for (int i = 1; i < argc; ++i) {");
  line("const std::string arg = argv[i];");
  line("if (i + 1 >= argc) return orch_usage(argv[0], \"unknown or incomplete argument: \" + arg);");
  line("const char* next = argv[++i];");
  open("if (arg == \"--in\") {");
  line("in = next;");
  close("} else if (arg == \"--out\") {");
  ++indent_;
  line("out = next;");
  close("} else if (arg == \"--launches\") {");
  ++indent_;
  line("if (!orch_parse_int(next, &launches)) return orch_usage(argv[0], std::string(\"--launches \") + next + \": not a count\");");
  close("} else if (arg == \"--param\") {");
  ++indent_;
  line("const std::string assignment = next;");
  line("const size_t eq = assignment.find('=');");
  line("if (eq == std::string::npos || !orch_set_param(&p, assignment.substr(0, eq).c_str(), next + eq + 1))");
  line("  return orch_usage(argv[0], \"--param \" + assignment + \": no such param, or a value its type cannot hold\");");
  close("} else {");
  ++indent_;
  line("return orch_usage(argv[0], \"unknown argument: \" + arg);");
  close();
  close();
  line();
  line("// The initial contents, checked before any GPU work.");
  line("unsigned long long count[" + arrays + "] = {};");
  line("if (buffer_counts_" + fn_ + "(p, count) != cudaSuccess) return 1;");
  line("std::vector<std::vector<unsigned char>> initial(orch_buffers);");
  open("for (int i = 0; in && i < orch_buffers; ++i) {");
  line("const std::string path = std::string(in) + \"/\" + orch_buffer_name[i] + \".bin\";");
  open("if (!orch_read_file(path, &initial[i])) {");
  line("if (errno == ENOENT) continue;  // starts zeroed");
  line("std::fprintf(stderr, \"" + fn_ + ": %s: %s\\n\", path.c_str(), std::strerror(errno));");
  line("return 1;");
  close();
  open("if (initial[i].size() != count[i] * orch_element_size[i]) {");
  line("std::fprintf(stderr, \"" + fn_ + ": %s: %zu bytes; buffer %s has %llu\\n\", path.c_str(), "
       "initial[i].size(), orch_buffer_name[i], count[i] * orch_element_size[i]);");
  line("return 1;");
  close();
  close();
  line();
  line(buffers_type() + " b;");
  line(graphs_type() + " g;");
  line("cudaStream_t stream = nullptr;");
  line("cudaError_t err = cudaSuccess;");
  if (has_collectives()) {
    line("// One process, one GPU: a communicator of one rank for every comm.");
    line("int device = 0;");
    for (size_t i = 0; i < p_.comms.size(); ++i) {
      open("if (ncclCommInitAll(&p." + comm_names_[i] + ", 1, &device) != ncclSuccess) {");
      line("std::fprintf(stderr, \"" + fn_ + ": ncclCommInitAll failed\\n\");");
      line("return 1;");
      close();
    }
    line("p." + rank_ + " = 0;");
    line("p." + world_size_ + " = 1;");
  }
  line("err = allocate_" + fn_ + "(p, &b);");
  std::string device_ptrs, host_ptrs;
  for (size_t i = 0; i < n; ++i) {
    device_ptrs += (i ? ", " : "") + std::string("(void*)b.") + buffer_names_[i];
    host_ptrs += (i ? ", " : "") + (p_.buffers[i].host ? "(void*)b." + host_names_[i] : std::string("nullptr"));
  }
  line("// Where each buffer is: device memory, or mapped host memory at its host address.");
  line("void* const device_ptr[" + arrays + "] = {" + (n ? device_ptrs : "nullptr") + "};");
  line("void* const host_ptr[" + arrays + "] = {" + (n ? host_ptrs : "nullptr") + "};");
  open("for (int i = 0; err == cudaSuccess && i < orch_buffers; ++i) {");
  line("if (initial[i].empty()) continue;");
  line("if (host_ptr[i]) std::memcpy(host_ptr[i], initial[i].data(), initial[i].size());");
  line("else err = cudaMemcpy(device_ptr[i], initial[i].data(), initial[i].size(), cudaMemcpyHostToDevice);");
  close();
  line("if (err == cudaSuccess) err = build_" + fn_ + "(p, b, &g);");
  line("// The zeroing, the uploads from pageable memory and build's copies and graph uploads run on");
  line("// the legacy stream, which the launch stream does not wait for.");
  line("if (err == cudaSuccess) err = cudaDeviceSynchronize();");
  line(
      "if (err == cudaSuccess) err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);");
  line("for (unsigned long long i = 0; err == cudaSuccess && i < launches; ++i) err = launch_" + fn_ +
       "(g, stream);");
  line("if (err == cudaSuccess) err = cudaStreamSynchronize(stream);");
  if (uses_status_) line("if (err == cudaSuccess) err = device_status_" + fn_ + "(g);");
  line("bool written = true;");
  open("for (int i = 0; out && err == cudaSuccess && i < orch_buffers; ++i) {");
  line("std::vector<unsigned char> bytes(count[i] * orch_element_size[i]);");
  line("if (host_ptr[i]) std::memcpy(bytes.data(), host_ptr[i], bytes.size());");
  line("else err = cudaMemcpy(bytes.data(), device_ptr[i], bytes.size(), cudaMemcpyDeviceToHost);");
  line("const std::string path = std::string(out) + \"/\" + orch_buffer_name[i] + \".bin\";");
  open("if (err == cudaSuccess && !orch_write_file(path, bytes)) {");
  line("std::fprintf(stderr, \"" + fn_ + ": %s: cannot write: %s\\n\", path.c_str(), std::strerror(errno));");
  line("written = false;");
  line("break;");
  close();
  close();
  line("if (stream) cudaStreamDestroy(stream);");
  line("destroy_" + fn_ + "(&g);");
  line("free_" + fn_ + "(&b);");
  for (size_t i = 0; i < p_.comms.size(); ++i)
    line("if (p." + comm_names_[i] + ") ncclCommDestroy(p." + comm_names_[i] + ");");
  open("if (err != cudaSuccess) {");
  line("std::fprintf(stderr, \"" + fn_ +
       ": failed: %s (%s)\\n\", cudaGetErrorName(err), cudaGetErrorString(err));");
  line("return 1;");
  close();
  line("if (!written) return 1;");
  line("std::printf(\"" + fn_ + ": ran %llu time(s), ok\\n\", launches);");
  line("return 0;");
  close();
  line("#endif  // ORCH_EJECT_NO_MAIN");
}

}  // namespace orch::eject

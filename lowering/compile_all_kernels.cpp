#include <algorithm>
#include <filesystem>

#include "lowering/passes.h"

namespace orch::lowering {

namespace {

// Where a generated kernel's definition starts: orchc writes `extern "C" __global__ void NAME(`
// after its #includes and helper templates (lowering/codegen.cpp).
size_t definition_start(const ir::Kernel& k) {
  return k.source.find("extern \"C\" __global__ void " + k.name + "(");
}

struct JoinedCode {
  std::string code;
  std::string entry;  // a name expression NVRTC can resolve: the first kernel's, qualified
  std::vector<KernelSource::Segment> segments;
};

size_t count_lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

// The generated kernels `members` as one translation unit, so that they compile once and load
// as one image: their #include lines once, at the top, then each kernel in a namespace of its
// own together with the helpers it was written with, so that no two helpers clash whatever
// codegen emits. The kernels are extern "C": each one's symbol is its name.
JoinedCode join_generated(const ir::Program& p, const std::vector<size_t>& members) {
  JoinedCode out;
  std::vector<std::string> includes;
  std::vector<std::string> chunks;
  for (size_t n = 0; n < members.size(); ++n) {
    const ir::Kernel& k = p.kernels[members[n]];
    const size_t start = definition_start(k);
    std::string prelude;
    size_t at = 0;
    while (at < start) {
      size_t end = k.source.find('\n', at);
      if (end == std::string::npos || end > start) end = start;
      std::string line = k.source.substr(at, end - at);
      at = end < start ? end + 1 : start;
      if (line.rfind("#include", 0) == 0) {
        if (std::find(includes.begin(), includes.end(), line) == includes.end()) includes.push_back(line);
      } else {
        prelude += line + "\n";
      }
    }
    std::string definition = k.source.substr(start);
    if (definition.empty() || definition.back() != '\n') definition += '\n';
    chunks.push_back("namespace orch_generated_" + std::to_string(n) + " {\n" + prelude + definition +
                     "}  // namespace orch_generated_" + std::to_string(n) + "\n");
  }
  for (const std::string& line : includes) out.code += line + "\n";
  for (size_t n = 0; n < chunks.size(); ++n) {
    out.segments.push_back({static_cast<uint32_t>(count_lines(out.code) + 1), p.kernels[members[n]].loc});
    out.code += chunks[n];
  }
  out.entry = "orch_generated_0::" + p.kernels[members.front()].name;
  return out;
}

}  // namespace

bool compile_all_kernels(ir::Program& p, const CompileOptions& given, SourceManager& sources,
                         DiagnosticEngine& diags) {
  CompileOptions options = given;
  if (options.archs.empty()) options.archs = p.targets;
  p.modules.clear();
  std::vector<KernelSource> inputs;
  std::vector<size_t> input_of(p.kernels.size(), 0);
  // Every kernel orchc generates goes into one module: one NVRTC program, one image per arch
  // (a conditional's kernel alone is a ~200 KB CUBIN; 150 of them made a 30 MB artifact).
  std::vector<size_t> joined;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const ir::Kernel& k = p.kernels[i];
    if (k.generated && definition_start(k) != std::string::npos) {
      joined.push_back(i);
      continue;
    }
    KernelSource s;
    s.name = k.name;
    s.code = k.source;
    s.entry = k.entry;
    s.uses_device_runtime = k.uses_device_runtime;
    if (k.generated) {
      // Generated code maps to the statement it implements; an error there is orchc's bug.
      s.file_name = p.name + "." + k.name + ".cu";
      s.origin = k.loc;
      s.first_line_in_origin = k.loc.begin.line;
      s.first_col_in_origin = k.loc.begin.col;
    } else if (k.inline_source) {
      s.file_name = p.name + "." + k.name + ".cu";
      s.origin = k.loc;
      s.origin.file = k.source_file;
      s.first_line_in_origin = k.source_first_line;
      s.first_col_in_origin = k.source_first_col;
      s.include_dirs.push_back(std::filesystem::path(sources.path(p.file)).parent_path().string());
    } else {
      s.file_name = k.source_path;
      s.origin.file = k.source_file;
      s.origin.begin = {1, 1};
      s.origin.end = {1, 1};
      s.include_dirs.push_back(std::filesystem::path(k.source_path).parent_path().string());
    }
    for (std::string& dir : s.include_dirs)
      if (dir.empty()) dir = ".";
    input_of[i] = inputs.size();
    inputs.push_back(std::move(s));
  }
  const size_t module_input = inputs.size();
  if (!joined.empty()) {
    JoinedCode code = join_generated(p, joined);
    KernelSource s;
    s.name = "orchc's generated kernels";
    s.code = std::move(code.code);
    s.entry = std::move(code.entry);
    s.segments = std::move(code.segments);
    s.file_name = p.name + ".generated.cu";
    s.origin = p.kernels[joined.front()].loc;
    for (size_t i : joined) s.uses_device_runtime |= p.kernels[i].uses_device_runtime;
    inputs.push_back(std::move(s));
  }
  std::vector<std::optional<CompiledKernel>> compiled = compile_kernels(inputs, options, diags);
  auto take_code = [](CompiledKernel& c, std::vector<std::pair<std::string, std::string>>& cubins,
                      std::string& ptx, std::string& ptx_arch) {
    cubins.clear();
    for (KernelImage& image : c.cubins) cubins.push_back({image.arch, std::move(image.cubin)});
    ptx = std::move(c.ptx);
    ptx_arch = c.ptx_arch;
  };
  bool ok = true;
  if (!joined.empty()) {
    if (module_input < compiled.size() && compiled[module_input]) {
      ir::Module& m = p.modules.emplace_back();
      take_code(*compiled[module_input], m.cubins, m.ptx, m.ptx_arch);
      for (size_t i : joined) {
        ir::Kernel& k = p.kernels[i];
        k.module = static_cast<int>(p.modules.size() - 1);
        k.lowered_name = k.name;  // extern "C"
        k.cubins.clear();
        k.ptx.clear();
        k.ptx_arch.clear();
      }
    } else {
      ok = false;
    }
  }
  std::vector<bool> in_module(p.kernels.size(), false);
  for (size_t i : joined) in_module[i] = true;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    if (in_module[i]) continue;
    if (input_of[i] >= compiled.size() || !compiled[input_of[i]]) {
      ok = false;
      continue;
    }
    ir::Kernel& k = p.kernels[i];
    CompiledKernel& c = *compiled[input_of[i]];
    k.lowered_name = c.lowered_name;
    take_code(c, k.cubins, k.ptx, k.ptx_arch);
  }
  return ok;
}

}  // namespace orch::lowering

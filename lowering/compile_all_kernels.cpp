#include <filesystem>

#include "lowering/passes.h"

namespace orch::lowering {

bool compile_all_kernels(ir::Program& p, const CompileOptions& given, SourceManager& sources,
                         DiagnosticEngine& diags) {
  CompileOptions options = given;
  if (options.archs.empty()) options.archs = p.targets;
  std::vector<KernelSource> inputs;
  for (const ir::Kernel& k : p.kernels) {
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
    inputs.push_back(std::move(s));
  }
  std::vector<std::optional<CompiledKernel>> compiled = compile_kernels(inputs, options, diags);
  bool ok = true;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    if (i >= compiled.size() || !compiled[i]) {
      ok = false;
      continue;
    }
    ir::Kernel& k = p.kernels[i];
    CompiledKernel& c = *compiled[i];
    k.lowered_name = c.lowered_name;
    k.cubins.clear();
    for (KernelImage& image : c.cubins) k.cubins.push_back({image.arch, std::move(image.cubin)});
    k.ptx = std::move(c.ptx);
    k.ptx_arch = c.ptx_arch;
  }
  return ok;
}

}  // namespace orch::lowering

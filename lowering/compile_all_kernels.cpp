#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>

#include "lowering/codegen.h"
#include "lowering/nvshmem.h"
#include "lowering/passes.h"

namespace orch::lowering {

namespace {

// A generated kernel's definition, after its generated_preamble(), and which preamble it has.
// None when the source is not what codegen writes: such a kernel is compiled on its own.
struct Definition {
  std::string text;
  bool status = false;
};

std::optional<Definition> generated_definition(const lir::Kernel& k, const std::string& plain,
                                               const std::string& with_status) {
  const std::string head = "extern \"C\" __global__ void " + k.name + "(";
  for (bool status : {true, false}) {
    const std::string& preamble = status ? with_status : plain;
    if (k.source.compare(0, preamble.size(), preamble) == 0 &&
        k.source.compare(preamble.size(), head.size(), head) == 0)
      return Definition{k.source.substr(preamble.size()), status};
  }
  return std::nullopt;
}

size_t count_lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

// The generated kernels as one translation unit, so that they compile once and load as one
// image: the preamble once, at the top (with the device status record's definitions first when
// any kernel reports to it; a kernel that does not never calls orch_expr_error, so the macro
// does not reach it), then each kernel's definition. Their names are orchc's, distinct, and
// extern "C": each one's symbol is its name. `segments` map NVRTC's lines to the statements.
struct JoinedCode {
  std::string code;
  std::vector<KernelSource::Segment> segments;
};

JoinedCode join_generated(const lir::Program& p, const std::vector<size_t>& members,
                          const std::vector<Definition>& definitions, const std::string& prefix) {
  JoinedCode out;
  bool status = false;
  for (const Definition& d : definitions) status |= d.status;
  out.code = prefix + generated_preamble(status);
  for (size_t n = 0; n < members.size(); ++n) {
    out.segments.push_back({static_cast<uint32_t>(count_lines(out.code) + 1), p.kernels[members[n]].loc});
    out.code += definitions[n].text;
    if (out.code.back() != '\n') out.code += '\n';
  }
  return out;
}

}  // namespace

bool compile_all_kernels(lir::Program& p, const CompileOptions& given, SourceManager& sources,
                         DiagnosticEngine& diags) {
  CompileOptions options = given;
  if (options.archs.empty()) options.archs = p.targets;
  p.modules.clear();
  std::vector<KernelSource> inputs;
  // Per kernel: its input and which of the input's entries it is.
  std::vector<size_t> input_of(p.kernels.size(), 0), entry_of(p.kernels.size(), 0);
  // Every kernel orchc generates goes into one module: one NVRTC program, one image per arch
  // (a kernel linked with the device runtime alone is a CUBIN of about 200 KB, and 64 nested
  // conditions have 64 of them), and expr/'s preamble compiled once instead of once per kernel.
  const std::string plain = generated_preamble(false), with_status = generated_preamble(true);
  std::vector<size_t> joined;
  std::vector<Definition> definitions;
  // User kernels by translation unit (the same code, file name and include folders): each is
  // compiled once into one image holding every kernel declared from it and every variant orchc
  // makes of them (a wait at entry, a guard), so they share the unit's __device__,
  // __constant__ and __managed__ objects as nvcc's build would.
  std::map<std::string, size_t> unit_input;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const lir::Kernel& k = p.kernels[i];
    if (k.generated) {
      if (std::optional<Definition> d = generated_definition(k, plain, with_status)) {
        joined.push_back(i);
        definitions.push_back(std::move(*d));
        continue;
      }
    }
    KernelSource s;
    s.name = k.name;
    s.code = k.source;
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
    KernelEntry e;
    e.name = k.name;
    e.entry = k.entry;
    // A user kernel that a programmatic edge enters waits at entry: orchc puts the wait in its
    // PTX (programmatic_edges.cpp decided which).
    if (!k.generated) e.patch.wait = k.waits_at_entry;
    // A guarded variant of a user kernel (unroll_loops.cpp) calls its guard function at entry.
    if (!k.generated && !k.guard_code.empty()) {
      e.patch.guard = "orch_guard";
      e.patch.extra_params = k.guard_param_sizes;
      // Every thread holds the decision in these roles (unroll_loops.cpp's guard_statement).
      e.patch.guard_per_thread =
          k.guard && (k.guard->role == mir::GuardRole::Each || k.guard->role == mir::GuardRole::Follow);
      e.guard_code = k.guard_code;
    }
    std::string unit;
    if (!k.generated) {
      unit = s.code + '\0' + s.file_name;
      for (const std::string& dir : s.include_dirs) unit += '\0' + dir;
      auto [it, fresh] = unit_input.emplace(unit, inputs.size());
      if (!fresh) {
        KernelSource& in = inputs[it->second];
        in.uses_device_runtime = in.uses_device_runtime || s.uses_device_runtime;
        if (std::none_of(in.entries.begin(), in.entries.end(), [&](const KernelEntry& x) { return x.name == e.name; }))
          in.name += ", " + e.name;
        if (std::find(in.entries.begin(), in.entries.end(), e) == in.entries.end()) in.entries.push_back(e);
        input_of[i] = it->second;
        entry_of[i] = static_cast<size_t>(std::find(in.entries.begin(), in.entries.end(), e) - in.entries.begin());
        continue;
      }
    }
    s.entries.push_back(std::move(e));
    input_of[i] = inputs.size();
    inputs.push_back(std::move(s));
  }
  // The generated kernels that call NVSHMEM (generate_nvshmem_kernels.cpp) are a module of their
  // own: it is compiled with -rdc and linked with NVSHMEM's device library into CUBINs only, which
  // the others (conditions, updates, launchers) need not be.
  std::vector<std::vector<size_t>> groups(2);
  std::vector<std::vector<Definition>> group_definitions(2);
  for (size_t n = 0; n < joined.size(); ++n) {
    const size_t g = nvshmem::mentions_nvshmem(definitions[n].text) ? 1 : 0;
    groups[g].push_back(joined[n]);
    group_definitions[g].push_back(std::move(definitions[n]));
  }
  std::vector<size_t> group_input(2, SIZE_MAX);
  for (size_t g = 0; g < 2; ++g) {
    if (groups[g].empty()) continue;
    JoinedCode code = join_generated(p, groups[g], group_definitions[g],
                                     g == 1 ? "#include <nvshmem.h>\n#include <nvshmemx.h>\n" : "");
    KernelSource s;
    s.name = g == 1 ? "orchc's NVSHMEM kernels" : "orchc's generated kernels";
    s.code = std::move(code.code);
    s.entries.push_back({p.kernels[groups[g].front()].name, "", {}, {}});  // the others are extern "C" too
    s.segments = std::move(code.segments);
    s.file_name = p.name + (g == 1 ? ".nvshmem.cu" : ".generated.cu");
    s.origin = p.kernels[groups[g].front()].loc;
    for (size_t i : groups[g]) s.uses_device_runtime |= p.kernels[i].uses_device_runtime;
    group_input[g] = inputs.size();
    inputs.push_back(std::move(s));
  }
  std::vector<std::optional<CompiledKernel>> compiled = compile_kernels(inputs, options, diags);
  // One NVSHMEM for the whole pipeline (the compile finds one per call), recorded for the
  // runtime, whose host library must be the same release.
  for (const std::optional<CompiledKernel>& c : compiled)
    if (c && c->nvshmem) p.nvshmem_version = c->nvshmem_version;
  auto take_code = [](CompiledKernel& c, std::vector<lir::Image>& images, std::string& ptx,
                      std::string& ptx_arch) {
    images.clear();
    for (KernelImage& image : c.cubins) images.push_back({image.arch, std::move(image.cubin)});
    ptx = std::move(c.ptx);
    ptx_arch = c.ptx_arch;
  };
  bool ok = true;
  for (size_t g = 0; g < 2; ++g) {
    if (groups[g].empty()) continue;
    if (group_input[g] < compiled.size() && compiled[group_input[g]]) {
      lir::Module& m = p.modules.emplace_back();
      take_code(*compiled[group_input[g]], m.images, m.ptx, m.ptx_arch);
      for (size_t i : groups[g]) {
        lir::Kernel& k = p.kernels[i];
        k.module = static_cast<int>(p.modules.size() - 1);
        k.lowered_name = k.name;  // extern "C"
        k.images.clear();
        k.ptx.clear();
        k.ptx_arch.clear();
      }
    } else {
      ok = false;
    }
  }
  std::vector<bool> in_module(p.kernels.size(), false);
  for (size_t i : joined) in_module[i] = true;
  // A unit that one kernel uses keeps its code with the kernel; a unit of several kernels (or
  // variants) is a module they share.
  std::map<size_t, int> module_of_input, users;
  for (size_t i = 0; i < p.kernels.size(); ++i)
    if (!in_module[i]) ++users[input_of[i]];
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    if (in_module[i]) continue;
    if (input_of[i] >= compiled.size() || !compiled[input_of[i]]) {
      ok = false;
      continue;
    }
    lir::Kernel& k = p.kernels[i];
    CompiledKernel& c = *compiled[input_of[i]];
    k.lowered_name = c.symbols.at(entry_of[i]);
    k.code_choice = c.code_choice;
    if (users[input_of[i]] == 1) {
      take_code(c, k.images, k.ptx, k.ptx_arch);
      continue;
    }
    auto [it, fresh] = module_of_input.emplace(input_of[i], static_cast<int>(p.modules.size()));
    if (fresh) {
      lir::Module& m = p.modules.emplace_back();
      take_code(c, m.images, m.ptx, m.ptx_arch);
    }
    k.module = it->second;
    k.images.clear();
    k.ptx.clear();
    k.ptx_arch.clear();
  }
  return ok;
}

}  // namespace orch::lowering

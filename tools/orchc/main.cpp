// orchc: reads flags and calls the libraries. Exit codes: 0 clean, 1 the pipeline has
// errors, 2 usage or internal error.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "artifact/artifact.h"
#include "compiler/check.h"
#include "compiler/emit.h"
#include "grammar/parse.h"
#include "lowering/emit_cuda.h"
#include "lowering/lower.h"
#include "lowering/profile_use.h"
#include "support/input_file.h"
#include "tools/orchc/artifact_cache.h"
#ifdef ORCH_LAZY_TOOLKIT
#include "tools/orchc/toolkit_libs.h"
#endif

namespace {

struct Flags {
  std::string input, emit, target, targets_dir, format = "text", color = "auto", output, profile;
  std::string nvshmem;  // NVSHMEM's folder for kernels that call it (else $ORCH_NVSHMEM_HOME)
  std::string shared_memory_code = "auto";  // orch::SharedMemoryCode, as text
  bool check_only = false, no_kernels = false, no_cache = false, print_passes = false, no_pdl = false;
  std::vector<std::string> archs;
  unsigned jobs = 0;
  uint32_t unroll = 0;  // 0: the compiler's choice
  bool no_line_up = false;
  bool no_collective_priority = false;
  bool no_memory_plan = false;
};

// The lowering options the flags ask for; --emit=cuda cannot patch user kernels.
orch::LowerOptions lower_options(const Flags& f,
                                 std::shared_ptr<const orch::lowering::BoundProfile> profile = nullptr) {
  orch::LowerOptions lower;
  lower.profile = std::move(profile);
  lower.compile.archs = f.archs;
  lower.compile.use_cache = !f.no_cache;
  lower.compile.cache_dir = f.no_cache ? "" : orch::default_kernel_cache_dir();
  lower.compile.jobs = f.jobs;
  lower.compile.nvshmem_home = f.nvshmem;
  // Checked against the same names by CLI11 before this runs.
  orch::parse_shared_memory_code(f.shared_memory_code, &lower.compile.shared_memory_code);
  lower.print_passes = f.print_passes;
  lower.pdl = !f.no_pdl;
  lower.unroll = f.unroll;
  lower.line_up_collectives = !f.no_line_up;
  lower.prioritize_collectives = !f.no_collective_priority;
  lower.memory_plan = !f.no_memory_plan;
  return f.emit == "cuda" ? orch::for_emit_cuda(lower) : lower;
}

// Checks, then emits a view or compiles. Returns the exit code; diagnostics are in `diags`, and
// the artifact written is in *written.
int compile(const Flags& f, orch::SourceManager& sources, orch::DiagnosticEngine& diags, std::string* written) {
  // Refuse an output that is not a regular file or that is the input before doing any work.
  const bool writes = !f.check_only && f.emit.empty() && !f.output.empty();
  if (writes) {
    if (std::string problem = orch::artifact::output_path_problem(f.output, {f.input});
        !problem.empty()) {
      std::cerr << "orchc: " << problem << "\n";
      return 2;
    }
  }
  orch::CheckOptions options;
  options.target_override = f.target;
  options.targets_dir = f.targets_dir;
  orch::CheckResult result = orch::check_file(f.input, sources, options, diags);
  if (f.emit == "ast" && result.module) std::cout << orch::dump_ast(*result.module, sources);
  // --profile: checked whatever the pipeline's state (E0004-E0006), then matched against it
  // (W0006: another pipeline's or GPU's is ignored).
  std::optional<orch::lowering::Profile> read;
  uint32_t profile_file = 0;
  if (!f.profile.empty()) read = orch::lowering::read_profile(f.profile, sources, diags, &profile_file);
  if (diags.has_errors()) return 1;
  std::shared_ptr<const orch::lowering::BoundProfile> profile;
  if (read) profile = orch::lowering::match_profile(std::move(*read), profile_file, *result.program, sources, diags);
  if (f.emit == "dot") std::cout << orch::emit_dot(*result.program, sources);
  if (f.emit == "yaml") std::cout << orch::emit_yaml(*result.program, sources);
  if (f.emit == "ir") std::cout << orch::lir::print(orch::lower_to_lir(*result.program, lower_options(f, profile)), sources);
  if (f.emit == "cuda")
    for (const orch::ir::Buffer& b : result.program->buffers)
      if (b.symmetric) {
        // The ejected file would cudaMalloc it and build its kernels without NVSHMEM.
        std::cerr << "orchc: --emit=cuda does not eject pipelines that use NVSHMEM yet (symmetric buffer '"
                  << b.name << "'; issue 23)\n";
        return 2;
      }
  if (f.emit == "cuda")
    std::cout << orch::emit_cuda(orch::lower_to_lir(*result.program, lower_options(f, profile)), sources);
  if (!f.emit.empty()) return 0;
  if (f.check_only) {
    if (f.no_kernels) return 0;
    // The CI gate sees what the compiler sees: the kernels compile (cached; no GPU needed), and
    // what their compiled code shows is checked (E0120, E0508, ...). Nothing is written.
    const bool ok = orch::lower_to_artifact(*result.program, sources, lower_options(f, profile), diags).has_value();
    return ok && !diags.has_errors() ? 0 : 1;
  }
  if (f.output.empty()) {
    std::cerr << "orchc: nothing to do: give -o pipeline.bin, --check or --emit\n";
    return 2;
  }
  const orch::LowerOptions lower = lower_options(f, profile);
  auto bytes = orch::lower_to_artifact(*result.program, sources, lower, diags);
  if (!bytes || diags.has_errors()) return 1;
  // Written atomically: a failed compile never leaves a partial file or replaces a good one.
  // Every file the compilation read (the pipeline, `from` kernel sources) is protected.
  std::vector<std::string> inputs;
  for (uint32_t id = 1; id < sources.count(); ++id) inputs.push_back(sources.path(id));
  std::string error;
  if (!orch::artifact::write_file_atomically(f.output, *bytes, &error, inputs)) {
    std::cerr << "orchc: " << error << "\n";
    return 2;
  }
  *written = std::move(*bytes);
  return 0;
}

// The artifact cache (tools/orchc/artifact_cache.h) answers compiles that write an artifact;
// --no-cache, --print-passes (ORCH_PRINT_PASSES) and views bypass it.
bool cacheable(const Flags& f) {
  const char* passes = std::getenv("ORCH_PRINT_PASSES");
  return !f.check_only && f.emit.empty() && !f.output.empty() && !f.no_cache && !f.print_passes &&
         !(passes && *passes && std::string(passes) != "0");
}

// Every option that can change the artifact or the report, for the cache key.
std::vector<std::string> key_options(const Flags& f, bool color) {
  std::vector<std::string> o = {"target=" + f.target, "targets-dir=" + f.targets_dir,
                                "diagnostics-format=" + f.format, std::string("color=") + (color ? "1" : "0")};
  for (const std::string& a : f.archs) o.push_back("arch=" + a);
  // The speed passes change the artifact: a --no-pdl or --unroll compile is its own entry.
  o.push_back(std::string("pdl=") + (f.no_pdl ? "0" : "1"));
  o.push_back("unroll=" + std::to_string(f.unroll));
  o.push_back(std::string("line-up=") + (f.no_line_up ? "0" : "1"));
  o.push_back(std::string("collective-priority=") + (f.no_collective_priority ? "0" : "1"));
  o.push_back(std::string("memory-plan=") + (f.no_memory_plan ? "0" : "1"));
  if (!f.nvshmem.empty()) o.push_back("nvshmem=" + f.nvshmem);
  o.push_back("shared-memory-code=" + f.shared_memory_code);
  return o;
}

// Writes what a hit stored: the report where a compile prints it, the artifact the same safe
// way. Returns the exit code.
int replay(const Flags& f, orch::DiagnosticFormat fmt, const orch::orchc::CacheHit& hit) {
  if (fmt != orch::DiagnosticFormat::Text) std::cout << hit.report;
  else std::cerr << hit.report;
  std::string error;
  if (!orch::artifact::write_file_atomically(f.output, hit.artifact, &error, hit.inputs)) {
    std::cerr << "orchc: " << error << "\n";
    return 2;
  }
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{"orchc: compile orch pipelines to CUDA graphs", "orchc"};
  Flags f;
  app.add_option("input", f.input, "the .orch file")->required();
  app.add_flag("--check", f.check_only,
               "check the pipeline, compile its kernels (cached) and check them, write nothing (no GPU needed)");
  app.add_flag("--no-kernels", f.no_kernels, "with --check: the checker's rules only, no kernel compiled (faster)");
  app.add_option("-o,--output", f.output, "write the compiled pipeline here (pipeline.bin)");
  app.add_option("--emit", f.emit,
                 "print a view instead of compiling: ast, dot, yaml (the checked DAG), ir "
                 "(the lowered program: the CUDA graph nodes) or cuda (a standalone .cu file building the "
                 "graph)")
      ->check(CLI::IsMember({"ast", "dot", "yaml", "ir", "cuda"}));
  app.add_option("--target", f.target, "target profile name (sm_90) or a .yaml profile path");
  app.add_option("--targets-dir", f.targets_dir, "folder of target profiles");
  app.add_option("--arch", f.archs, "archs to compile kernels for (default: the targets)")
      ->delimiter(',');
  app.add_flag("--no-cache", f.no_cache,
               "compile afresh, bypassing the artifact cache and the kernel cache (both under "
               "~/.cache/orch; README.md, \"Caches\")");
  app.add_option("-j,--jobs", f.jobs, "kernel compile threads (default: all cores)");
  app.add_flag("--no-pdl", f.no_pdl,
               "no programmatic (PDL) edges: every kernel starts after the kernels it depends on have "
               "finished");
  app.add_option("--unroll", f.unroll,
                 "copies of a `while` body per WHILE iteration, each doing nothing once the condition is "
                 "false (default: the compiler's choice, copies for 32 nodes per iteration, 8 to 16, and none where the "
                 "body's launches run more than 3 waves past their first; 1: no unrolling)")
      ->check(CLI::Range(1u, 64u));
  app.add_flag("--no-line-up", f.no_line_up,
               "leave every kernel free to run beside the collective before it (default: kernels that fit "
               "in one wave wait for it)");
  app.add_flag("--no-collective-priority", f.no_collective_priority,
               "run NCCL's kernels at the stream's priority (default: at the greatest priority where kernels "
               "may run beside a collective; docs/multi-gpu.md, \"Priority\")");
  app.add_flag("--no-memory-plan", f.no_memory_plan,
               "allocate every buffer alone (default: buffers never in use at the same time share one arena; "
               "docs/performance.md, \"Memory: the memory plan\")");
  app.add_option("--shared-memory-code", f.shared_memory_code,
                 "what a kernel source that uses shared memory compiles to: auto (default: "
                 "relocatable-whole-ptx where a loop does multiply-adds on shared-memory loads, else "
                 "whole-program; --print-passes says which and why), whole-program (nvcc's PTX, ptxas whole "
                 "program), relocatable (nvcc -rdc=true's PTX, linked by nvJitLink) or relocatable-whole-ptx "
                 "(nvcc's whole-program PTX, linked by nvJitLink); docs/language.md, \"Shared memory: nvcc's code\"")
      ->check(CLI::IsMember({"auto", "whole-program", "relocatable", "relocatable-whole-ptx"}));
  app.add_option("--profile", f.profile,
                 "decide the speed passes from the launches and times orch-run --profile measured "
                 "(docs/observe.md, \"--profile\")")
      ->type_name("FILE");
  app.add_flag("--print-passes", f.print_passes,
               "print the program after each lowering pass and the pass times (ORCH_PRINT_PASSES=1)");
  app.add_option("--nvshmem", f.nvshmem,
                 "NVSHMEM's folder (include/nvshmem.h, lib/libnvshmem_device.a) for kernels that call "
                 "NVSHMEM (default: $ORCH_NVSHMEM_HOME, else $NVSHMEM_HOME; docs/multi-gpu.md, \"NVSHMEM\")")
      ->type_name("DIR");
  app.add_option("--diagnostics-format", f.format, "text, json or sarif")
      ->check(CLI::IsMember({"text", "json", "sarif"}));
  app.add_option("--color", f.color, "color text diagnostics: auto, always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (f.no_kernels && !f.check_only) {
    std::cerr << "orchc: --no-kernels goes with --check (a compile always compiles its kernels)\n";
    return 2;
  }

  orch::DiagnosticFormat fmt = f.format == "json"    ? orch::DiagnosticFormat::Json
                               : f.format == "sarif" ? orch::DiagnosticFormat::Sarif
                                                     : orch::DiagnosticFormat::Text;
  bool color = fmt == orch::DiagnosticFormat::Text &&
               (f.color == "always" || (f.color == "auto" && isatty(STDERR_FILENO)));

  // A compile the artifact cache has seen with every input unchanged is replayed; the output is
  // checked first, as a compile checks it.
  std::optional<orch::orchc::ArtifactCache> cache;
  std::optional<orch::orchc::Recording> recording;
  std::string key;
  if (cacheable(f)) {
    cache.emplace(orch::orchc::default_artifact_cache_dir(), orch::orchc::default_artifact_cache_limit());
    orch::InputFile in = orch::read_input_file(f.input);
    // The profile's bytes are part of the key; one that cannot be read is the compile's error.
    orch::InputFile profile;
    if (!f.profile.empty()) profile = orch::read_regular_file(f.profile);
    if (!cache->dir().empty() && in.status == orch::InputFile::Status::Ok &&
        (f.profile.empty() || profile.status == orch::InputFile::Status::Ok))
      key = orch::orchc::cache_key({f.input, in.text, key_options(f, color), f.profile, profile.text});
    if (!key.empty()) {
      if (std::string problem = orch::artifact::output_path_problem(f.output, {f.input}); !problem.empty()) {
        std::cerr << "orchc: " << problem << "\n";
        return 2;
      }
      if (std::optional<orch::orchc::CacheHit> hit = cache->lookup(key)) return replay(f, fmt, *hit);
      recording.emplace();
    }
  }

  orch::SourceManager sources;
  orch::DiagnosticEngine diags;
  std::string artifact;
  int code = compile(f, sources, diags, &artifact);

  std::string report = orch::format_diagnostics(diags.sorted(), sources, fmt, color);
  // Machine-readable reports go to stdout, unless stdout carries an emitted view.
  if (fmt != orch::DiagnosticFormat::Text && f.emit.empty()) std::cout << report;
  else std::cerr << report;
  if (recording && code == 0 && !artifact.empty()) {
    std::vector<orch::orchc::FileRecord> records;
    bool consistent = recording->records(&records);
    recording.reset();  // nothing more to observe
#ifdef ORCH_LAZY_TOOLKIT
    // A library loaded from somewhere other than where the key says would make a wrong entry.
    consistent = consistent && orch::orchc::toolkit_library_consistent(orch::orchc::ToolkitLib::Nvrtc) &&
                 orch::orchc::toolkit_library_consistent(orch::orchc::ToolkitLib::NvJitLink);
#endif
    if (consistent) cache->store(key, records, report, artifact);
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "orchc: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "orchc: internal error\n";
  }
  return 2;
}

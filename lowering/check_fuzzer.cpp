// libFuzzer entry point past the parser (built with -DORCH_FUZZ=ON; scripts/fuzz-checker runs
// it): every input is checked, and every input that checks clean is lowered, verified, written
// as pipeline.bin and opened again. Beyond "no crash, hang, leak or throw", two oracles abort:
//   - the ordering verifier (E0899) must accept what the checker accepted;
//   - the memory plan's verifier (E0899) must accept the plan made for it (plan_memory and
//     verify_memory_plan are separate code: a disagreement is a bug in one of them), and the
//     plan's layout must pass artifact::check_arena;
//   - the loader's validator must accept the artifact of what the checker accepted (the checker
//     and artifact/validate.cpp must agree, issue 8).
// Kernels are not compiled (no NVRTC in the loop): each gets a stand-in image, which the
// validator does not read. Inputs that name a `from` file are skipped, so the fuzzer never reads
// files such as /dev/zero.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "compiler/check.h"
#include "compiler/emit.h"
#include "lowering/emit_cuda.h"
#include "lowering/lower.h"
#include "lowering/passes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (text.find("from") != std::string::npos) return 0;
  orch::SourceManager sources;
  orch::DiagnosticEngine diags;
  orch::CheckResult r = orch::check_text("fuzz.orch", text, sources, {}, diags);
  std::string report =
      orch::format_diagnostics(diags.sorted(), sources, orch::DiagnosticFormat::Text);
  if (!r.program) return 0;
  // The views work on any program the checker returns, errors or not.
  std::string views = orch::emit_yaml(*r.program, sources) + orch::emit_dot(*r.program, sources);
  (void)views;
  if (diags.has_errors()) return 0;

  orch::lir::Program lowered = orch::lower_to_lir(*r.program, orch::for_emit_cuda());
  std::string cuda = orch::emit_cuda(lowered, sources) + orch::lir::print(lowered, sources);
  (void)cuda;
  orch::DiagnosticEngine verify;
  if (!orch::lowering::verify_ordering(lowered, verify)) {
    std::fprintf(
        stderr, "check_fuzzer: the ordering verifier refused a checked pipeline:\n%s\n%s\n",
        orch::format_diagnostics(verify.sorted(), sources, orch::DiagnosticFormat::Text).c_str(),
        text.c_str());
    std::abort();
  }
  orch::DiagnosticEngine plan;
  if (!orch::lowering::verify_memory_plan(lowered, plan)) {
    std::fprintf(stderr, "check_fuzzer: the memory plan's verifier refused the plan of a checked pipeline:\n%s\n%s\n",
                 orch::format_diagnostics(plan.sorted(), sources, orch::DiagnosticFormat::Text).c_str(),
                 text.c_str());
    std::abort();
  }
  for (orch::lir::Kernel& k : lowered.kernels) {
    k.lowered_name = k.name;
    k.images = {{"sm_90", std::string("\x7f"
                                      "ELF stand-in",
                                      12)}};
  }
  const std::string bytes = orch::lowering::serialize(lowered, sources);
  std::vector<uint64_t> aligned((bytes.size() + 7) / 8);
  std::memcpy(aligned.data(), bytes.data(), bytes.size());
  auto opened =
      orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(aligned.data()), bytes.size());
  if (!opened.ok()) {
    std::fprintf(stderr, "check_fuzzer: the loader refused a checked pipeline: %s\n%s\n",
                 opened.error.c_str(), text.c_str());
    std::abort();
  }
  return 0;
}

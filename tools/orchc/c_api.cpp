// orchc as a C API (orch/orchc.h): the same steps as main.cpp's compile(), with the artifact and
// the diagnostics returned instead of written. Like main.cpp, this is the driver that joins the
// stages (compiler/ checks, lowering/ compiles), so it sits on top of both.
#include "orch/orchc.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <sstream>
#include <string>

#include "compiler/check.h"
#include "lowering/lower.h"
#include "lowering/profile_use.h"

namespace {

// A malloc'ed copy (freed by orch_compile_free), or NULL when memory ran out.
char* copy_out(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) {
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
  }
  return p;
}

struct Outputs {
  char** artifact = nullptr;
  size_t* artifact_size = nullptr;
  char** json = nullptr;
  char** text = nullptr;

  void clear() const {
    if (artifact) *artifact = nullptr;
    if (artifact_size) *artifact_size = 0;
    if (json) *json = nullptr;
    if (text) *text = nullptr;
  }
  // The outputs of a call that could not run: one line of text, no diagnostics.
  int usage(const std::string& why) const {
    clear();
    if (json) *json = copy_out("{\"diagnostics\": []}\n");
    if (text) *text = copy_out(why + "\n");
    return 2;
  }
};

std::vector<std::string> split_commas(const char* list) {
  std::vector<std::string> out;
  if (!list) return out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

int run(const orch_compile_options* o, bool compile, const Outputs& out) {
  out.clear();
  const char* fn = compile ? "orch_compile" : "orch_check";
  if (!o) return out.usage(std::string(fn) + ": `options` is NULL");
  if (!o->path) return out.usage(std::string(fn) + ": `options->path` is NULL");
  if (!o->source && o->source_size != 0)
    return out.usage(std::string(fn) + ": `options->source` is NULL but `source_size` is not 0");
  if (o->unroll > 64)
    return out.usage(std::string(fn) + ": `options->unroll` is " + std::to_string(o->unroll) +
                     "; at most 64 copies of a loop body (0 for the compiler's choice, 1 for none)");

  orch::SourceManager sources;
  orch::DiagnosticEngine diags;
  orch::CheckOptions check;
  if (o->target) check.target_override = o->target;
  if (o->targets_dir) check.targets_dir = o->targets_dir;
  orch::CheckResult result = o->source ? orch::check_text(o->path, std::string(o->source, o->source_size), sources,
                                                          check, diags)
                                       : orch::check_file(o->path, sources, check, diags);
  // The profile as orchc --profile takes it: read whatever the pipeline's state, then matched.
  std::shared_ptr<const orch::lowering::BoundProfile> profile;
  if (o->profile) {
    uint32_t profile_file = 0;
    std::optional<orch::lowering::Profile> read = orch::lowering::read_profile(o->profile, sources, diags, &profile_file);
    if (read && !diags.has_errors() && result.program)
      profile = orch::lowering::match_profile(std::move(*read), profile_file, *result.program, sources, diags);
  }
  std::optional<std::string> bytes;
  if (!diags.has_errors() && compile && result.program) {
    orch::LowerOptions lower;
    lower.compile.archs = split_commas(o->archs);
    const bool no_cache = o->cache_dir && o->cache_dir[0] == '\0';
    lower.compile.use_cache = !no_cache;
    lower.compile.cache_dir = no_cache ? "" : o->cache_dir ? std::string(o->cache_dir) : orch::default_kernel_cache_dir();
    lower.compile.jobs = o->jobs;
    lower.pdl = o->no_pdl == 0;
    lower.unroll = o->unroll;
    lower.profile = std::move(profile);
    lower.memory_plan = o->no_memory_plan == 0;
    bytes = orch::lower_to_artifact(*result.program, sources, lower, diags);
  }
  const auto sorted = diags.sorted();
  int code = diags.has_errors() || (compile && !bytes) || !result.program ? 1 : 0;
  if (out.json) *out.json = copy_out(orch::format_diagnostics(sorted, sources, orch::DiagnosticFormat::Json));
  if (out.text) *out.text = copy_out(orch::format_diagnostics(sorted, sources, orch::DiagnosticFormat::Text, false));
  if (code == 0 && compile && out.artifact) {
    *out.artifact = static_cast<char*>(std::malloc(bytes->size() ? bytes->size() : 1));
    if (*out.artifact) {
      std::memcpy(*out.artifact, bytes->data(), bytes->size());
      if (out.artifact_size) *out.artifact_size = bytes->size();
    }
  }
  const bool lost = (out.json && !*out.json) || (out.text && !*out.text) || (code == 0 && compile && out.artifact && !*out.artifact);
  if (lost) {
    for (char** p : {out.artifact, out.json, out.text})
      if (p) {
        std::free(*p);
        *p = nullptr;
      }
    if (out.artifact_size) *out.artifact_size = 0;
    return out.usage(std::string(fn) + ": out of memory");
  }
  return code;
}

int guarded(const orch_compile_options* o, bool compile, const Outputs& out) noexcept {
  const char* fn = compile ? "orch_compile" : "orch_check";
  try {
    return run(o, compile, out);
  } catch (const std::exception& e) {
    try {
      return out.usage(std::string(fn) + ": internal error: " + e.what());
    } catch (...) {
    }
  } catch (...) {
    try {
      return out.usage(std::string(fn) + ": internal error");
    } catch (...) {
    }
  }
  out.clear();
  return 2;
}

}  // namespace

extern "C" {

int orch_compile(const orch_compile_options* options, char** artifact, size_t* artifact_size, char** diagnostics_json,
                 char** diagnostics_text) {
  return guarded(options, true, Outputs{artifact, artifact_size, diagnostics_json, diagnostics_text});
}

int orch_check(const orch_compile_options* options, char** diagnostics_json, char** diagnostics_text) {
  return guarded(options, false, Outputs{nullptr, nullptr, diagnostics_json, diagnostics_text});
}

void orch_compile_free(void* p) { std::free(p); }

}  // extern "C"

// How long `orchc --check` takes as pipelines grow: parse, check (names, rules, DAG with
// transitive reduction), in process and on one thread. Prints a table; asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/pipeline_generator.h"
#include "compiler/check.h"
#include "grammar/parse.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Timing {
  double parse = 0, check = 0;
};

Timing time_once(const std::string& text) {
  orch::SourceManager sources;
  orch::DiagnosticEngine diags;
  uint32_t file = sources.add("generated.orch", text);
  auto t0 = std::chrono::steady_clock::now();
  auto module = orch::parse_module(sources, file, diags);
  Timing t;
  t.parse = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  auto program = orch::check_module(*module, sources, {}, diags);
  t.check = seconds_since(t0);
  if (diags.has_errors() || !program) {
    std::fprintf(stderr, "generated pipeline has errors:\n%s",
                 orch::format_diagnostics(diags.sorted(), sources, orch::DiagnosticFormat::Text).c_str());
    std::exit(1);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {1000, 3000, 10000, 30000, 100000};
  if (argc > 1) {
    sizes.clear();
    for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  }
  std::printf("orchc --check on generated pipelines (median of 3 runs, one thread)\n");
  std::printf("%10s %10s %10s %10s %12s\n", "statements", "parse s", "check s", "total s",
              "us/statement");
  for (int n : sizes) {
    std::string text = orch::bench::generate_pipeline(n);
    std::vector<Timing> runs;
    for (int r = 0; r < 3; ++r) runs.push_back(time_once(text));
    std::sort(runs.begin(), runs.end(), [](const Timing& a, const Timing& b) {
      return a.parse + a.check < b.parse + b.check;
    });
    const Timing& t = runs[1];
    double total = t.parse + t.check;
    std::printf("%10d %10.3f %10.3f %10.3f %12.2f\n", n, t.parse, t.check, total, total / n * 1e6);
  }
  return 0;
}

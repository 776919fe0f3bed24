// orch-run's command line (usage errors exit 2) and the checks against a pipeline's
// declarations (errors exit 1), on the artifact library's sample pipeline: no GPU, no orchc.
#include <doctest/doctest.h>

#include <sstream>

#include "artifact/sample_pipeline.h"
#include "tools/orch_run/options.h"

using namespace orch::run;

namespace {

struct Parse {
  ParseOutcome outcome;
  Options options;
  std::string out, err;
};

Parse parse(std::vector<std::string> args) {
  Parse p;
  std::ostringstream out, err;
  p.outcome = parse_command_line(args, &p.options, out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

// The sample pipeline: params n: u32 = 1 << 20, tol: f32 = 1e-6, mode: i32 (no default);
// buffers u, v: f32[n], u_host: f32[n] host, flag: u32, counts: i32[ceil_div(n, 256) * 2].
struct Sample {
  std::string bytes = orch::artifact::sample_artifact();
  std::vector<uint64_t> storage;
  const orch::fb::Pipeline* pipeline = nullptr;
  Sample() {
    storage.assign((bytes.size() + 7) / 8, 0);
    std::memcpy(storage.data(), bytes.data(), bytes.size());
    auto r = orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(storage.data()), bytes.size());
    REQUIRE(r.ok());
    pipeline = r.pipeline;
  }
};

std::string check(std::vector<std::string> args, Options* out = nullptr) {
  static Sample sample;
  args.insert(args.begin(), "p.bin");
  Parse p = parse(args);
  REQUIRE_MESSAGE(p.outcome.run, p.err);
  std::string error = check_against_pipeline(&p.options, *sample.pipeline);
  if (out) *out = p.options;
  return error;
}

}  // namespace

TEST_CASE("the full command line of the docs parses") {
  Parse p = parse({"pipeline.bin", "--param", "n=4096", "--fill", "x=random", "--fill", "y=0.5",
                   "--fill", "z=file:in.bin", "--repeat", "100", "--warmup", "5", "--dump",
                   "y=out.bin", "--device", "1", "--force-ptx", "--seed", "42"});
  REQUIRE(p.outcome.run);
  CHECK(p.err.empty());
  const Options& o = p.options;
  CHECK(o.pipeline == "pipeline.bin");
  REQUIRE(o.params.size() == 1);
  CHECK(o.params[0].name == "n");
  CHECK(o.params[0].value == "4096");
  REQUIRE(o.fills.size() == 3);
  CHECK(o.fills[0].kind == FillArg::Kind::Random);
  CHECK(o.fills[0].text.empty());
  CHECK(o.fills[1].kind == FillArg::Kind::Constant);
  CHECK(o.fills[1].text == "0.5");
  CHECK(o.fills[2].kind == FillArg::Kind::File);
  CHECK(o.fills[2].text == "in.bin");
  REQUIRE(o.dumps.size() == 1);
  CHECK(o.dumps[0].name == "y");
  CHECK(o.dumps[0].path == "out.bin");
  CHECK(o.repeat == 100);
  CHECK(o.warmup == 5);
  CHECK(o.device == 1);
  CHECK(o.force_ptx);
  CHECK(o.seed == 42);
  CHECK_FALSE(o.list);
}

TEST_CASE("defaults, --flag=value, and options before the pipeline") {
  Parse p = parse({"--param=n=8", "--fill", "x=random:-1:1", "p.bin", "--param", "a=2"});
  REQUIRE(p.outcome.run);
  CHECK(p.options.pipeline == "p.bin");  // --param takes one value: p.bin stays positional
  REQUIRE(p.options.params.size() == 2);
  CHECK(p.options.params[0].name == "n");
  CHECK(p.options.params[0].value == "8");
  CHECK(p.options.params[1].name == "a");
  CHECK(p.options.fills[0].kind == FillArg::Kind::Random);
  CHECK(p.options.fills[0].text == "-1:1");
  CHECK(p.options.repeat == 10);
  CHECK(p.options.warmup == 2);
  CHECK(p.options.seed == 1);
  CHECK(p.options.device == 0);
  CHECK_FALSE(p.options.force_ptx);
  CHECK(p.options.timeout == 0);
  CHECK_FALSE(p.options.timing);
  p = parse({"p.bin", "--timing"});
  REQUIRE(p.outcome.run);
  CHECK(p.options.timing);
  p = parse({"p.bin", "--timeout", "2.5"});
  REQUIRE(p.outcome.run);
  CHECK(p.options.timeout == 2.5);
  CHECK(p.options.profile.empty());
  p = parse({"p.bin", "--profile", "out/p.json", "--repeat", "20"});
  REQUIRE(p.outcome.run);
  CHECK(p.options.profile == "out/p.json");
  CHECK(p.options.repeat == 20);
  CHECK_FALSE(p.options.nodes);  // --profile measures on its own; --nodes prints the table too
  p = parse({"p.bin", "--profile=p.json", "--nodes", "--trace", "t.json"});
  REQUIRE(p.outcome.run);
  CHECK(p.options.profile == "p.json");
  CHECK(p.options.nodes);
  // A value holding '=' keeps it (only the first '=' splits).
  p = parse({"p.bin", "--dump", "y=dir/a=b.bin"});
  REQUIRE(p.outcome.run);
  CHECK(p.options.dumps[0].path == "dir/a=b.bin");
}

TEST_CASE("--help prints the usage, the fills and the exit codes, and exits 0") {
  Parse p = parse({"--help"});
  CHECK_FALSE(p.outcome.run);
  CHECK(p.outcome.exit_code == 0);
  CHECK(p.out.find("--param NAME=VALUE") != std::string::npos);
  CHECK(p.out.find("random:LO:HI") != std::string::npos);
  CHECK(p.out.find("--nodes") != std::string::npos);
  CHECK(p.out.find("--timing") != std::string::npos);
  CHECK(p.out.find("--profile FILE") != std::string::npos);
  CHECK(p.out.find("orchc --profile") != std::string::npos);
  CHECK(p.out.find("Exit codes") != std::string::npos);
  CHECK(p.out.find("3 --timeout passed") != std::string::npos);
}

TEST_CASE("usage errors are one line and exit 2") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{}, "orch-run: pipeline is required (see orch-run --help)\n"},
      {{"p.bin", "--param", "n"}, "orch-run: --param n: expected NAME=VALUE\n"},
      {{"p.bin", "--param", "=4"}, "orch-run: --param =4: expected NAME=VALUE\n"},
      {{"p.bin", "--param", "n="}, "orch-run: --param n=: the value after '=' is empty\n"},
      {{"p.bin", "--fill", "x"}, "orch-run: --fill x: expected NAME=SPEC\n"},
      {{"p.bin", "--fill", "x=random:5"}, "orch-run: --fill x=random:5: expected random:LO:HI\n"},
      {{"p.bin", "--fill", "x=file:"}, "orch-run: --fill x=file:: expected file:PATH\n"},
      {{"p.bin", "--dump", "y"}, "orch-run: --dump y: expected NAME=FILE\n"},
      {{"p.bin", "--param", "n=1", "--param", "n=2"}, "orch-run: --param n is given twice\n"},
      {{"p.bin", "--fill", "x=1", "--fill", "x=2"}, "orch-run: --fill x is given twice\n"},
      {{"p.bin", "--dump", "x=a", "--dump", "x=b"}, "orch-run: --dump x is given twice\n"},
      {{"p.bin", "--repeat", "0"}, "orch-run: --repeat: Value 0 not in range"},
      {{"p.bin", "--repeat", "many"}, "orch-run: --repeat"},
      {{"p.bin", "--warmup", "-1"}, "orch-run: --warmup"},
      {{"p.bin", "--device", "-1"}, "orch-run: --device"},
      {{"p.bin", "--timeout", "0"},
       "orch-run: --timeout: expected a positive number of seconds, not '0' (see orch-run --help)\n"},
      {{"p.bin", "--timeout", "-2"}, "orch-run: --timeout: expected a positive number of seconds, not '-2'"},
      {{"p.bin", "--timeout", "soon"}, "orch-run: --timeout: expected a positive number of seconds, not 'soon'"},
      {{"p.bin", "--timeout", "inf"}, "orch-run: --timeout: expected a positive number of seconds, not 'inf'"},
      // Past what the deadline's clock holds: refused, never a deadline in the past (issue 21).
      {{"p.bin", "--timeout", "1e10"}, "orch-run: --timeout: --timeout 1e10: at most 1e9 seconds"},
      {{"p.bin", "--timeout", "1e300"}, "orch-run: --timeout: --timeout 1e300: at most 1e9 seconds"},
      {{"p.bin", "--profile"}, "orch-run: --profile: 1 required FILE missing"},
      {{"p.bin", "--profile", "x.json", "--trace", "x.json"}, "orch-run: --profile and --trace name the same file\n"},
      {{"p.bin", "--profile", "x.json", "--roofline", "x.json"},
       "orch-run: --profile and --roofline name the same file\n"},
      {{"p.bin", "--frobnicate"}, "orch-run: The following argument was not expected: --frobnicate (see orch-run --help)\n"},
      {{"a.bin", "b.bin"}, "orch-run: The following argument was not expected: b.bin (see orch-run --help)\n"},
  };
  for (const Case& c : cases) {
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    CAPTURE(joined);
    Parse p = parse(c.args);
    CHECK_FALSE(p.outcome.run);
    CHECK(p.outcome.exit_code == 2);
    CHECK(p.err.rfind(c.message, 0) == 0);
    CHECK(p.out.empty());
  }
}

TEST_CASE("names and values are checked against the pipeline's declarations") {
  Options o;
  CHECK(check({"--param", "n=4096", "--param", "tol=1e-7", "--param", "mode=-3", "--fill", "u=random",
               "--fill", "v=0.25", "--fill", "flag=7", "--fill", "counts=random:0:9", "--dump", "u=u.bin"},
              &o) == "");
  CHECK(o.params[0].parsed.kind == orch::ScalarValue::Kind::Uint);
  CHECK(o.params[0].parsed.u == 4096);
  CHECK(o.params[1].parsed.kind == orch::ScalarValue::Kind::Float);
  CHECK(o.params[2].parsed.i == -3);
  CHECK(o.fills[0].type == ScalarType::F32);
  CHECK(o.fills[1].element.size() == 4);
  CHECK(o.fills[2].type == ScalarType::U32);
  REQUIRE(o.fills[3].range.has_value());
  CHECK(o.fills[3].range->hi.i == 9);

  CHECK(check({"--param", "m=1"}) ==
        "--param m: pipeline sample has no param `m` (its params: n, tol, mode)");
  CHECK(check({"--param", "n=-1"}) == "--param n=-1: `n` is u32; '-1' is below the range of u32");
  CHECK(check({"--param", "n=0.5"}) == "--param n=0.5: `n` is u32; '0.5' is not an integer");
  CHECK(check({"--param", "tol=small"}) == "--param tol=small: `tol` is f32; 'small' is not a number");
  CHECK(check({"--param", "rank=1"}) ==
        "--param rank: `rank` comes from the communicator (--ranks N, or the MPI launcher's environment)");
  CHECK(check({"--fill", "w=random"}) ==
        "--fill w: pipeline sample has no buffer `w` (its buffers: u, v, u_host, flag, counts)");
  CHECK(check({"--fill", "flag=0.5"}) == "--fill flag=0.5: `flag` is u32; '0.5' is not an integer");
  CHECK(check({"--fill", "counts=random:5:1"}) ==
        "--fill counts=random:5:1: `counts` is i32; the random range '5:1' has its low bound above "
        "its high bound");
  CHECK(check({"--dump", "w=out.bin"}) ==
        "--dump w: pipeline sample has no buffer `w` (its buffers: u, v, u_host, flag, counts)");
}

TEST_CASE("--list shows params with their defaults and buffers with their sizes") {
  Sample sample;
  const std::string text = list_pipeline(*sample.pipeline);
  CHECK(text.find("pipeline sample\n") == 0);
  CHECK(text.find("  param  n: u32 = 1048576\n") != std::string::npos);
  CHECK(text.find("  param  tol: f32 = 1e-06\n") != std::string::npos);
  CHECK(text.find("  param  mode: i32 (no default: --param mode=... is required)\n") != std::string::npos);
  CHECK(text.find("  buffer u_host: f32[n] host\n") != std::string::npos);
  CHECK(text.find("  buffer flag: u32\n") != std::string::npos);
  CHECK(text.find("  buffer counts: i32[ceil_div(n, 256) * 2]\n") != std::string::npos);
}

// orch-run's command line: parsed with CLI11, then checked for shape (NAME=VALUE, fill specs,
// duplicates). Nothing here needs the pipeline or a GPU; values are checked against the
// declared types later (check_against_pipeline).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "expr/expr.h"
#include "tools/orch_run/values.h"

namespace orch::run {

// Exit codes: 0 success, 1 an error (the pipeline, a file, the GPU), 2 a usage error, 3 the
// run did not finish within --timeout.
constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitTimeout = 3;

struct ParamArg {
  std::string name, value;
  // Filled by check_against_pipeline.
  ScalarValue parsed;
};

struct FillArg {
  enum class Kind { Random, Constant, File };
  std::string name;
  Kind kind = Kind::Constant;
  std::string text;   // Constant: the value; Random: "LO:HI" or empty; File: the path
  std::string spec;   // as written after '=', for messages
  // Filled by check_against_pipeline.
  ScalarType type = ScalarType::U8;
  std::vector<uint8_t> element;        // Constant: one element
  std::optional<RandomRange> range;    // Random with bounds
  // File: the bytes the buffer has, where the params alone size it (not world_size): the file's
  // size is compared with it before anything is read or any GPU is looked for.
  std::optional<uint64_t> bytes;
};

struct DumpArg {
  std::string name, path;
};

struct Options {
  std::string pipeline;
  std::vector<ParamArg> params;
  std::vector<FillArg> fills;
  std::vector<DumpArg> dumps;
  unsigned repeat = 10;
  unsigned warmup = 2;
  uint64_t seed = 1;
  int device = 0;
  bool force_ptx = false;
  bool list = false;
  bool nodes = false;  // per-node times (CUPTI) over --repeat more launches
  // --trace FILE: a Chrome/Perfetto trace of the run (host phases, and the GPU work of --repeat
  // more launches, each node named by its statement). --roofline FILE: an SVG roofline of the
  // kernel nodes, and a report. --declared-costs: the roofline uses the costs declared in the
  // .orch file even where CUPTI could measure bytes and FLOPs.
  std::string trace;
  std::string roofline;
  bool declared_costs = false;
  // --profile FILE: what --nodes measures, per statement, as the JSON profile orchc --profile
  // reads (lowering/profile.h; docs/observe.md, "--profile").
  std::string profile;
  bool timing = false;  // host time of load, instantiate and the first launch
  // --timeout: seconds for the whole run (0: none). On expiry orch-run reports what it was
  // doing and ends the process (exit 3): CUDA cannot cancel a kernel that never finishes.
  double timeout = 0;
  // What expiry does with its one-line message; empty: report_and_exit (tests replace it).
  std::function<void(const std::string&)> on_timeout;
  // Several ranks (a pipeline with a `comm`): --ranks N starts N processes of this program on
  // this host, one per GPU; under an MPI launcher the rank comes from its environment and the
  // NCCL unique id through --nccl-id-file (see docs/multi-gpu.md).
  unsigned ranks = 0;
  std::string nccl_id_file;
  std::vector<std::string> command_line;    // the arguments as given, for the rank processes
  std::string self_exe = "/proc/self/exe";  // what --ranks starts
};

struct ParseOutcome {
  bool run = false;  // go on; otherwise exit with exit_code (help printed, or a usage error)
  int exit_code = kExitOk;
};

// Parses argv (without the program name). Help goes to `out`; usage errors to `err` as one
// "orch-run: ..." line (CLI11's own errors too), exit code 2.
ParseOutcome parse_command_line(const std::vector<std::string>& args, Options* options,
                                std::ostream& out, std::ostream& err);

// Splits "NAME=VALUE"; false (with *error) when there is no '=' or the name is empty.
bool split_assignment(const std::string& text, const char* flag, std::string* name,
                      std::string* value, std::string* error);
// Parses a fill spec: random, random:LO:HI, file:PATH, or a constant.
bool parse_fill_spec(const std::string& name, const std::string& spec, FillArg* fill,
                     std::string* error);

// Checks the names against the pipeline's params and buffers and parses every value as its
// declared type. Returns an empty string, or the first problem as one line (exit code 1).
std::string check_against_pipeline(Options* options, const orch::fb::Pipeline& pipeline);

// The value param `q` has in this run: as given with --param (after check_against_pipeline),
// else its default; nullopt for neither.
std::optional<expr::Value> param_value(const Options& options, const orch::fb::Pipeline& pipeline,
                                       const orch::fb::Param& q);

// The params and buffers of a pipeline, for --list and for messages.
std::string list_pipeline(const orch::fb::Pipeline& pipeline);

}  // namespace orch::run

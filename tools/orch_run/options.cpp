#include "tools/orch_run/options.h"

#include "artifact/expr_code.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <sys/stat.h>
#include <cstdlib>
#include <ostream>
#include <set>
#include <sstream>

#include "artifact/artifact.h"

namespace orch::run {

namespace {

const char* kDescription =
    "orch-run: load a compiled orch pipeline (pipeline.bin), bind its params, fill its buffers, "
    "launch it as a CUDA graph and time the launches.";

const char* kFooter = R"(Fills (--fill NAME=SPEC; buffers not filled start zeroed):
  random          uniform random values of the element type: floats in [0, 1), integers
                  over the type's whole range, bool 0 or 1; seeded by --seed and the name
  random:LO:HI    floats in [LO, HI), integers in [LO, HI]
  file:PATH       the raw bytes of PATH, which must be exactly the buffer's size
  VALUE           every element set to VALUE (parsed as the element type: 0.5, -3, 0x10, true)
Params (--param NAME=VALUE) are parsed as their declared type; unbound params keep the
default written in the pipeline. --list shows both.

Timing: each launch is bracketed by CUDA events on the launch stream; orch-run prints the
median, p90, min and max time per launch, after the warm-up launches. --nodes then runs
--repeat more launches under CUPTI's activity tracing (libcupti from the CUDA toolkit,
loaded at run time) and prints each graph node's GPU time per launch, each named by the .orch
statement it was built for (through CUDA's graph node ids); the graph itself is launched
unchanged. --trace FILE writes those launches and the host-side phases (load, build,
instantiate, upload, launch) as a Chrome trace: open it in ui.perfetto.dev or chrome://tracing.
--roofline FILE.svg places each kernel node on the device's roofline (bytes and FLOPs from
CUPTI's range profiler, or the `cost` declared on the kernel) and says whether it is memory- or
compute-bound; the peaks come from the target profile (targets/*.yaml). Pipelines that launch
graphs from the device cannot be traced by CUPTI today: --trace then shows the host side only.
--profile FILE writes what --nodes measures as a JSON profile: each statement's GPU time
(median and least, over the --repeat profiled launches) and its kernel's launch as it ran (grid,
block, registers, shared memory), with the GPU, driver, date and params; orchc --profile FILE
then decides programmatic edges and unrolling from it (docs/observe.md, "--profile").
--timing prints the host-clock time of loading the pipeline, instantiating it (split into
building the graphs, cudaGraphInstantiate, uploading them, and the rest) and the first launch,
with the device synchronized before and after each.

--dump NAME=FILE writes the buffer's raw bytes after the last launch (warm-up launches
count, and so do the profiled launches of --nodes, --trace and --roofline: use --warmup 0
--repeat 1 without them to dump the result of exactly one run).

Several GPUs (a pipeline with a `comm`): --ranks N starts N processes on this host, rank r on
device r, and orch makes the NCCL communicator; rank 0 prints every rank's times and the
slowest rank's, which is the step time. Under an MPI launcher (mpirun -np N orch-run ...,
srun), each process takes its rank from OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE or
SLURM_PROCID/SLURM_NTASKS and its device from the local rank; rank 0 writes the NCCL unique id
to --nccl-id-file PATH (a fresh path on a file system every rank sees) and the others read it.
One process alone runs a pipeline with a `comm` as rank 0 of 1. Random fills are seeded by the
rank too, and --dump writes FILE.rank<r> for each rank. NCCL_NVLS_ENABLE=0 unless set.

--timeout SECONDS bounds the whole run: if it has not finished by then (a kernel that never
ends, a launch that waits forever), orch-run says what it was doing and ends its process,
which is what ends the GPU work (CUDA cannot cancel a running kernel).

Exit codes: 0 success; 1 an error (the pipeline, a file, a CUDA failure, no CUDA device);
2 a usage error; 3 --timeout passed.)";

}  // namespace

bool split_assignment(const std::string& text, const char* flag, std::string* name,
                      std::string* value, std::string* error) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    *error = std::string(flag) + " " + text + ": expected NAME=" +
             (std::string(flag) == "--dump" ? "FILE" : std::string(flag) == "--fill" ? "SPEC" : "VALUE");
    return false;
  }
  *name = text.substr(0, eq);
  *value = text.substr(eq + 1);
  if (value->empty()) {
    *error = std::string(flag) + " " + text + ": the value after '=' is empty";
    return false;
  }
  return true;
}

bool parse_fill_spec(const std::string& name, const std::string& spec, FillArg* fill,
                     std::string* error) {
  fill->name = name;
  fill->spec = spec;
  if (spec == "random") {
    fill->kind = FillArg::Kind::Random;
    fill->text.clear();
  } else if (spec.rfind("random:", 0) == 0) {
    fill->kind = FillArg::Kind::Random;
    fill->text = spec.substr(7);
    if (fill->text.find(':') == std::string::npos) {
      *error = "--fill " + name + "=" + spec + ": expected random:LO:HI";
      return false;
    }
  } else if (spec.rfind("file:", 0) == 0) {
    fill->kind = FillArg::Kind::File;
    fill->text = spec.substr(5);
    if (fill->text.empty()) {
      *error = "--fill " + name + "=" + spec + ": expected file:PATH";
      return false;
    }
  } else {
    fill->kind = FillArg::Kind::Constant;
    fill->text = spec;
  }
  return true;
}

ParseOutcome parse_command_line(const std::vector<std::string>& args, Options* o,
                                std::ostream& out, std::ostream& err) {
  CLI::App app{kDescription, "orch-run"};
  app.footer(kFooter);
  std::vector<std::string> params, fills, dumps;
  app.add_option("pipeline", o->pipeline, "the compiled pipeline (pipeline.bin)")->required();
  app.add_option("--param", params, "set a param: NAME=VALUE (repeatable)")
      ->allow_extra_args(false)
      ->type_name("NAME=VALUE");
  app.add_option("--fill", fills, "fill a buffer before the first launch: NAME=SPEC (repeatable)")
      ->allow_extra_args(false)
      ->type_name("NAME=SPEC");
  app.add_option("--dump", dumps, "write a buffer to a file after the last launch: NAME=FILE (repeatable)")
      ->allow_extra_args(false)
      ->type_name("NAME=FILE");
  app.add_option("--repeat", o->repeat, "timed launches (at least 1)")
      ->capture_default_str()
      ->type_name("N")
      ->check(CLI::Range(1u, 100000000u).description(""));
  app.add_option("--warmup", o->warmup, "launches before timing starts")
      ->capture_default_str()
      ->type_name("N")
      ->check(CLI::Range(0u, 100000000u).description(""));
  app.add_option("--seed", o->seed, "seed of the random fills")
      ->capture_default_str()
      ->type_name("S");
  app.add_option("--device", o->device, "the CUDA device to run on")
      ->capture_default_str()
      ->type_name("N")
      ->check(CLI::NonNegativeNumber.description(""));
  app.add_flag("--force-ptx", o->force_ptx,
               "ignore the CUBINs and JIT-compile the pipeline's PTX");
  app.add_flag("--nodes", o->nodes,
               "also time each graph node (CUPTI), over --repeat more launches");
  app.add_option("--trace", o->trace,
                 "write a Chrome/Perfetto trace (JSON) of the run: host phases and, over --repeat more launches, "
                 "every node's GPU work named by its statement")
      ->type_name("FILE");
  app.add_option("--roofline", o->roofline,
                 "write an SVG roofline of the kernel nodes (bytes and FLOPs measured by CUPTI, else as declared "
                 "with `cost`) and print a report")
      ->type_name("FILE");
  app.add_option("--profile", o->profile,
                 "write a profile (JSON) of --repeat more launches: each statement's GPU time and launch shape, "
                 "for orchc --profile")
      ->type_name("FILE");
  app.add_flag("--declared-costs", o->declared_costs,
               "--roofline: use the costs declared in the .orch file even where CUPTI can measure");
  app.add_flag("--timing", o->timing,
               "print the host time of load, instantiate (build, instantiate, upload) and the first launch");
  app.add_flag("--list", o->list,
               "print the pipeline's params and buffers and exit (no GPU needed)");
  app.add_option("--ranks", o->ranks, "run on N GPUs of this host, one process per rank")
      ->type_name("N")
      ->check(CLI::Range(1u, 1024u).description(""));
  app.add_option("--timeout", o->timeout,
                 "end the run (exit 3) if it has not finished after SECONDS: a kernel that hangs")
      ->type_name("SECONDS")
      ->check(CLI::Validator(
          [](std::string& v) {
            char* end = nullptr;
            const double d = std::strtod(v.c_str(), &end);
            if (end == v.c_str() || *end != '\0' || !(d > 0) || !std::isfinite(d))
              return "expected a positive number of seconds, not '" + v + "'";
            // The deadline is kept in the steady clock's nanoseconds (about 292 years): a longer
            // one would overflow and fire at once.
            if (d > 1e9) return "--timeout " + v + ": at most 1e9 seconds (about 31 years)";
            return std::string();
          },
          ""));
  app.add_option("--nccl-id-file", o->nccl_id_file,
                 "under an MPI launcher: where rank 0 writes the NCCL unique id for the others")
      ->type_name("PATH");

  o->command_line = args;
  // CLI11 wants argv order with the program name first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e, out, err);
    return {false, kExitOk};
  } catch (const CLI::ParseError& e) {
    err << "orch-run: " << e.what() << " (see orch-run --help)\n";
    return {false, kExitUsage};
  }

  auto usage = [&](const std::string& message) {
    err << "orch-run: " << message << "\n";
    return ParseOutcome{false, kExitUsage};
  };
  if (o->declared_costs && o->roofline.empty()) return usage("--declared-costs needs --roofline FILE");
  if (!o->trace.empty() && o->trace == o->roofline) return usage("--trace and --roofline name the same file");
  if (!o->profile.empty() && (o->profile == o->trace || o->profile == o->roofline))
    return usage(std::string("--profile and ") + (o->profile == o->trace ? "--trace" : "--roofline") +
                 " name the same file");
  std::string error, name, value;
  std::set<std::string> seen;
  for (const std::string& p : params) {
    if (!split_assignment(p, "--param", &name, &value, &error)) return usage(error);
    if (!seen.insert(name).second) return usage("--param " + name + " is given twice");
    o->params.push_back({name, value, {}});
  }
  seen.clear();
  for (const std::string& f : fills) {
    if (!split_assignment(f, "--fill", &name, &value, &error)) return usage(error);
    if (!seen.insert(name).second) return usage("--fill " + name + " is given twice");
    FillArg fill;
    if (!parse_fill_spec(name, value, &fill, &error)) return usage(error);
    o->fills.push_back(std::move(fill));
  }
  seen.clear();
  for (const std::string& d : dumps) {
    if (!split_assignment(d, "--dump", &name, &value, &error)) return usage(error);
    if (!seen.insert(name).second) return usage("--dump " + name + " is given twice");
    o->dumps.push_back({name, value});
  }
  return {true, kExitOk};
}

namespace {

const orch::fb::Param* find_param(const orch::fb::Pipeline& p, const std::string& name) {
  if (p.params())
    for (const auto* param : *p.params())
      if (param->name()->str() == name) return param;
  return nullptr;
}

const orch::fb::Buffer* find_buffer(const orch::fb::Pipeline& p, const std::string& name) {
  if (p.buffers())
    for (const auto* buffer : *p.buffers())
      if (buffer->name()->str() == name) return buffer;
  return nullptr;
}

template <class Vec>
std::string names_of(const Vec* v) {
  std::string s;
  if (v)
    for (const auto* x : *v) s += (s.empty() ? "" : ", ") + x->name()->str();
  return s.empty() ? "none" : s;
}

}  // namespace

std::optional<expr::Value> param_value(const Options& o, const orch::fb::Pipeline&, const orch::fb::Param& q) {
  for (const ParamArg& given : o.params)
    if (given.name == q.name()->str()) {
      const ScalarValue& g = given.parsed;
      const expr::Value in = g.kind == ScalarValue::Kind::Float ? expr::Value::of_double(expr::ScalarType::F64, g.f)
                             : g.kind == ScalarValue::Kind::Int ? expr::Value::of_int(expr::ScalarType::I64, g.i)
                                                                : expr::Value::of_uint(expr::ScalarType::U64, g.u);
      const expr::Outcome c = expr::convert(in, orch::artifact::to_expr(q.type()));
      if (!c.ok()) return std::nullopt;
      return c.value;
    }
  if (!q.has_default()) return std::nullopt;
  return orch::artifact::default_of(q);
}

// The bytes of buffer `b` with the params given (else their defaults), where nothing else (the
// rank, the world size, a param without a value) sizes it.
std::optional<uint64_t> buffer_bytes(const Options& o, const orch::fb::Pipeline& pipeline, const orch::fb::Buffer& b) {
  const uint64_t element = expr::size_of(orch::artifact::to_expr(b.type()));
  if (!b.count()) return element;
  const auto leaf = [&](const expr::Instr& in) -> std::optional<expr::Value> {
    if (in.kind != expr::InstrKind::Param || !pipeline.params() || in.ref < 0 ||
        static_cast<uint32_t>(in.ref) >= pipeline.params()->size())
      return std::nullopt;
    return param_value(o, pipeline, *pipeline.params()->Get(static_cast<uint32_t>(in.ref)));
  };
  const expr::Evaluation v = expr::evaluate(orch::artifact::to_expr(b.count()), leaf);
  if (!v.known() || expr::is_float(v.type)) return std::nullopt;
  const unsigned __int128 bytes = static_cast<unsigned __int128>(v.value.u64()) * element;
  if (bytes > UINT64_MAX) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::string check_against_pipeline(Options* o, const orch::fb::Pipeline& pipeline) {
  const std::string pname = pipeline.name()->str();
  std::string why;
  for (ParamArg& p : o->params) {
    const auto* decl = find_param(pipeline, p.name);
    if (!decl) {
      if (p.name == "rank" || p.name == "world_size")
        return "--param " + p.name + ": `" + p.name +
               "` comes from the communicator (--ranks N, or the MPI launcher's environment)";
      return "--param " + p.name + ": pipeline " + pname + " has no param `" + p.name +
             "` (its params: " + names_of(pipeline.params()) + ")";
    }
    if (!parse_value(p.value, decl->type(), &p.parsed, nullptr, &why))
      return "--param " + p.name + "=" + p.value + ": `" + p.name + "` is " +
             type_name(decl->type()) + "; " + why;
  }
  for (FillArg& f : o->fills) {
    const auto* decl = find_buffer(pipeline, f.name);
    if (!decl)
      return "--fill " + f.name + ": pipeline " + pname + " has no buffer `" + f.name +
             "` (its buffers: " + names_of(pipeline.buffers()) + ")";
    f.type = decl->type();
    const std::string where = "--fill " + f.name + "=" + f.spec + ": `" + f.name + "` is " +
                              type_name(f.type) + "; ";
    if (f.kind == FillArg::Kind::Constant &&
        !parse_value(f.text, f.type, nullptr, &f.element, &why))
      return where + why;
    if (f.kind == FillArg::Kind::Random && !f.text.empty()) {
      RandomRange range;
      if (!parse_range(f.text, f.type, &range, &why)) return where + why;
      f.range = range;
    }
    if (f.kind == FillArg::Kind::File) {
      f.bytes = buffer_bytes(*o, pipeline, *decl);
      struct stat st {};
      if (f.bytes && ::stat(f.text.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          static_cast<uint64_t>(st.st_size) != *f.bytes)
        return "--fill " + f.name + "=" + f.spec + ": the file has " + std::to_string(st.st_size) + " bytes; `" +
               f.name + "` is " + type_name(f.type) + "[" +
               std::to_string(*f.bytes / expr::size_of(orch::artifact::to_expr(f.type))) + "] = " +
               std::to_string(*f.bytes) + " bytes";
    }
  }
  for (const DumpArg& d : o->dumps)
    if (!find_buffer(pipeline, d.name))
      return "--dump " + d.name + ": pipeline " + pname + " has no buffer `" + d.name +
             "` (its buffers: " + names_of(pipeline.buffers()) + ")";
  return {};
}

std::string list_pipeline(const orch::fb::Pipeline& pipeline) {
  std::ostringstream s;
  s << "pipeline " << pipeline.name()->str() << "\n";
  if (pipeline.params())
    for (const auto* p : *pipeline.params()) {
      s << "  param  " << p->name()->str() << ": " << type_name(p->type());
      if (p->has_default()) {
        s << " = " << orch::artifact::default_of(*p).to_string();  // the shortest text of the value
      } else {
        s << " (no default: --param " << p->name()->str() << "=... is required)";
      }
      s << "\n";
    }
  if (pipeline.buffers())
    for (const auto* b : *pipeline.buffers()) {
      s << "  buffer " << b->name()->str() << ": " << type_name(b->type());
      if (b->count()) s << "[" << orch::artifact::expr_to_string(b->count(), pipeline) << "]";
      if (b->host()) s << " host";
      s << "\n";
    }
  if (pipeline.comms())
    for (const auto* c : *pipeline.comms()) s << "  comm   " << c->name()->str() << "\n";
  return s.str();
}

}  // namespace orch::run

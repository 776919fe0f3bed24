#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/checker.h"
#include "compiler/dag.h"
#include "compiler/kernel_source.h"
#include "grammar/parse.h"
#include "support/input_file.h"

namespace orch {

namespace detail {

namespace {
const char* kind_name(SymbolKind k) {
  switch (k) {
    case SymbolKind::Param: return "a param";
    case SymbolKind::Buffer: return "a buffer";
    case SymbolKind::Comm: return "a comm";
    case SymbolKind::Kernel: return "a kernel";
    case SymbolKind::Graph: return "a graph";
    case SymbolKind::Builtin: return "a built-in";
  }
  return "a name";
}

// Where bytes [offset, offset + length) of a kernel's code are: in the .orch file for an inline
// source (which starts at source_first_line:source_first_col), in the .cu file for `from`.
SourceRange code_range(const ir::Kernel& k, size_t offset, size_t length) {
  SourceRange r;
  if (k.source_file == 0 || offset > k.source.size()) return r;
  uint32_t line = k.source_first_line;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i)
    if (k.source[i] == '\n') ++line, line_start = i + 1;
  uint32_t col = static_cast<uint32_t>(offset - line_start) + 1;
  if (line == k.source_first_line) col += k.source_first_col - 1;
  r.file = k.source_file;
  r.begin = {line, col};
  r.end = {line, col + static_cast<uint32_t>(length)};
  return r;
}
}  // namespace

void add_access(std::vector<ir::BufferAccess>& set, int buffer, bool read, bool write) {
  if (buffer < 0) return;
  for (ir::BufferAccess& a : set) {
    if (a.buffer == buffer) {
      a.read |= read;
      a.write |= write;
      return;
    }
  }
  set.push_back({buffer, read, write});
}

Checker::Checker(const ast::Module& module, SourceManager& sources, const CheckOptions& options,
                 DiagnosticEngine& diags)
    : module_(module), sources_(sources), options_(options), diags_(diags) {}

std::unique_ptr<ir::Program> Checker::run() {
  program_ = std::make_unique<ir::Program>();
  program_->name = module_.pipeline.name;
  program_->file = module_.file;
  declare("rank", SymbolKind::Builtin, -1, {});
  declare("world_size", SymbolKind::Builtin, -1, {});
  // NVSHMEM's names for them, in pipelines with symmetric buffers (docs/multi-gpu.md, "NVSHMEM").
  declare("my_pe", SymbolKind::Builtin, -1, {});
  declare("n_pes", SymbolKind::Builtin, -1, {});
  load_target();
  check_comms();  // first: `world_size` may size buffers
  check_params();
  check_buffers();
  check_kernels();
  check_graph_headers();
  // Past the statement limit nothing is built: the graphs stay empty and unchecked.
  if (!compute_inline_sizes()) return std::move(program_);
  for (size_t g = 0; g < program_->graphs.size(); ++g) build_graph(static_cast<int>(g));
  compute_footprints();
  for (ir::Graph& g : program_->graphs) derive_edges(g.body);
  check_device_graphs();
  check_loop_conditions();
  check_nvshmem_rules();
  check_budgets();
  check_launches();
  check_bind_checks_possible();
  return std::move(program_);
}

const Symbol* Checker::lookup(const std::string& name) const {
  auto it = symbols_.find(name);
  return it == symbols_.end() ? nullptr : &it->second;
}

void Checker::declare(const std::string& name, SymbolKind kind, int index, SourceRange loc) {
  if (name.empty()) return;
  auto [it, inserted] = symbols_.emplace(name, Symbol{kind, index, loc});
  if (inserted) return;
  const Symbol& prev = it->second;
  if (prev.kind == SymbolKind::Builtin) {
    diags_.error(DiagCode::E0102, loc, "`" + name + "` is a built-in name and cannot be redeclared");
    return;
  }
  Diagnostic& d = diags_.error(DiagCode::E0102, loc,
                               "`" + name + "` is already declared as " + kind_name(prev.kind));
  diags_.add_note(d, prev.loc, "previous declaration of `" + name + "` is here");
}

void Checker::load_target() {
  std::string name = options_.target_override;
  SourceRange where;
  if (name.empty() && !module_.targets.empty()) {
    name = module_.targets.front().name;
    where = module_.targets.front().loc;
  }
  if (name.empty()) name = "sm_90";  // the default arch when a pipeline names none
  auto dirs = target_search_dirs(options_.targets_dir);
  if (auto profile = load_target_profile(name, dirs, where, diags_)) {
    program_->profile = *profile;
    profile_ok_ = true;
    program_->targets_have_pdl = profile->programmatic_dependent_launch;
  }
  // Every `target` line names an arch to build for; --target replaces them all.
  if (!options_.target_override.empty()) {
    program_->targets.push_back(program_->profile.name.empty() ? name : program_->profile.name);
  } else if (module_.targets.empty()) {
    program_->targets.push_back(name);
  } else {
    for (const ast::Ident& t : module_.targets) {
      if (&t != &module_.targets.front()) {
        auto other = load_target_profile(t.name, dirs, t.loc, diags_);  // reports unknown archs
        program_->targets_have_pdl &= other && other->programmatic_dependent_launch;
      }
      program_->targets.push_back(t.name);
    }
  }
}

void Checker::check_params() {
  for (const ast::Param& p : module_.params) {
    ir::Param out;
    out.name = p.name.name;
    out.loc = p.loc;
    auto type = ir::parse_scalar_type(p.type.name);
    if (!type) diags_.error(DiagCode::E0106, p.type.loc, "unknown type `" + p.type.name + "`");
    out.type = type.value_or(ir::ScalarType::U32);
    bool broken = !type;
    // Declared after its default is checked, so a default cannot read its own param.
    if (p.default_value) {
      out.default_value = expr(*p.default_value, ExprContext::ParamDefault, nullptr);
      if (!out.default_value) broken = true;
    }
    int index = static_cast<int>(program_->params.size());
    program_->params.push_back(std::move(out));
    param_broken_.push_back(broken);
    if (!broken && program_->params.back().default_value) {
      // A literal default takes the param's type (so `~0` as a u32 is 4294967295); any default
      // must then convert to it exactly.
      ir::Param& param = program_->params.back();
      expr::Evaluation v = finish(*param.default_value, param.type, DiagCode::E0115);
      if (!v.known()) {
        param_broken_.back() = true;
      } else if (expr::Outcome c = expr::convert(v.value, param.type); !c.ok()) {
        diags_.error(DiagCode::E0115, p.default_value->loc,
                     "default of param `" + p.name.name + "` does not fit its type: " + c.message);
        param_broken_.back() = true;
      } else {
        param.default_evaluated = c.value;
      }
    }
    declare(p.name.name, SymbolKind::Param, index, p.name.loc);
  }
}

namespace {
// The first use of `rank` or `my_pe` in an expression, or null.
const ast::Expr* pe_dependent(const ast::Expr& e) {
  if (e.kind == ast::ExprKind::Name && (e.text == "rank" || e.text == "my_pe")) return &e;
  for (const ast::ExprPtr& o : e.operands)
    if (o)
      if (const ast::Expr* found = pe_dependent(*o)) return found;
  return nullptr;
}
}  // namespace

void Checker::check_buffers() {
  bool no_comm_reported = false;
  for (const ast::Buffer& b : module_.buffers) {
    ir::Buffer out;
    out.name = b.name.name;
    out.loc = b.loc;
    out.host = b.host;
    out.keep = b.keep;
    // Attributes that change nothing: the memory plan never moves host buffers or device
    // scalars, and saying a thing twice says it once.
    for (const SourceRange& r : b.repeated_attributes)
      diags_.warning(DiagCode::W0118, r, "this attribute of buffer `" + b.name.name + "` is given twice; once is enough");
    if (b.keep && (b.host || !b.size))
      diags_.warning(DiagCode::W0118, b.keep_loc,
                     "`keep` has no effect on " + std::string(b.host ? "a `host` buffer" : "a device scalar") +
                         ": the memory plan never lets " + (b.host ? "host buffers" : "device scalars") +
                         " share memory");
    auto type = ir::parse_scalar_type(b.elem_type.name);
    if (!type) diags_.error(DiagCode::E0106, b.elem_type.loc, "unknown type `" + b.elem_type.name + "`");
    out.elem = type.value_or(ir::ScalarType::U8);
    bool broken = !type;
    // Symmetric buffers: nvshmem_malloc'ed on every PE at once, the same size everywhere, in
    // device memory, over the ranks of the pipeline's communicator.
    out.symmetric = b.symmetric;
    const ast::Expr* by_pe = b.symmetric && b.size ? pe_dependent(*b.size) : nullptr;
    if (b.symmetric) {
      if (b.host)
        diags_.error(DiagCode::E0706, b.symmetric_loc,
                     "buffer `" + b.name.name + "` cannot be both `symmetric` and `host`: NVSHMEM's "
                     "symmetric heap is device memory");
      if (b.keep)
        diags_.warning(DiagCode::W0118, b.keep_loc,
                       "`keep` has no effect on a `symmetric` buffer: the memory plan never lets symmetric "
                       "buffers share memory");
      if (module_.comms.empty() && !no_comm_reported) {
        no_comm_reported = true;
        diags_.error(DiagCode::E0707, b.symmetric_loc,
                     "symmetric buffer `" + b.name.name + "` needs a `comm`: orch starts NVSHMEM over the ranks "
                     "of the pipeline's communicator (PE r is rank r), and this pipeline declares none");
      }
      if (by_pe) {
        Diagnostic& d = diags_.error(
            DiagCode::E0708, by_pe->loc,
            "the size of symmetric buffer `" + b.name.name + "` depends on `" + by_pe->text +
                "`: NVSHMEM allocates a symmetric buffer on every PE at once, the same size on each");
        diags_.add_note(d, b.symmetric_loc, "`" + b.name.name + "` is symmetric here");
        broken = true;
      }
    }
    if (b.size && !by_pe) {
      out.count = expr(*b.size, ExprContext::Size, nullptr);
      if (!out.count) broken = true;
      if (out.count && (ir::is_float(out.count->type) || out.count->type == ir::ScalarType::Bool)) {
        diags_.error(DiagCode::E0115, b.size->loc, "size of buffer `" + b.name.name +
                                               "` must be an integer, not a " +
                                               (out.count->type == ir::ScalarType::Bool ? "bool" : "floating-point value"));
        broken = true;
      } else if (out.count) {
        expr::Evaluation v = finish(*out.count, ir::ScalarType::U64, DiagCode::E0115);
        if (v.failed()) broken = true;
        if (v.known() && (v.value.negative() || v.value.magnitude() == 0)) {
          diags_.error(DiagCode::E0115, b.size->loc,
                       "buffer `" + b.name.name + "` has " + v.value.to_string() + " elements" +
                           default_values_note(*out.count) + "; a buffer needs at least one");
        } else if (type) {
          // Its bytes must be countable: count * element size fits u64.
          const uint64_t limit = UINT64_MAX / ir::size_of(*type);
          if (v.known() && v.value.magnitude() > limit) {
            diags_.error(DiagCode::E0116, b.size->loc,
                         "buffer `" + b.name.name + "` has " + v.value.to_string() + " " +
                             ir::to_string(*type) + " elements" + default_values_note(*out.count) +
                             ": its size in bytes does not fit u64 (at most " +
                             std::to_string(limit) + " elements)");
          } else if (ir::depends_on_host_values(*out.count) && !ir::is_float(out.count->type) &&
                     (expr::is_signed(out.count->type) ? uint64_t(INT64_MAX) : expr::bit_width(out.count->type) == 64
                                                                                   ? UINT64_MAX
                                                                                   : (uint64_t(1) << expr::bit_width(out.count->type)) - 1) > limit) {
            // Only a count whose type reaches past the limit can exceed it at bind time.
            program_->bind_checks.push_back(
                {DiagCode::E0116, "buffer `" + b.name.name + "` has at most " + std::to_string(limit) + " elements",
                 make_binary(expr::Op::Le, *out.count, ir::constant(ir::Value::of_uint(ir::ScalarType::U64, limit))),
                 b.size->loc});
          }
        }
      }
      if (!out.count || broken) out.count = ir::constant(ir::Value::of_uint(ir::ScalarType::U64, 1), b.size->loc);
    } else if (by_pe) {
      out.count = ir::constant(ir::Value::of_uint(ir::ScalarType::U64, 1), b.size->loc);  // reported above
    }
    buffer_broken_.push_back(broken);
    declare(b.name.name, SymbolKind::Buffer, static_cast<int>(program_->buffers.size()),
            b.name.loc);
    program_->buffers.push_back(std::move(out));
  }
}

void Checker::check_comms() {
  for (const ast::Comm& c : module_.comms) {
    declare(c.name.name, SymbolKind::Comm, static_cast<int>(program_->comms.size()), c.name.loc);
    program_->comms.push_back({c.name.name, c.loc});
  }
}

void Checker::check_kernels() {
  for (const ast::Kernel& k : module_.kernels) {
    ir::Kernel out;
    check_kernel(k, out);
    declare(k.name.name, SymbolKind::Kernel, static_cast<int>(program_->kernels.size()),
            k.name.loc);
    program_->kernels.push_back(std::move(out));
  }
}

void Checker::check_kernel(const ast::Kernel& k, ir::Kernel& out) {
  out.name = k.name.name;
  out.loc = k.loc;
  out.entry = k.entry ? k.entry->name : k.name.name;
  for (const SourceRange& r : k.duplicate_clauses)
    diags_.error(DiagCode::E0110, r, "kernel `" + k.name.name + "` has more than one source or entry");
  if (k.inline_source) {
    out.inline_source = true;
    out.source = k.inline_source->name;
    out.source_file = module_.file;
    out.source_first_line = k.inline_first_line;
    out.source_first_col = k.inline_first_col;
  } else if (k.from_file) {
    namespace fs = std::filesystem;
    fs::path base = fs::path(sources_.path(module_.file)).parent_path();
    fs::path path = base / k.from_file->name;
    InputFile in = read_input_file(path.string());
    if (in.status == InputFile::Status::TooLarge) {
      diags_.error(DiagCode::E0005, k.from_file->loc,
                   "kernel source `" + k.from_file->name + "` is " + std::to_string(in.size) +
                       " bytes; orchc reads at most " + std::to_string(kMaxInputBytes) +
                       " bytes from one input file");
    } else if (in.status != InputFile::Status::Ok) {
      diags_.error(DiagCode::E0110, k.from_file->loc,
                   "cannot read kernel source `" + k.from_file->name + "` (looked for " +
                       path.string() + "): " + in.error);
    } else {
      out.source = std::move(in.text);
      out.source_path = path.string();
      out.source_file = sources_.add(path.string(), out.source);
    }
  } else {
    diags_.error(DiagCode::E0110, k.name.loc,
                 "kernel `" + k.name.name +
                     "` has no code; add `from \"file.cu\"` or `source \"\"\"...\"\"\"`");
  }
  if (!out.source.empty()) {
    KernelSourceScan scan = scan_kernel_source(out.source, out.entry);
    out.may_launch_kernels = scan.mentions_launch;
    if (scan.signature != KernelSourceScan::npos) {
      std::string base = out.entry.substr(0, out.entry.find('<'));
      if (size_t c = base.rfind("::"); c != std::string::npos) base = base.substr(c + 2);
      out.signature_in_source = code_range(out, scan.signature, base.size());
    }
    if (scan.launch != KernelSourceScan::npos)
      out.launch_in_source = code_range(out, scan.launch, scan.launch_length);
  }

  std::map<std::string, SourceRange> seen;
  std::vector<bool>& broken = kernel_param_broken_.emplace_back();
  for (const ast::KernelParam& p : k.params) {
    broken.push_back(false);
    ir::KernelParam param;
    param.name = p.name.name;
    param.loc = p.loc;
    if (auto [it, inserted] = seen.emplace(p.name.name, p.name.loc); !inserted) {
      Diagnostic& d = diags_.error(DiagCode::E0102, p.name.loc,
                                   "kernel `" + k.name.name + "` has two parameters named `" +
                                       p.name.name + "`");
      diags_.add_note(d, it->second, "first one is here");
    }
    param.access = static_cast<ir::Access>(p.access);
    switch (p.kind) {
      case ast::KernelParamKind::Cond:
        param.kind = ir::KernelParamKind::Cond;
        out.uses_device_runtime = true;
        break;
      case ast::KernelParamKind::Graph:
        param.kind = ir::KernelParamKind::Graph;
        out.uses_device_runtime = true;
        break;
      case ast::KernelParamKind::GraphFamily:
        param.kind = ir::KernelParamKind::GraphFamily;
        out.uses_device_runtime = true;
        if (auto n = constant_uint(*p.family_size, "the size of a graph family")) {
          if (*n == 0)
            diags_.error(DiagCode::E0115, p.family_size->loc, "a graph family has at least one member");
          param.family_size = static_cast<uint32_t>(std::min<uint64_t>(*n, UINT32_MAX));
        }
        if (param.family_size == 0) broken.back() = true;
        break;
      case ast::KernelParamKind::Data: {
        auto type = ir::parse_scalar_type(p.elem_type.name);
        if (!type) {
          diags_.error(DiagCode::E0106, p.elem_type.loc, "unknown type `" + p.elem_type.name + "`");
          broken.back() = true;
        }
        param.elem = type.value_or(ir::ScalarType::U8);
        if (p.is_array) {
          param.kind = ir::KernelParamKind::Array;
          if (p.access == ast::Access::None)
            diags_.error(DiagCode::E0110, p.loc,
                         "array parameter `" + p.name.name +
                             "` needs an access mode (`in`, `out` or `inout`): the compiler "
                             "orders statements by what they read and write");
        } else {
          param.kind = p.access == ast::Access::None ? ir::KernelParamKind::Value
                                                     : ir::KernelParamKind::Scalar;
        }
        break;
      }
    }
    if (p.kind != ast::KernelParamKind::Data && p.access != ast::Access::None)
      diags_.error(DiagCode::E0110, p.loc,
                   "parameter `" + p.name.name + "` is a " +
                       (p.kind == ast::KernelParamKind::Cond ? "`cond`" : "`graph`") +
                       " and takes no access mode");
    out.params.push_back(std::move(param));
  }

  // Launch budgets: one per graph parameter, each within what one graph execution may do.
  const TargetProfile& prof = program_->profile;
  std::vector<bool> budgeted(out.params.size(), false);
  for (const ast::LaunchBudget& b : k.budgets) {
    ir::LaunchBudget budget;
    budget.mode = static_cast<ir::LaunchMode>(b.mode);
    budget.loc = b.loc;
    for (size_t i = 0; i < out.params.size(); ++i)
      if (out.params[i].name == b.param.name) budget.param = static_cast<int>(i);
    if (budget.param < 0) {
      diags_.error(DiagCode::E0605, b.param.loc,
                   "kernel `" + k.name.name + "` has no parameter `" + b.param.name + "`");
      continue;
    }
    const ir::KernelParam& p = out.params[budget.param];
    if (p.kind != ir::KernelParamKind::Graph && p.kind != ir::KernelParamKind::GraphFamily) {
      Diagnostic& d = diags_.error(DiagCode::E0605, b.param.loc,
                                   "launch budget names `" + b.param.name +
                                       "`, which is not a `graph` parameter");
      diags_.add_note(d, p.loc, "`" + b.param.name + "` is declared here");
      continue;
    }
    budgeted[budget.param] = true;
    auto limit = constant_uint(*b.limit, "a launch budget");
    if (!limit) continue;
    budget.limit = *limit;
    if (!profile_ok_) {
      // Limits come from the profile, which did not load (reported).
    } else if (budget.mode == ir::LaunchMode::Tail && budget.limit > prof.max_tail_launches) {
      diags_.error(DiagCode::E0602, b.loc,
                   "kernel `" + k.name.name + "` may leave " + std::to_string(budget.limit) +
                       " tail launches pending, but one graph execution allows at most " +
                       std::to_string(prof.max_tail_launches));
    } else if (budget.mode != ir::LaunchMode::Tail &&
               budget.limit > prof.max_fire_and_forget_launches) {
      diags_.error(DiagCode::E0601, b.loc,
                   "kernel `" + k.name.name + "` may make " + std::to_string(budget.limit) +
                       " fire-and-forget launches, but one graph execution allows at most " +
                       std::to_string(prof.max_fire_and_forget_launches));
    }
    // A graph[N] argument is launched member by member, each at most once per execution
    // (E0608 counts them so): a budget over N would launch some member twice.
    if (p.kind == ir::KernelParamKind::GraphFamily && p.family_size > 0 &&
        budget.limit > p.family_size)
      diags_.error(DiagCode::E0608, b.loc,
                   "kernel `" + k.name.name + "` may make " + std::to_string(budget.limit) +
                       " launches from `" + p.name + "`, a family of " +
                       std::to_string(p.family_size) +
                       " graphs, so it would launch some member twice; an executable graph "
                       "runs one launch at a time");
    out.budgets.push_back(budget);
  }
  for (size_t i = 0; i < out.params.size(); ++i) {
    const ir::KernelParam& p = out.params[i];
    if ((p.kind == ir::KernelParamKind::Graph || p.kind == ir::KernelParamKind::GraphFamily) &&
        !budgeted[i])
      diags_.error(DiagCode::E0605, p.loc,
                   "graph parameter `" + p.name + "` of kernel `" + k.name.name +
                       "` has no launch budget; declare one, e.g. `launches " + p.name +
                       " tail <= 1`");
  }
  check_cost(k, out);
}

// `cost bytes <expr>, flops[<precision>] <expr>`: the items, their precision, and the names and
// operators of their expressions. Each launch checks the expression again with its arguments in
// place of the parameters (launch_cost), which gives the types.
void Checker::check_cost(const ast::Kernel& k, ir::Kernel& out) {
  bool seen_bytes = false, seen_flops = false;
  for (const ast::CostItem& c : k.costs) {
    const std::string& what = c.what.name;
    if (what != "bytes" && what != "flops") {
      diags_.error(DiagCode::E0117, c.what.loc,
                   "`" + what + "` is not a cost; a kernel's cost is `bytes` and `flops` (e.g. `cost bytes 12 * n, "
                   "flops 2 * n`)");
      out.cost_ok = false;
      continue;
    }
    bool& seen = what == "bytes" ? seen_bytes : seen_flops;
    if (seen) {
      diags_.error(DiagCode::E0117, c.loc, "kernel `" + k.name.name + "` declares its `" + what + "` cost twice");
      out.cost_ok = false;
      continue;
    }
    seen = true;
    if (c.precision) {
      const std::optional<ir::ScalarType> t = ir::parse_scalar_type(c.precision->name);
      if (what == "bytes") {
        diags_.error(DiagCode::E0117, c.precision->loc,
                     "`bytes` counts bytes and takes no precision; the precision goes on `flops`, e.g. "
                     "`flops[f64] 2 * n`");
        out.cost_ok = false;
      } else if (!t || (*t != ir::ScalarType::F16 && *t != ir::ScalarType::F32 && *t != ir::ScalarType::F64)) {
        diags_.error(DiagCode::E0117, c.precision->loc,
                     "`flops[" + c.precision->name + "]`: the precision of FLOPs is f16, f32 or f64");
        out.cost_ok = false;
      } else {
        out.cost_precision = *t;
      }
    }
    // Names must be value parameters, and the arithmetic plain (orch-run evaluates it in
    // double precision, so large counts cannot overflow the parameters' types).
    std::vector<const ast::Expr*> stack{c.value.get()};
    while (!stack.empty()) {
      const ast::Expr* e = stack.back();
      stack.pop_back();
      if (!e) continue;
      for (const ast::ExprPtr& o : e->operands) stack.push_back(o.get());
      const SourceRange at = e->name_loc.valid() ? e->name_loc : e->loc;
      switch (e->kind) {
        case ast::ExprKind::Int:
        case ast::ExprKind::Float:
          break;
        case ast::ExprKind::Bool:
          diags_.error(DiagCode::E0117, e->loc, "a cost is a number of bytes or FLOPs, not a bool");
          out.cost_ok = false;
          break;
        case ast::ExprKind::Name: {
          const ir::KernelParam* p = nullptr;
          for (const ir::KernelParam& q : out.params)
            if (q.name == e->text) p = &q;
          if (!p) {
            diags_.error(DiagCode::E0117, e->loc,
                         "`" + e->text + "` is not a parameter of kernel `" + k.name.name +
                             "`; a cost is written over the kernel's value parameters");
            out.cost_ok = false;
          } else if (p->kind != ir::KernelParamKind::Value) {
            Diagnostic& d = diags_.error(DiagCode::E0117, e->loc,
                                         "`" + e->text +
                                             "` is not a value parameter; a cost is written over the values a "
                                             "launch passes, such as `n: u32`");
            diags_.add_note(d, p->loc, "`" + e->text + "` is declared here");
            out.cost_ok = false;
          }
          break;
        }
        case ast::ExprKind::Unary:
          if (e->text != "-" && e->text != "+") {
            diags_.error(DiagCode::E0117, at, "`" + e->text + "` in a cost: a cost is arithmetic (+ - * / % << >> min max ceil_div)");
            out.cost_ok = false;
          }
          break;
        case ast::ExprKind::Binary: {
          static const char* const kOps[] = {"+", "-", "*", "/", "%", "<<", ">>"};
          if (std::find(std::begin(kOps), std::end(kOps), e->text) == std::end(kOps)) {
            diags_.error(DiagCode::E0117, at, "`" + e->text + "` in a cost: a cost is arithmetic (+ - * / % << >> min max ceil_div)");
            out.cost_ok = false;
          }
          break;
        }
        case ast::ExprKind::Call:
          if (e->text != "min" && e->text != "max" && e->text != "ceil_div") {
            diags_.error(DiagCode::E0117, at, "`" + e->text + "` in a cost: a cost is arithmetic (+ - * / % << >> min max ceil_div)");
            out.cost_ok = false;
          }
          break;
      }
    }
  }
  out.has_cost = seen_bytes || seen_flops;
}

void Checker::check_graph_headers() {
  for (const ast::Graph& g : module_.graphs) {
    ir::Graph out;
    out.name = g.name.name;
    out.device = g.device;
    out.loc = g.loc;
    if (g.family_index) {
      out.family_index = g.family_index->name;
      if (!g.device)
        diags_.error(DiagCode::E0504, g.name.loc,
                     "graph family `" + g.name.name +
                         "` must be a device graph: families exist to be launched from the GPU");
      if (auto n = constant_uint(*g.family_size, "the size of a graph family")) {
        if (*n == 0 || *n > ir::kMaxFamilySize)
          diags_.error(DiagCode::E0115, g.family_size->loc,
                       "graph family `" + g.name.name + "` must have 1 to " +
                           std::to_string(ir::kMaxFamilySize) + " members, not " +
                           std::to_string(*n));
        else
          out.family_size = static_cast<uint32_t>(*n);
      }
      if (out.family_size == 0) out.family_size = 1;
      if (lookup(g.family_index->name))
        diags_.error(DiagCode::E0102, g.family_index->loc,
                     "family index `" + g.family_index->name + "` hides a declaration of the same name");
    }
    if (g.device && !program_->profile.supports_device_launch)
      diags_.error(DiagCode::E0505, g.name.loc,
                   "target " + program_->profile.name + " does not support graphs launched from the device");
    declare(g.name.name, SymbolKind::Graph, static_cast<int>(program_->graphs.size()),
            g.name.loc);
    program_->graphs.push_back(std::move(out));
    graph_asts_.push_back(&g);
  }
  footprints_.resize(program_->graphs.size());
  const Symbol* main = lookup("main");
  if (!main || main->kind != SymbolKind::Graph) {
    diags_.error(DiagCode::E0112, module_.pipeline.loc,
                 "pipeline `" + module_.pipeline.name +
                     "` has no `graph main`, the graph the application launches");
    return;
  }
  program_->main_graph = main->index;
  const ir::Graph& g = program_->graphs[main->index];
  if (g.device || !g.family_index.empty())
    diags_.error(DiagCode::E0112, g.loc,
                 "`graph main` is launched from the host; it cannot be a device graph or a family");
}

}  // namespace detail

std::unique_ptr<ir::Program> check_module(const ast::Module& module, SourceManager& sources,
                                          const CheckOptions& options, DiagnosticEngine& diags) {
  detail::Checker checker(module, sources, options, diags);
  return checker.run();
}

CheckResult check_text(const std::string& path, std::string text, SourceManager& sources,
                       const CheckOptions& options, DiagnosticEngine& diags) {
  CheckResult result;
  uint32_t file = sources.add(path, std::move(text));
  result.module = parse_module(sources, file, diags);
  // Syntax errors leave a partial tree; checking it would only report their echoes.
  if (diags.has_errors()) return result;
  result.program = check_module(*result.module, sources, options, diags);
  return result;
}

CheckResult check_file(const std::string& path, SourceManager& sources,
                       const CheckOptions& options, DiagnosticEngine& diags) {
  InputFile in = read_input_file(path);
  if (in.status == InputFile::Status::TooLarge) {
    diags.error(DiagCode::E0005, {},
                "`" + path + "` is " + std::to_string(in.size) + " bytes; orchc reads at most " +
                    std::to_string(kMaxInputBytes) + " bytes from one input file");
    return {};
  }
  if (in.status != InputFile::Status::Ok) {
    diags.error(DiagCode::E0004, {}, "cannot read `" + path + "`: " + in.error);
    return {};
  }
  return check_text(path, std::move(in.text), sources, options, diags);
}

}  // namespace orch

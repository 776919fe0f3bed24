#include <algorithm>
#include <map>

#include "compiler/checker.h"
#include "support/overloaded.h"

namespace orch::detail {

namespace {

// A typed constant of the checker's own (comparisons in bind checks are exact across types).
ir::Expr constant(int64_t v, const SourceRange& loc = {}, ir::ScalarType t = ir::ScalarType::I64) {
  return ir::constant(ir::Value::of_int(t, v), loc);
}

ir::Expr binary(expr::Op op, ir::Expr a, ir::Expr b) { return make_binary(op, std::move(a), std::move(b)); }

// The elements of a buffer count (counts are checked positive where declared).
uint64_t elements(const ir::Value& v) { return v.magnitude(); }

void collect_device_reads(const ir::Expr& e, std::vector<ir::BufferAccess>& out) {
  if (e.kind == ir::ExprKind::DeviceScalar) add_access(out, e.ref, true, false);
  for (const ir::Expr& o : e.operands) collect_device_reads(o, out);
}

bool has_family_index(const ir::Expr& e) {
  if (e.kind == ir::ExprKind::FamilyIndex) return true;
  for (const ir::Expr& o : e.operands)
    if (has_family_index(o)) return true;
  return false;
}

bool reads_rank(const ir::Expr& e) {
  if (e.kind == ir::ExprKind::Rank) return true;
  for (const ir::Expr& o : e.operands)
    if (reads_rank(o)) return true;
  return false;
}

const char* dim_name(int i) { return i == 0 ? "x" : i == 1 ? "y" : "z"; }

const std::string& kernel_name(const ir::Program& p, const ir::Node& n) {
  return p.kernels[n.kernel].name;
}

}  // namespace

ir::Node Checker::make_node(ir::NodeKind kind, const ast::Stmt& s, const BodyContext& ctx) const {
  ir::Node node;
  node.kind = kind;
  node.loc = s.loc;
  node.call_stack = ctx.call_stack;
  return node;
}

void Checker::build_graph(int g) {
  const ast::Graph& ast_graph = *graph_asts_[g];
  ir::Graph& out = program_->graphs[g];
  BodyContext ctx;
  ctx.graph = g;
  ctx.device = out.device;
  ctx.family_index = out.family_index;
  ctx.family_size = out.family_size;
  // A graph only `call`ed is checked alone too (for its own mistakes), but what `self` and
  // launches mean depends on the graph it is inlined into, where they are checked.
  ctx.helper = !out.device && g != program_->main_graph;
  ctx.inlining = {g};
  block(ast_graph.body, ctx, out.body);
}

void Checker::block(const ast::Block& b, BodyContext& ctx, ir::Region& out) {
  for (const ast::Stmt& s : b) stmt(s, ctx, out);
}

void Checker::stmt(const ast::Stmt& s, BodyContext& ctx, ir::Region& out) {
  std::visit(overloaded{
                 [&](const ast::KernelLaunch& n) { kernel_launch(s, n, ctx, out); },
                 [&](const ast::Copy& n) { copy(s, n, ctx, out); },
                 [&](const ast::Fill& n) { fill(s, n, ctx, out); },
                 [&](const ast::Assign& n) { assign(s, n, ctx, out); },
                 [&](const ast::If& n) { if_stmt(s, n, ctx, out); },
                 [&](const ast::While& n) { while_stmt(s, n, ctx, out); },
                 [&](const ast::Switch& n) { switch_stmt(s, n, ctx, out); },
                 [&](const ast::Call& n) { call(s, n, ctx, out); },
                 [&](const ast::LaunchGraph& n) { launch_graph(s, n, ctx, out); },
                 [&](const ast::Collective& n) { collective(s, n, ctx, out); },
             },
             s.node);
}

int Checker::buffer_ref(const ast::Ident& name, const char* role) {
  const Symbol* sym = lookup(name.name);
  if (!sym) {
    diags_.error(DiagCode::E0101, name.loc, "buffer `" + name.name + "` is not declared");
    return -1;
  }
  if (sym->kind != SymbolKind::Buffer) {
    Diagnostic& d = diags_.error(DiagCode::E0104, name.loc,
                                 "the " + std::string(role) + " must be a buffer, but `" +
                                     name.name + "` is not one");
    if (sym->loc.valid()) diags_.add_note(d, sym->loc, "`" + name.name + "` is declared here");
    return -1;
  }
  if (buffer_broken_[sym->index]) return -1;  // its declaration was reported
  return sym->index;
}

void Checker::device_launch_placement(const SourceRange& where, const std::string& what,
                                      const BodyContext& ctx) {
  if (ctx.loop_depth > 0) {
    Diagnostic& d = diags_.error(
        DiagCode::E0604, where,
        what + " inside a `while` loop: the loop has no trip bound, so neither have the launches "
               "one graph execution makes");
    diags_.add_note(d, ctx.loop_loc, "the loop is here");
  } else if (ctx.conditional_depth > 0) {
    Diagnostic& d = diags_.error(
        DiagCode::E0402, where,
        what + " inside a conditional body: an executable graph that holds both conditional "
               "nodes and device graph launches hangs, and a conditional body cannot be split "
               "into separate graphs");
    diags_.add_note(d, ctx.conditional_loc, "the conditional is here");
  }
}

// CUDA dynamic parallelism: "Use of CUDA Dynamic Parallelism is not permitted" in a graph
// instantiated for device launch (doc comment of cudaGraphInstantiate), and "Use of CUDA Dynamic
// Parallelism or Device Graph Launch by kernels in the graph is not permitted" in a conditional
// node's body (CUDA C++ Programming Guide, "Conditional Node Body Graph Requirements").
void Checker::kernel_launch_placement(const ast::Stmt& s, const ir::Kernel& k,
                                      const BodyContext& ctx) {
  const std::string what =
      "kernel `" + k.name + "` launches kernels from the device (CUDA dynamic parallelism), which ";
  if (ctx.device) {
    Diagnostic& d =
        diags_.error(DiagCode::E0506, s.loc, what + "a graph launched from the device cannot hold");
    diags_.add_note(d, k.launch_in_source, "`" + k.name + "` launches a kernel here");
    diags_.add_note(d, program_->graphs[ctx.graph].loc,
                    "`" + program_->graphs[ctx.graph].name + "` is a device graph");
  } else if (ctx.conditional_depth > 0) {
    Diagnostic& d = diags_.error(DiagCode::E0507, s.loc, what + "a conditional body cannot hold");
    diags_.add_note(d, k.launch_in_source, "`" + k.name + "` launches a kernel here");
    diags_.add_note(d, ctx.conditional_loc, "the conditional is here");
  }
}

// ---- kernel launches ---------------------------------------------------------------------

bool Checker::launch_shape(const ast::Expr* e, const char* what, ir::Expr out[3],
                           SourceRange* loc, BodyContext& ctx) {
  if (!e) return false;
  *loc = e->loc;
  std::vector<const ast::Expr*> dims;
  if (e->kind == ast::ExprKind::Call && e->text == "dim3") {
    if (e->operands.empty() || e->operands.size() > 3) {
      diags_.error(DiagCode::E0109, e->loc, "`dim3` takes 1 to 3 dimensions");
      return false;
    }
    for (const auto& o : e->operands) dims.push_back(o.get());
  } else {
    dims.push_back(e);
  }
  bool ok = true;
  for (int i = 0; i < 3; ++i) {
    if (i >= static_cast<int>(dims.size())) {
      out[i] = constant(1, e->loc, ir::ScalarType::U32);
      continue;
    }
    auto x = expr(*dims[i], ExprContext::Host, &ctx);
    if (!x) {
      ok = false;
      continue;
    }
    if (!ir::is_float(x->type) && finish(*x, ir::ScalarType::U32, what[0] == 'g' ? DiagCode::E0203 : DiagCode::E0202).failed()) {
      ok = false;
      continue;
    }
    if (ir::is_float(x->type)) {
      diags_.error(DiagCode::E0109, dims[i]->loc,
                   std::string("the ") + what + " must be an integer, not a floating-point value");
      ok = false;
      continue;
    }
    out[i] = std::move(*x);
  }
  return ok;
}

void Checker::check_shape_limits(const ast::Stmt& s, const ir::Node& node,
                                 const BodyContext& ctx) {
  if (!profile_ok_) return;  // no limits to check against; the profile error says why
  const TargetProfile& prof = program_->profile;
  const std::string& kname = kernel_name(*program_, node);
  // Family members may shape their launches by their index: check every member.
  bool by_member = false;
  for (int i = 0; i < 3; ++i)
    by_member |= has_family_index(node.grid[i]) || has_family_index(node.block[i]);
  by_member |= has_family_index(node.shared_bytes);
  uint32_t members = by_member ? std::max<uint32_t>(ctx.family_size, 1) : 1;

  struct Limit {
    DiagCode code;
    std::string message;
    ir::Expr value;  // must be <= max
    uint64_t max;
    int64_t min;
    SourceRange loc;
    int dim = -1;  // the dimension of a block or grid limit
  };
  std::vector<Limit> limits;
  ir::Expr threads = binary(expr::Op::Mul, binary(expr::Op::Mul, node.block[0], node.block[1]), node.block[2]);
  threads.loc = node.block[0].loc;
  for (int i = 0; i < 3; ++i) {
    limits.push_back({DiagCode::E0202,
                      "block of `" + kname + "` has {} threads in " + dim_name(i) + "; " +
                          prof.name + " allows at most " + std::to_string(prof.max_block_dim[i]),
                      node.block[i], prof.max_block_dim[i], 1, node.block[i].loc, i});
  }
  limits.insert(limits.begin(),
                Limit{DiagCode::E0201,
                      "block of `" + kname + "` has {} threads; " + prof.name +
                          " allows at most " + std::to_string(prof.max_threads_per_block) +
                          " per block",
                      threads, prof.max_threads_per_block, 0, node.block_loc});
  for (int i = 0; i < 3; ++i)
    limits.push_back({DiagCode::E0203,
                      "grid of `" + kname + "` has {} blocks in " + dim_name(i) + "; " +
                          prof.name + " allows at most " + std::to_string(prof.max_grid_dim[i]),
                      node.grid[i], prof.max_grid_dim[i], 1, node.grid[i].loc, i});
  limits.push_back({DiagCode::E0204,
                    "launch of `" + kname + "` asks for {} bytes of dynamic shared memory; " +
                        prof.name + " allows at most " +
                        std::to_string(prof.max_shared_bytes_per_block_optin) + " per block",
                    node.shared_bytes, prof.max_shared_bytes_per_block_optin, 0,
                    node.shared_bytes.loc.valid() ? node.shared_bytes.loc : s.loc});

  bool block_reported = false;
  for (const Limit& l : limits) {
    bool dynamic = ir::depends_on_host_values(l.value);
    if (l.code == DiagCode::E0202 && block_reported) continue;
    for (uint32_t m = 0; m < members; ++m) {
      auto v = evaluate(l.value, by_member ? std::optional<uint32_t>(m) : std::nullopt);
      if (!v) break;
      std::string message = l.message;
      message.replace(message.find("{}"), 2, v->to_string());
      if (v->negative() || v->magnitude() < static_cast<uint64_t>(l.min)) {
        std::string what = l.code == DiagCode::E0203 ? "grid" : "block";
        diags_.error(DiagCode::E0205, l.loc,
                     what + " of `" + kname + "` is empty (" + v->to_string() + ")" +
                         default_values_note(l.value));
        if (what == "block") block_reported = true;
        break;
      }
      if (v->magnitude() > l.max) {
        std::string member = by_member ? " for member " + std::to_string(m) : "";
        diags_.error(l.code, l.loc, message + member + default_values_note(l.value));
        if (l.code == DiagCode::E0201) block_reported = true;
        break;
      }
    }
    if (dynamic) {
      // A shape from the family index is checked for every member at bind time.
      const uint32_t members = has_family_index(l.value) ? ctx.family_size : 0;
      // The upper bound first: an expression that cannot be evaluated (an overflow) is reported
      // with the check that names the shape's limit.
      std::string message = l.message;
      message.replace(message.find("{}"), 2, "too many");
      program_->bind_checks.push_back(
          {l.code, message, binary(expr::Op::Le, l.value, constant(static_cast<int64_t>(l.max))),
           l.loc, members});
      // The lower bound is a check of its own, so that a binding making a shape empty is
      // reported as empty (E0205), not as too large. The thread count needs none: each block
      // dimension has one.
      const DiagCode code = l.code;
      if (code == DiagCode::E0202 || code == DiagCode::E0203) {
        const bool grid = code == DiagCode::E0203;
        const std::string dim = dim_name(l.dim);
        program_->bind_checks.push_back(
            {DiagCode::E0205,
             std::string(grid ? "grid" : "block") + " of `" + kname + "` is empty in " + dim + " (no " +
                 (grid ? "blocks" : "threads") + ")",
             binary(expr::Op::Ge, l.value, constant(l.min)), l.loc, members});
      } else if (code == DiagCode::E0204) {
        program_->bind_checks.push_back(
            {l.code, "launch of `" + kname + "` asks for a negative number of bytes of dynamic shared memory",
             binary(expr::Op::Ge, l.value, constant(l.min)), l.loc, members});
      }
    }
  }
}

std::optional<ir::KernelArg> Checker::kernel_arg(const ast::Expr& arg, const ir::Kernel& k,
                                                 const ir::KernelParam& p, BodyContext& ctx) {
  ir::KernelArg out;
  out.loc = arg.loc;
  const bool is_name = arg.kind == ast::ExprKind::Name;
  const Symbol* sym = is_name ? lookup(arg.text) : nullptr;
  auto param_desc = [&]() {
    return "parameter `" + p.name + "` of `" + k.name + "`";
  };
  auto note_param = [&](Diagnostic& d) { diags_.add_note(d, p.loc, "`" + p.name + "` is declared here"); };
  size_t kernel_index = static_cast<size_t>(&k - program_->kernels.data());
  size_t param_index = static_cast<size_t>(&p - k.params.data());
  if (kernel_index < kernel_param_broken_.size() &&
      param_index < kernel_param_broken_[kernel_index].size() &&
      kernel_param_broken_[kernel_index][param_index]) {
    if (p.kind == ir::KernelParamKind::Cond && ctx.cond_used) *ctx.cond_used = true;
    return std::nullopt;  // the parameter's declaration was reported
  }

  switch (p.kind) {
    case ir::KernelParamKind::Value: {
      if (sym && sym->kind == SymbolKind::Buffer && !program_->buffers[sym->index].is_scalar()) {
        Diagnostic& d = diags_.error(DiagCode::E0104, arg.loc,
                                     "`" + arg.text + "` is an array buffer, but " + param_desc() +
                                         " takes a " + ir::to_string(p.elem) + " value");
        note_param(d);
        return std::nullopt;
      }
      if (sym && (sym->kind == SymbolKind::Graph || sym->kind == SymbolKind::Kernel ||
                  sym->kind == SymbolKind::Comm)) {
        Diagnostic& d = diags_.error(DiagCode::E0104, arg.loc,
                                     "`" + arg.text + "` is not a value, but " + param_desc() +
                                         " takes a " + ir::to_string(p.elem) + " value");
        note_param(d);
        return std::nullopt;
      }
      in_value_arg_ = true;
      auto x = expr(arg, ExprContext::Host, &ctx);
      in_value_arg_ = false;
      if (!x) return std::nullopt;
      if (ir::is_float(x->type) && !ir::is_float(p.elem)) {
        Diagnostic& d = diags_.error(DiagCode::E0104, arg.loc,
                                     param_desc() + " is " + ir::to_string(p.elem) +
                                         ", but the argument is a floating-point value");
        note_param(d);
        return std::nullopt;
      }
      // A literal argument takes the parameter's type; any argument converts to it exactly.
      expr::Evaluation v = finish(*x, p.elem, DiagCode::E0104);
      if (v.failed()) return std::nullopt;
      if (v.known()) {
        if (expr::Outcome c = expr::convert(v.value, p.elem); !c.ok()) {
          Diagnostic& d = diags_.error(DiagCode::E0104, arg.loc,
                                       "argument does not fit " + param_desc() + ": " + c.message +
                                           default_values_note(*x));
          note_param(d);
          return std::nullopt;
        }
      }
      out.kind = ir::ArgKind::Value;
      out.value = std::move(*x);
      return out;
    }
    case ir::KernelParamKind::Scalar:
    case ir::KernelParamKind::Array: {
      std::string type = std::string(ir::to_string(p.access)) + " " + ir::to_string(p.elem) +
                         (p.kind == ir::KernelParamKind::Array ? "[]" : "");
      if (!is_name) {
        Diagnostic& d = diags_.error(DiagCode::E0105, arg.loc,
                                     param_desc() + " is `" + type +
                                         "`, so its argument must be a buffer");
        note_param(d);
        return std::nullopt;
      }
      if (!sym) {
        diags_.error(DiagCode::E0101, arg.loc, "buffer `" + arg.text + "` is not declared");
        return std::nullopt;
      }
      if (sym->kind == SymbolKind::Buffer && buffer_broken_[sym->index]) return std::nullopt;
      if (sym->kind != SymbolKind::Buffer) {
        std::string what = sym->kind == SymbolKind::Param ? "a param, passed by value" : "not a buffer";
        Diagnostic& d = diags_.error(DiagCode::E0105, arg.loc,
                                     "`" + arg.text + "` is " + what + "; " + param_desc() +
                                         " is `" + type + "`, so it needs a buffer");
        note_param(d);
        return std::nullopt;
      }
      const ir::Buffer& b = program_->buffers[sym->index];
      if (p.kind == ir::KernelParamKind::Array && b.is_scalar()) {
        Diagnostic& d = diags_.error(DiagCode::E0104, arg.loc,
                                     "`" + arg.text + "` is a device scalar, but " + param_desc() +
                                         " takes an array (" + type + ")");
        note_param(d);
        return std::nullopt;
      }
      if (p.kind == ir::KernelParamKind::Scalar && !b.is_scalar()) {
        Diagnostic& d = diags_.error(DiagCode::E0104, arg.loc,
                                     "`" + arg.text + "` is an array buffer, but " + param_desc() +
                                         " takes a device scalar (" + type + ")");
        note_param(d);
        return std::nullopt;
      }
      if (b.elem != p.elem) {
        Diagnostic& d = diags_.error(DiagCode::E0104, arg.loc,
                                     "`" + arg.text + "` holds " + ir::to_string(b.elem) + ", but " +
                                         param_desc() + " takes " + ir::to_string(p.elem));
        note_param(d);
        return std::nullopt;
      }
      out.kind = ir::ArgKind::Buffer;
      out.ref = sym->index;
      return out;
    }
    case ir::KernelParamKind::Cond: {
      // The kernel takes the condition, so the loop is not missing one whatever the argument.
      if (ctx.cond_used) *ctx.cond_used = true;
      if (!is_name || arg.text != "cond") {
        Diagnostic& d = diags_.error(DiagCode::E0104, arg.loc,
                                     param_desc() + " is a `cond`; pass `cond`, the condition of "
                                                    "the enclosing `while kernel`");
        note_param(d);
        return std::nullopt;
      }
      if (ctx.while_kernel_depth == 0) {
        diags_.error(DiagCode::E0113, arg.loc,
                     "`cond` is the condition of an enclosing `while kernel`, and there is none here");
        return std::nullopt;
      }
      if (ctx.cond_used) *ctx.cond_used = true;
      out.kind = ir::ArgKind::Cond;
      return out;
    }
    case ir::KernelParamKind::Graph:
    case ir::KernelParamKind::GraphFamily: {
      bool family = p.kind == ir::KernelParamKind::GraphFamily;
      if (is_name && arg.text == "self" && (!sym || sym->kind != SymbolKind::Graph)) {
        if (family) {
          Diagnostic& d = diags_.error(DiagCode::E0504, arg.loc,
                                       param_desc() + " takes a family of " +
                                           std::to_string(p.family_size) + " graphs, not `self`");
          note_param(d);
          return std::nullopt;
        }
        if (!ctx.device && !ctx.helper) {
          diags_.error(DiagCode::E0113, arg.loc,
                       "`self` is the device graph being executed, but `" +
                           program_->graphs[ctx.graph].name + "` is launched from the host");
          return std::nullopt;
        }
        out.kind = ir::ArgKind::Graph;
        out.ref = ctx.graph;
        out.self = true;
        return out;
      }
      if (!is_name || !sym || sym->kind != SymbolKind::Graph) {
        if (is_name && !sym) {
          diags_.error(DiagCode::E0101, arg.loc, "graph `" + arg.text + "` is not declared");
          return std::nullopt;
        }
        Diagnostic& d = diags_.error(DiagCode::E0104, arg.loc, param_desc() + " takes a graph");
        note_param(d);
        return std::nullopt;
      }
      const ir::Graph& g = program_->graphs[sym->index];
      if (!g.device) {
        Diagnostic& d = diags_.error(DiagCode::E0504, arg.loc,
                                     "`" + g.name + "` is not a device graph; kernels launch only "
                                                    "graphs declared `device`");
        diags_.add_note(d, g.loc, "`" + g.name + "` is declared here");
        return std::nullopt;
      }
      bool is_family = !g.family_index.empty();
      if (family != is_family || (family && g.family_size != p.family_size)) {
        std::string want = family ? "a family of " + std::to_string(p.family_size) + " graphs"
                                  : "one graph";
        std::string have = is_family ? "a family of " + std::to_string(g.family_size) + " graphs"
                                     : "one graph";
        Diagnostic& d = diags_.error(DiagCode::E0504, arg.loc,
                                     param_desc() + " takes " + want + ", but `" + g.name +
                                         "` is " + have);
        note_param(d);
        return std::nullopt;
      }
      out.kind = family ? ir::ArgKind::GraphFamily : ir::ArgKind::Graph;
      out.ref = sym->index;
      out.self = sym->index == ctx.graph;
      return out;
    }
    case ir::KernelParamKind::Status:
      break;  // generated kernels only
  }
  return std::nullopt;
}

void Checker::kernel_launch(const ast::Stmt& s, const ast::KernelLaunch& n, BodyContext& ctx,
                            ir::Region& out) {
  const Symbol* sym = lookup(n.kernel.name);
  if (!sym) {
    diags_.error(DiagCode::E0101, n.kernel.loc, "kernel `" + n.kernel.name + "` is not declared");
    return;
  }
  if (sym->kind != SymbolKind::Kernel) {
    Diagnostic& d = diags_.error(DiagCode::E0109, n.kernel.loc, "`" + n.kernel.name + "` is not a kernel");
    if (sym->loc.valid()) diags_.add_note(d, sym->loc, "`" + n.kernel.name + "` is declared here");
    return;
  }
  const ir::Kernel& k = program_->kernels[sym->index];
  ir::Node node = make_node(ir::NodeKind::Kernel, s, ctx);
  node.kernel = sym->index;
  bool shape_ok = launch_shape(n.grid.get(), "grid", node.grid, &node.grid_loc, ctx);
  shape_ok &= launch_shape(n.block.get(), "block", node.block, &node.block_loc, ctx);
  node.shared_bytes = constant(0, s.loc, ir::ScalarType::U64);
  if (n.shared_bytes) {
    if (auto x = expr(*n.shared_bytes, ExprContext::Host, &ctx); x && !finish(*x, ir::ScalarType::U64, DiagCode::E0204).failed()) {
      node.shared_bytes = std::move(*x);
    } else {
      shape_ok = false;
    }
  }
  if (n.args.size() != k.params.size()) {
    Diagnostic& d = diags_.error(
        DiagCode::E0103, s.loc,
        "kernel `" + k.name + "` takes " + std::to_string(k.params.size()) + " argument" +
            (k.params.size() == 1 ? "" : "s") + ", but " + std::to_string(n.args.size()) +
            (n.args.size() == 1 ? " was" : " were") + " given");
    diags_.add_note(d, k.loc, "`" + k.name + "` is declared here");
  } else {
    for (size_t i = 0; i < n.args.size(); ++i) {
      const ir::KernelParam& p = k.params[i];
      auto arg = kernel_arg(*n.args[i], k, p, ctx);
      if (!arg) continue;
      if (arg->kind == ir::ArgKind::Buffer)
        add_access(node.accesses, arg->ref, p.access != ir::Access::Out,
                   p.access != ir::Access::In);
      node.args.push_back(std::move(*arg));
    }
  }
  if (shape_ok) check_shape_limits(s, node, ctx);
  if (k.has_cost && k.cost_ok && node.args.size() == k.params.size() && static_cast<size_t>(sym->index) < module_.kernels.size())
    launch_cost(module_.kernels[sym->index], k, node, ctx);
  if (!k.budgets.empty())
    device_launch_placement(s.loc, "kernel `" + k.name + "` launches graphs and is launched", ctx);
  if (k.launch_in_source.valid()) kernel_launch_placement(s, k, ctx);
  out.nodes.push_back(std::move(node));
}

void Checker::launch_cost(const ast::Kernel& decl, const ir::Kernel& k, ir::Node& node, BodyContext& ctx) {
  std::map<std::string, ir::Expr> names;
  for (size_t i = 0; i < k.params.size(); ++i)
    if (k.params[i].kind == ir::KernelParamKind::Value) names[k.params[i].name] = node.args[i].value;
  cost_names_ = &names;
  for (const ast::CostItem& c : decl.costs) {
    if (!c.value) continue;
    std::optional<ir::Expr> e = expr(*c.value, ExprContext::Host, &ctx);
    if (!e) continue;
    // Literals alone keep i64 or f64; types are not the point (orch-run counts in double).
    if (e->is_literal && !settle(*e, e->type)) continue;
    if (e->type == ir::ScalarType::Bool) {
      diags_.error(DiagCode::E0117, c.value->loc, "a cost is a number of bytes or FLOPs, not a bool");
      continue;
    }
    (c.what.name == "bytes" ? node.cost_bytes : node.cost_flops) = std::move(*e);
  }
  cost_names_ = nullptr;
}

// ---- copies, fills, scalar updates -------------------------------------------------------

void Checker::copy(const ast::Stmt& s, const ast::Copy& n, BodyContext& ctx, ir::Region& out) {
  int src = buffer_ref(n.src, "copy's source");
  int dst = buffer_ref(n.dst, "copy's destination");
  if (src < 0 || dst < 0) return;
  const ir::Buffer& a = program_->buffers[src];
  const ir::Buffer& b = program_->buffers[dst];
  if (src == dst) {
    diags_.error(DiagCode::E0304, s.loc, "copy from `" + a.name + "` to itself");
    return;
  }
  if (a.elem != b.elem) {
    Diagnostic& d = diags_.error(DiagCode::E0301, s.loc,
                                 "copy from `" + a.name + "` (" + ir::to_string(a.elem) + ") to `" +
                                     b.name + "` (" + ir::to_string(b.elem) +
                                     "): element types differ");
    diags_.add_note(d, a.loc, "`" + a.name + "` is declared here");
    diags_.add_note(d, b.loc, "`" + b.name + "` is declared here");
  } else {
    ir::Expr src_count = a.count ? *a.count : constant(1);
    ir::Expr dst_count = b.count ? *b.count : constant(1);
    auto x = evaluate(src_count), y = evaluate(dst_count);
    if (x && y && elements(*x) > elements(*y)) {
      Diagnostic& d = diags_.error(
          DiagCode::E0302, s.loc,
          "copy from `" + a.name + "` (" + x->to_string() + " elements) to `" + b.name +
              "` (" + y->to_string() + " elements): the destination is smaller" +
              default_values_note(binary(expr::Op::Add, src_count, dst_count)));
      diags_.add_note(d, b.loc, "`" + b.name + "` is declared here");
    }
    if ((ir::depends_on_host_values(src_count) || ir::depends_on_host_values(dst_count)) &&
        !ir::same_expr(src_count, dst_count))
      program_->bind_checks.push_back({DiagCode::E0302,
                                       "copy from `" + a.name + "` to `" + b.name +
                                           "`: the destination is smaller",
                                       binary(expr::Op::Le, src_count, dst_count), s.loc});
  }
  // A device graph's memcpy nodes may involve "device memory and/or pinned device-mapped host
  // memory" (doc comment of cudaGraphInstantiate); every orch buffer is one of the two (`host`
  // buffers are pinned and mapped, and the runtime refuses other memory for them), so every
  // copy is allowed there, host to host included. E0503 is retired.
  ir::Node node = make_node(ir::NodeKind::Copy, s, ctx);
  node.src = src;
  node.dst = dst;
  add_access(node.accesses, src, true, false);
  add_access(node.accesses, dst, false, true);
  out.nodes.push_back(std::move(node));
}

void Checker::fill(const ast::Stmt& s, const ast::Fill& n, BodyContext& ctx, ir::Region& out) {
  int dst = buffer_ref(n.dst, "fill's destination");
  auto value = expr(*n.value, ExprContext::Host, &ctx);
  if (dst < 0 || !value) return;
  const ir::Buffer& b = program_->buffers[dst];
  // A literal value takes the element type; any value converts to it exactly.
  expr::Evaluation v = finish(*value, b.elem, DiagCode::E0303);
  if (v.failed()) return;
  if (v.known()) {
    if (expr::Outcome c = expr::convert(v.value, b.elem); !c.ok()) {
      diags_.error(DiagCode::E0303, n.value->loc,
                   "cannot fill `" + b.name + "` (" + ir::to_string(b.elem) + ") with " +
                       ir::to_string(*value, *program_) + ": " + c.message + default_values_note(*value));
      return;
    }
  }
  if (ir::is_float(value->type) && !ir::is_float(b.elem)) {
    diags_.error(DiagCode::E0303, n.value->loc,
                 "cannot fill `" + b.name + "` (" + ir::to_string(b.elem) +
                     ") with a floating-point value");
    return;
  }
  // A value from params fits with the defaults; the bound values must fit too.
  if (ir::depends_on_host_values(*value) && !ir::is_float(b.elem) && b.elem != value->type) {
    // Comparisons are exact, so the range of any integer type is two constants of its own.
    const uint32_t bits = expr::bit_width(b.elem);
    const ir::Value lo = ir::is_signed(b.elem) ? ir::Value::of_int(b.elem, bits == 64 ? INT64_MIN : -(int64_t(1) << (bits - 1)))
                                               : ir::Value::of_uint(b.elem, 0);
    const ir::Value hi = b.elem == ir::ScalarType::Bool ? ir::Value::of_bool(true)
                         : ir::is_signed(b.elem) ? ir::Value::of_int(b.elem, static_cast<int64_t>((uint64_t(1) << (bits - 1)) - 1))
                                                 : ir::Value::of_uint(b.elem, bits == 64 ? UINT64_MAX : (uint64_t(1) << bits) - 1);
    program_->bind_checks.push_back(
        {DiagCode::E0303,
         "fill value of `" + b.name + "` fits " + ir::to_string(b.elem),
         binary(expr::Op::And, binary(expr::Op::Ge, *value, ir::constant(lo)),
                binary(expr::Op::Le, *value, ir::constant(hi))),
         n.value->loc, has_family_index(*value) ? ctx.family_size : 0});
  }
  ir::Node node = make_node(ir::NodeKind::Fill, s, ctx);
  node.dst = dst;
  node.value = std::move(*value);
  add_access(node.accesses, dst, false, true);
  out.nodes.push_back(std::move(node));
}

void Checker::assign(const ast::Stmt& s, const ast::Assign& n, BodyContext& ctx,
                     ir::Region& out) {
  const Symbol* sym = lookup(n.target.name);
  if (!sym) {
    diags_.error(DiagCode::E0101, n.target.loc, "`" + n.target.name + "` is not declared");
    return;
  }
  if (sym->kind != SymbolKind::Buffer || !program_->buffers[sym->index].is_scalar()) {
    std::string what = sym->kind == SymbolKind::Param    ? "a param, set by the host"
                       : sym->kind == SymbolKind::Buffer ? "an array buffer"
                                                         : "not a buffer";
    std::string hint = sym->kind == SymbolKind::Buffer ? "; write arrays with a kernel or `fill`"
                                                       : "";
    Diagnostic& d = diags_.error(DiagCode::E0107, n.target.loc,
                                 "cannot assign to `" + n.target.name + "`: it is " + what +
                                     "; a graph assigns only device scalars (buffers without a "
                                     "size)" + hint);
    if (sym->loc.valid()) diags_.add_note(d, sym->loc, "`" + n.target.name + "` is declared here");
    return;
  }
  auto value = expr(*n.value, ExprContext::Device, &ctx);
  if (!value) return;
  const ir::Buffer& b = program_->buffers[sym->index];
  if (ir::is_float(value->type) && !ir::is_float(b.elem)) {
    diags_.error(DiagCode::E0104, n.value->loc,
                 "cannot assign a floating-point value to `" + b.name + "` (" +
                     ir::to_string(b.elem) + ")");
    return;
  }
  ir::Node node = make_node(ir::NodeKind::ScalarUpdate, s, ctx);
  node.dst = sym->index;
  if (n.op != "=") {
    // `x op= e` is `x = x op e`: typed by the rules, converted to x's type when assigned.
    ir::Expr target;
    target.kind = ir::ExprKind::DeviceScalar;
    target.ref = sym->index;
    target.type = b.elem;
    target.loc = n.target.loc;
    std::optional<expr::Op> op = expr::binary_op(n.op.substr(0, n.op.size() - 1));
    if (!op) {
      diags_.error(DiagCode::E0109, s.loc, "unknown assignment `" + n.op + "`");
      return;
    }
    if (value->is_literal && !settle(*value, expr::settle_type(ir::is_float(value->type) ? expr::Literal::Float
                                                                                      : expr::Literal::Int,
                                                                b.elem)))
      return;
    ir::Expr combined = binary(*op, std::move(target), std::move(*value));
    combined.loc = s.loc;
    combined.op_loc = s.loc;
    value = std::move(combined);
  }
  // A literal value takes the scalar's type; errors with the defaults are reported here, and
  // the value must convert to the scalar's type (the generated kernel converts it so).
  expr::Evaluation v = finish(*value, b.elem, DiagCode::E0109);
  if (v.failed()) return;
  if (v.known()) {
    if (expr::Outcome c = expr::convert(v.value, b.elem); !c.ok()) {
      diags_.error(DiagCode::E0104, n.value->loc,
                   "cannot assign " + ir::to_string(*value, *program_) + " to `" + b.name + "` (" +
                       ir::to_string(b.elem) + "): " + c.message + default_values_note(*value));
      return;
    }
  }
  collect_device_reads(*value, node.accesses);
  add_access(node.accesses, sym->index, false, true);
  node.value = std::move(*value);
  out.nodes.push_back(std::move(node));
}

// ---- control flow ------------------------------------------------------------------------

std::optional<ir::Expr> Checker::condition(const ast::Expr& e, BodyContext& ctx) {
  in_condition_ = true;
  auto out = expr(e, ExprContext::Device, &ctx);
  in_condition_ = false;
  if (out && finish(*out, std::nullopt, DiagCode::E0109).failed()) return std::nullopt;
  return out;
}

namespace {

void refresh_container_accesses(ir::Node& node) {
  std::vector<ir::BufferAccess> accesses;
  if (node.cond) collect_device_reads(*node.cond, accesses);
  for (ir::Region& r : node.bodies)
    for (ir::Node& n : r.nodes)
      for (const ir::BufferAccess& a : n.accesses) add_access(accesses, a.buffer, a.read, a.write);
  node.accesses = std::move(accesses);
}

// A device graph may hold no conditional node at all.
void forbid_in_device_graph(DiagnosticEngine& diags, const ir::Program& p, const BodyContext& ctx,
                            const SourceRange& where, const std::string& what) {
  if (!ctx.device) return;
  Diagnostic& d = diags.error(DiagCode::E0501, where,
                              "a device graph cannot hold " + what +
                                  "; graphs launched from the device hold only kernels, copies, "
                                  "fills and child graphs");
  diags.add_note(d, p.graphs[ctx.graph].loc,
                 "`" + p.graphs[ctx.graph].name + "` is a device graph");
}

}  // namespace

void Checker::enter_conditional(const ast::Stmt& s, BodyContext& inner) {
  inner.conditional_depth++;
  if (inner.conditional_depth == 1) inner.outermost_conditional_loc = s.loc;
  inner.conditional_loc = s.loc;
  if (inner.conditional_depth <= static_cast<int>(ir::kMaxConditionalNesting) ||
      inner.nesting_reported)
    return;
  inner.nesting_reported = true;
  Diagnostic& d =
      diags_.error(DiagCode::E0412, s.loc,
                   "this conditional is nested " + std::to_string(inner.conditional_depth) +
                       " deep; a pipeline holds conditional bodies at most " +
                       std::to_string(ir::kMaxConditionalNesting) + " deep");
  diags_.add_note(d, inner.outermost_conditional_loc, "the outermost one is here");
}

void Checker::if_stmt(const ast::Stmt& s, const ast::If& n, BodyContext& ctx, ir::Region& out) {
  forbid_in_device_graph(diags_, *program_, ctx, s.loc, "an `if`");
  const TargetProfile& prof = program_->profile;
  if (!prof.supports_if || (n.has_else && !prof.supports_if_else))
    diags_.error(DiagCode::E0407, s.loc,
                 std::string("target ") + prof.name + " does not support " +
                     (n.has_else ? "IF/ELSE" : "IF") + " conditional nodes");
  ir::Node node = make_node(ir::NodeKind::If, s, ctx);
  node.cond = condition(*n.cond, ctx);
  BodyContext inner = ctx;
  enter_conditional(s, inner);
  node.bodies.emplace_back();
  block(n.then_body, inner, node.bodies.back());
  if (n.has_else) {
    node.bodies.emplace_back();
    block(n.else_body, inner, node.bodies.back());
  }
  if (!node.cond) return;
  refresh_container_accesses(node);
  out.nodes.push_back(std::move(node));
}

void Checker::while_stmt(const ast::Stmt& s, const ast::While& n, BodyContext& ctx,
                         ir::Region& out) {
  forbid_in_device_graph(diags_, *program_, ctx, s.loc, "a `while` loop");
  if (!program_->profile.supports_while)
    diags_.error(DiagCode::E0407, s.loc,
                 "target " + program_->profile.name + " does not support WHILE conditional nodes");
  ir::Node node = make_node(ir::NodeKind::While, s, ctx);
  bool cond_ok = true;
  if (n.cond) {
    node.cond = condition(*n.cond, ctx);
    cond_ok = node.cond.has_value();
  }
  bool cond_used = false;
  BodyContext inner = ctx;
  enter_conditional(s, inner);
  inner.loop_depth++;
  inner.loop_loc = s.loc;
  if (!n.cond) {
    inner.while_kernel_depth++;
    inner.cond_used = &cond_used;
  }
  node.bodies.emplace_back();
  const size_t errors_before = diags_.error_count();
  block(n.body, inner, node.bodies.back());
  if (diags_.error_count() != errors_before) loops_with_errors_.push_back(s.loc);
  if (!n.cond && !cond_used)
    diags_.error(DiagCode::E0405, s.loc,
                 "no kernel in this `while kernel` body takes `cond`, so nothing sets the loop's "
                 "condition");
  if (!cond_ok) return;
  refresh_container_accesses(node);
  out.nodes.push_back(std::move(node));
}

void Checker::switch_stmt(const ast::Stmt& s, const ast::Switch& n, BodyContext& ctx,
                          ir::Region& out) {
  forbid_in_device_graph(diags_, *program_, ctx, s.loc, "a `switch`");
  const TargetProfile& prof = program_->profile;
  if (!prof.supports_switch)
    diags_.error(DiagCode::E0407, s.loc,
                 "target " + prof.name + " does not support SWITCH conditional nodes");
  ir::Node node = make_node(ir::NodeKind::Switch, s, ctx);
  node.cond = condition(*n.subject, ctx);
  if (node.cond && ir::is_float(node.cond->type)) {
    diags_.error(DiagCode::E0406, n.subject->loc, "a switch subject must be an integer");
    node.cond.reset();
  }
  if (n.cases.empty() && !n.default_body)
    diags_.error(DiagCode::E0411, s.loc,
                 "this `switch` has no `case` and no `default`; a CUDA SWITCH node needs at least "
                 "one body");
  BodyContext inner = ctx;
  enter_conditional(s, inner);
  std::map<int64_t, SourceRange> seen;
  for (const ast::SwitchCase& c : n.cases) {
    const Symbol* named = c.value->kind == ast::ExprKind::Name ? lookup(c.value->text) : nullptr;
    if (named && named->kind != SymbolKind::Builtin) {
      diags_.error(DiagCode::E0403, c.value->loc,
                   "a case value must be an integer constant, but `" + c.value->text + "` is not one");
      node.case_values.push_back(0);
      node.bodies.emplace_back();
      block(c.body, inner, node.bodies.back());
      continue;
    }
    auto x = expr(*c.value, ExprContext::Constant, &ctx);
    // Case values take the subject's type and must be exactly its values.
    const ir::ScalarType subject = node.cond ? node.cond->type : ir::ScalarType::I64;
    std::optional<ir::Value> v;
    if (x && ir::is_float(x->type)) {
      diags_.error(DiagCode::E0403, c.value->loc, "a case value must be an integer constant");
    } else if (x) {
      expr::Evaluation e = finish(*x, subject, DiagCode::E0403);
      if (e.known()) {
        expr::Outcome o = expr::convert(e.value, subject);
        if (!o.ok()) diags_.error(DiagCode::E0403, c.value->loc, "case " + e.value.to_string() + " is not a value of the subject: " + o.message);
        else v = o.value;
      } else if (!e.failed()) {
        diags_.error(DiagCode::E0403, c.value->loc, "a case value must be an integer constant");
      }
    }
    if (v) {
      if (auto [it, inserted] = seen.emplace(v->i64(), c.loc); !inserted) {
        Diagnostic& d = diags_.error(DiagCode::E0403, c.value->loc,
                                     "case " + v->to_string() + " appears twice");
        diags_.add_note(d, it->second, "first case " + v->to_string() + " is here");
      }
    }
    node.case_values.push_back(v ? v->i64() : 0);
    node.bodies.emplace_back();
    block(c.body, inner, node.bodies.back());
  }
  if (n.default_body) {
    node.has_default = true;
    node.bodies.emplace_back();
    block(*n.default_body, inner, node.bodies.back());
  }
  if (profile_ok_ && node.bodies.size() > prof.max_switch_cases)
    diags_.error(DiagCode::E0404, s.loc,
                 "switch has " + std::to_string(node.bodies.size()) + " bodies; " + prof.name +
                     " profile allows at most " + std::to_string(prof.max_switch_cases));
  if (!node.cond) return;
  refresh_container_accesses(node);
  out.nodes.push_back(std::move(node));
}

// ---- calls and launches ------------------------------------------------------------------

namespace {

// Statements of a block and the graphs it calls (once per `call`, with the depth of
// conditionals the call is nested in), without expanding them; `depth` is the block's own.
struct Callee {
  int graph;
  uint64_t depth;
};
void count_block(const ast::Block& b, const std::map<std::string, Symbol>& symbols,
                 uint64_t depth, uint64_t& statements, uint64_t& max_depth,
                 std::vector<Callee>& callees) {
  auto nested = [&](const ast::Block& body) {
    count_block(body, symbols, depth + 1, statements, max_depth, callees);
  };
  for (const ast::Stmt& s : b) {
    ++statements;
    max_depth = std::max(max_depth, depth);
    std::visit(overloaded{
                   [&](const ast::Call& n) {
                     auto it = symbols.find(n.graph.name);
                     if (it != symbols.end() && it->second.kind == SymbolKind::Graph)
                       callees.push_back({it->second.index, depth});
                   },
                   [&](const ast::If& n) {
                     nested(n.then_body);
                     nested(n.else_body);
                   },
                   [&](const ast::While& n) { nested(n.body); },
                   [&](const ast::Switch& n) {
                     for (const ast::SwitchCase& c : n.cases) nested(c.body);
                     if (n.default_body) nested(*n.default_body);
                   },
                   // No body and no call: counted above, nothing inside.
                   [](const ast::KernelLaunch&) {},
                   [](const ast::Copy&) {},
                   [](const ast::Fill&) {},
                   [](const ast::Assign&) {},
                   [](const ast::LaunchGraph&) {},
                   [](const ast::Collective&) {},
               },
               s.node);
  }
}

// "a -> b -> c", eliding the middle of a long chain.
std::string call_path(const ir::Program& p, const std::vector<int>& graphs, int last) {
  std::vector<std::string> names;
  for (int g : graphs) names.push_back(p.graphs[g].name);
  names.push_back(p.graphs[last].name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names.size() > 8 && i == 3) {
      out += " -> ... (" + std::to_string(names.size() - 6) + " more)";
      i = names.size() - 4;
      continue;
    }
    out += (i ? " -> " : "") + names[i];
  }
  return out;
}

}  // namespace

bool Checker::compute_inline_sizes() {
  // Saturating: the budget is far below this, and sums of saturated sizes must not wrap.
  constexpr uint64_t kHuge = uint64_t{1} << 62;
  const size_t n = graph_asts_.size();
  std::vector<uint64_t> direct(n), direct_depth(n);
  std::vector<std::vector<Callee>> callees(n);
  for (size_t g = 0; g < n; ++g)
    count_block(graph_asts_[g]->body, symbols_, 1, direct[g], direct_depth[g], callees[g]);
  // Post-order over the call graph without recursion (a chain may be 100,000 graphs long); a
  // call back onto the stack is a cycle, reported as E0801 while building, and counts 0 here.
  // Every statement costs the checker a few kilobytes (its node, accesses, edges), so the
  // statements of the file are bounded before any is built.
  uint64_t statements = 0;
  for (size_t g = 0; g < n; ++g) {
    statements += direct[g];
    if (statements > kMaxStatements) {
      diags_.error(DiagCode::E0806, graph_asts_[g]->name.loc,
                   "the pipeline has more than " + std::to_string(kMaxStatements) +
                       " statements (counted up to graph `" + graph_asts_[g]->name.name +
                       "`); orch checks at most " + std::to_string(kMaxStatements) +
                       " in one pipeline");
      return false;
    }
  }
  inline_size_.assign(n, 0);
  inline_depth_.assign(n, 0);
  std::vector<int> state(n, 0);  // 0 new, 1 on the stack, 2 done
  for (size_t root = 0; root < n; ++root) {
    if (state[root]) continue;
    std::vector<std::pair<int, size_t>> stack{{static_cast<int>(root), 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto& [g, next] = stack.back();
      if (next < callees[g].size()) {
        int c = callees[g][next++].graph;
        if (state[c] == 0) {
          state[c] = 1;
          stack.push_back({c, 0});
        }
        continue;
      }
      uint64_t total = direct[g], depth = direct_depth[g];
      for (const Callee& c : callees[g]) {
        if (state[c.graph] != 2) continue;
        total = std::min(kHuge, total + inline_size_[c.graph]);
        depth = std::max(depth, std::min(kHuge, c.depth + inline_depth_[c.graph]));
      }
      inline_size_[g] = total;
      inline_depth_[g] = depth;
      state[g] = 2;
      stack.pop_back();
    }
  }
  return true;
}

void Checker::call(const ast::Stmt& s, const ast::Call& n, BodyContext& ctx, ir::Region& out) {
  const Symbol* sym = lookup(n.graph.name);
  if (!sym) {
    diags_.error(DiagCode::E0101, n.graph.loc, "graph `" + n.graph.name + "` is not declared");
    return;
  }
  if (sym->kind != SymbolKind::Graph) {
    diags_.error(DiagCode::E0109, n.graph.loc, "`" + n.graph.name + "` is not a graph");
    return;
  }
  const ir::Graph& callee = program_->graphs[sym->index];
  if (!callee.family_index.empty()) {
    diags_.error(DiagCode::E0504, n.graph.loc,
                 "cannot call the graph family `" + callee.name + "`; families are launched");
    return;
  }
  auto cycle = std::find(ctx.inlining.begin(), ctx.inlining.end(), sym->index);
  if (cycle != ctx.inlining.end()) {
    // The same cycle is met again from every graph on it and every graph calling into it.
    std::vector<int> members(cycle, ctx.inlining.end());
    std::sort(members.begin(), members.end());
    if (std::find(reported_cycles_.begin(), reported_cycles_.end(), members) != reported_cycles_.end())
      return;
    reported_cycles_.push_back(members);
    std::string path;
    for (auto it = cycle; it != ctx.inlining.end(); ++it) path += program_->graphs[*it].name + " -> ";
    path += callee.name;
    diags_.error(DiagCode::E0801, s.loc, "`call " + callee.name + "` makes a cycle: " + path);
    return;
  }
  if (inlining_stopped_) return;
  if (ctx.call_stack.size() >= kMaxCallDepth) {
    inlining_stopped_ = true;
    diags_.error(DiagCode::E0804, s.loc,
                 "`call " + callee.name + "` nests calls " + std::to_string(ctx.call_stack.size() + 1) +
                     " deep (" + call_path(*program_, ctx.inlining, sym->index) +
                     "); orch inlines at most " + std::to_string(kMaxCallDepth) + " levels of `call`");
    return;
  }
  // The checker and the passes after it recurse once per level of nesting, conditionals and
  // calls alike. Conditionals past 64 levels are E0412, but that does not stop the walk: bound
  // the depth a call reaches (each graph alone stays within the parser's 200) so that no pass
  // can run out of stack.
  const uint64_t depth = ctx.conditional_depth + ctx.call_stack.size() + inline_depth_[sym->index];
  if (depth > kMaxInlinedDepth) {
    inlining_stopped_ = true;
    diags_.error(DiagCode::E0804, s.loc,
                 "`call " + callee.name + "` nests statements " + std::to_string(depth) +
                     " levels deep (conditionals and calls, through every graph it calls); orch "
                     "allows at most " + std::to_string(kMaxInlinedDepth));
    return;
  }
  // The outermost call of a chain brings in everything below it: account for it all there.
  if (ctx.call_stack.empty()) {
    const uint64_t size = inline_size_[sym->index];
    if (inlined_statements_ + size > kMaxInlinedStatements) {
      inlining_stopped_ = true;
      const bool huge = size >= (uint64_t{1} << 62);
      diags_.error(DiagCode::E0805, s.loc,
                   "`call " + callee.name + "` would inline " +
                       (huge ? std::string("more than 2^62") : std::to_string(size)) +
                       " statements (`" + callee.name +
                       "` with every graph it calls, once per `call`) on top of the " +
                       std::to_string(inlined_statements_) +
                       " already inlined; orch inlines at most " +
                       std::to_string(kMaxInlinedStatements) +
                       " statements in one pipeline (each graph is also checked on its own)");
      return;
    }
    inlined_statements_ += size;
  }
  BodyContext inner = ctx;
  inner.inlining.push_back(sym->index);
  inner.call_stack.push_back(s.loc);
  DiagnosticEngine::ScopedContext where(diags_, s.loc, "called from here");
  block(graph_asts_[sym->index]->body, inner, out);
}

void Checker::launch_graph(const ast::Stmt& s, const ast::LaunchGraph& n, BodyContext& ctx,
                           ir::Region& out) {
  const Symbol* sym = lookup(n.graph.name);
  if (!sym) {
    diags_.error(DiagCode::E0101, n.graph.loc, "graph `" + n.graph.name + "` is not declared");
    return;
  }
  if (sym->kind != SymbolKind::Graph || !program_->graphs[sym->index].device) {
    Diagnostic& d = diags_.error(DiagCode::E0504, n.graph.loc,
                                 "`" + n.graph.name + "` is not a device graph; only graphs "
                                                      "declared `device` can be launched");
    if (sym->loc.valid()) diags_.add_note(d, sym->loc, "`" + n.graph.name + "` is declared here");
    return;
  }
  const ir::Graph& g = program_->graphs[sym->index];
  ir::Node node = make_node(ir::NodeKind::LaunchGraph, s, ctx);
  node.graph = sym->index;
  node.mode = static_cast<ir::LaunchMode>(n.mode);
  if (!g.family_index.empty()) {
    if (!n.index) {
      diags_.error(DiagCode::E0504, n.graph.loc,
                   "`" + g.name + "` is a family of " + std::to_string(g.family_size) +
                       " graphs; launch one member, e.g. `launch " + g.name + "[0] " +
                       ir::to_string(node.mode) + "`");
      return;
    }
    auto x = expr(*n.index, ExprContext::Host, &ctx);
    if (!x) return;
    // An index from the family index is checked for every member of the launching family
    // (`launch stage[j + 1]` from the last one is past the end); one from params with their
    // defaults, and again at bind time. The launcher also refuses an index out of range
    // rather than read past the launch table.
    expr::Evaluation ev = finish(*x, ir::ScalarType::U32, DiagCode::E0504);
    if (ev.failed()) return;
    const bool by_member = has_family_index(*x) && ctx.family_size > 0;
    const std::string last = std::to_string(g.family_size - 1);
    for (uint32_t m = 0; m < (by_member ? ctx.family_size : 1); ++m) {
      auto v = evaluate(*x, by_member ? std::optional<uint32_t>(m) : std::nullopt);
      if (!ir::is_float(x->type) && (!v || !(v->negative() || v->magnitude() >= g.family_size))) continue;
      const std::string text = ir::to_string(*x, *program_);
      std::string message = "`" + g.name + "` has members 0 to " + last + "; ";
      if (x->kind == ir::ExprKind::Const || !v)
        message += text + " is not one";
      else
        message += "`" + text + "` is " + v->to_string() +
                   (by_member ? " in member " + std::to_string(m) + " of `" +
                                    program_->graphs[ctx.graph].name + "`"
                              : "") +
                   default_values_note(*x);
      diags_.error(DiagCode::E0504, n.index->loc, message);
      return;
    }
    bool from_params = false;
    std::vector<const ir::Expr*> stack{&*x};
    while (!stack.empty()) {
      const ir::Expr* e = stack.back();
      stack.pop_back();
      from_params |= e->kind == ir::ExprKind::Param || e->kind == ir::ExprKind::Rank ||
                     e->kind == ir::ExprKind::WorldSize;
      for (const ir::Expr& o : e->operands) stack.push_back(&o);
    }
    if (from_params) {
      ir::BindCheck check{DiagCode::E0504,
                          "`" + g.name + "` has members 0 to " + last + "; the index of `launch " +
                              g.name + "[...]` is one of them",
                          binary(expr::Op::And, binary(expr::Op::Ge, *x, constant(0)),
                                 binary(expr::Op::Lt, *x, constant(g.family_size))),
                          n.index->loc};
      if (by_member) check.family_size = ctx.family_size;
      program_->bind_checks.push_back(std::move(check));
    }
    node.family_member = std::move(*x);
  } else if (n.index) {
    diags_.error(DiagCode::E0504, n.index->loc, "`" + g.name + "` is one graph, not a family");
    return;
  }
  device_launch_placement(s.loc, "`launch " + g.name + "`", ctx);
  out.nodes.push_back(std::move(node));
}

void Checker::collective(const ast::Stmt& s, const ast::Collective& n, BodyContext& ctx,
                         ir::Region& out) {
  ir::Node node = make_node(ir::NodeKind::Collective, s, ctx);
  node.collective = static_cast<ir::CollectiveKind>(n.kind);
  const std::string kind = ir::to_string(node.collective);
  bool ok = true;
  if (ctx.device) {
    Diagnostic& d = diags_.error(DiagCode::E0703, s.loc,
                                 "`" + kind + "` cannot run in a device graph: NCCL work is "
                                              "launched from the host's graph");
    diags_.add_note(d, program_->graphs[ctx.graph].loc,
                    "`" + program_->graphs[ctx.graph].name + "` is a device graph");
    ok = false;
  } else if (ctx.conditional_depth > 0) {
    Diagnostic& d = diags_.error(DiagCode::E0401, s.loc,
                                 "`" + kind + "` inside a conditional body: ranks could take "
                                              "different branches and hang, and NCCL cannot "
                                              "run in a graph with conditional nodes");
    diags_.add_note(d, ctx.conditional_loc, "the conditional is here");
    ok = false;
  }
  const Symbol* comm = lookup(n.comm.name);
  if (!comm) {
    diags_.error(DiagCode::E0101, n.comm.loc, "comm `" + n.comm.name + "` is not declared");
    ok = false;
  } else if (comm->kind != SymbolKind::Comm) {
    diags_.error(DiagCode::E0109, n.comm.loc, "`" + n.comm.name + "` is not a comm");
    ok = false;
  } else {
    node.comm = comm->index;
  }
  if (n.kind == ast::CollectiveKind::AllReduce || n.kind == ast::CollectiveKind::ReduceScatter) {
    if (std::optional<ir::ReduceOp> op = ir::parse_reduce_op(n.op.name)) {
      node.reduce_op = *op;
    } else {
      diags_.error(DiagCode::E0704, n.op.loc,
                   "unknown reduction `" + n.op.name + "`; use sum, prod, min, max or avg");
      ok = false;
    }
  }
  int src = buffer_ref(n.src, ("`" + kind + "` source").c_str());
  int dst = n.dst ? buffer_ref(*n.dst, ("`" + kind + "` destination").c_str()) : src;
  if (src < 0 || dst < 0) return;
  node.src = src;
  node.dst = dst;
  const ir::Buffer& a = program_->buffers[src];
  const ir::Buffer& b = program_->buffers[dst];
  for (const ir::Buffer* buf : {&a, &b}) {
    if (buf->host) {
      Diagnostic& d = diags_.error(DiagCode::E0705, s.loc,
                                   "`" + kind + "` on `" + buf->name +
                                       "`, a host buffer; collectives work on device memory");
      diags_.add_note(d, buf->loc, "`" + buf->name + "` is declared here");
      ok = false;
      break;
    }
  }
  if (a.elem != b.elem) {
    diags_.error(DiagCode::E0701, s.loc,
                 "`" + kind + "` from `" + a.name + "` (" + ir::to_string(a.elem) + ") to `" +
                     b.name + "` (" + ir::to_string(b.elem) + "): element types differ");
    ok = false;
  } else {
    static const ir::ScalarType unsupported[] = {ir::ScalarType::I16, ir::ScalarType::U16,
                                                 ir::ScalarType::Bool};
    if (std::find(std::begin(unsupported), std::end(unsupported), a.elem) != std::end(unsupported)) {
      diags_.error(DiagCode::E0701, s.loc,
                   std::string("NCCL has no ") + ir::to_string(a.elem) + " type for `" + kind + "`");
      ok = false;
    }
  }
  if (n.root) {
    node.root = expr(*n.root, ExprContext::Host, &ctx);
    if (node.root && finish(*node.root, ir::ScalarType::U32, DiagCode::E0702).failed()) node.root.reset();
    if (!node.root) {
      ok = false;
    } else if (reads_rank(*node.root)) {
      diags_.error(DiagCode::E0109, n.root->loc,
                   "the root of `broadcast` must be the same on every rank; it cannot depend on "
                   "`rank`");
      ok = false;
    } else {
      ir::Expr world;
      world.kind = ir::ExprKind::WorldSize;
      world.type = ir::ScalarType::U32;
      program_->bind_checks.push_back({DiagCode::E0702, "`broadcast` root is a rank of the communicator",
                                       binary(expr::Op::And, binary(expr::Op::Ge, *node.root, constant(0)),
                                              binary(expr::Op::Lt, *node.root, world)),
                                       n.root->loc});
    }
  }
  // Sizes: in-place and same-size collectives are checked now when possible; the ones that
  // involve world_size wait for the communicator at bind time.
  ir::Expr src_count = a.count ? *a.count : constant(1);
  ir::Expr dst_count = b.count ? *b.count : constant(1);
  ir::Expr world;
  world.kind = ir::ExprKind::WorldSize;
  world.type = ir::ScalarType::U32;
  if (ok && src != dst) {
    if (node.collective == ir::CollectiveKind::AllReduce ||
        node.collective == ir::CollectiveKind::Broadcast) {
      auto x = evaluate(src_count), y = evaluate(dst_count);
      if (x && y && elements(*x) != elements(*y)) {
        diags_.error(DiagCode::E0702, s.loc,
                     "`" + kind + "` from `" + a.name + "` (" + x->to_string() +
                         " elements) to `" + b.name + "` (" + y->to_string() +
                         " elements): sizes differ");
        ok = false;
      } else if ((ir::depends_on_host_values(src_count) ||
                  ir::depends_on_host_values(dst_count)) &&
                 !ir::same_expr(src_count, dst_count)) {
        program_->bind_checks.push_back({DiagCode::E0702, "`" + kind + "` buffers have equal sizes",
                                         binary(expr::Op::Eq, src_count, dst_count), s.loc});
      }
    } else if (node.collective == ir::CollectiveKind::AllGather) {
      program_->bind_checks.push_back(
          {DiagCode::E0702, "`allgather` destination `" + b.name + "` holds world_size times `" + a.name + "`",
           binary(expr::Op::Eq, dst_count, binary(expr::Op::Mul, src_count, world)), s.loc});
    } else {
      program_->bind_checks.push_back(
          {DiagCode::E0702, "`reduce_scatter` source `" + a.name + "` holds world_size times `" + b.name + "`",
           binary(expr::Op::Eq, src_count, binary(expr::Op::Mul, dst_count, world)), s.loc});
    }
  } else if (ok && (node.collective == ir::CollectiveKind::AllGather ||
                    node.collective == ir::CollectiveKind::ReduceScatter)) {
    diags_.error(DiagCode::E0702, s.loc, "`" + kind + "` needs separate source and destination buffers");
    ok = false;
  }
  if (!ok) return;
  add_access(node.accesses, src, true, src == dst);
  add_access(node.accesses, dst, src == dst, true);
  out.nodes.push_back(std::move(node));
}

}  // namespace orch::detail

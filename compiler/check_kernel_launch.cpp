// Kernel launches: the launch shape and its limits, each argument against its parameter, and
// the launch's `cost` expressions.
#include <algorithm>
#include <map>

#include "compiler/check_stmt_helpers.h"

namespace orch::detail {

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

void Checker::check_shape_limits(const ast::Stmt& s, const ir::KernelNode& node,
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
  ir::Node node = make_node(ir::KernelNode{}, s, ctx);
  auto& launch = node.as<ir::KernelNode>();
  launch.kernel = sym->index;
  bool shape_ok = launch_shape(n.grid.get(), "grid", launch.grid, &launch.grid_loc, ctx);
  shape_ok &= launch_shape(n.block.get(), "block", launch.block, &launch.block_loc, ctx);
  launch.shared_bytes = constant(0, s.loc, ir::ScalarType::U64);
  if (n.shared_bytes) {
    if (auto x = expr(*n.shared_bytes, ExprContext::Host, &ctx); x && !finish(*x, ir::ScalarType::U64, DiagCode::E0204).failed()) {
      launch.shared_bytes = std::move(*x);
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
      launch.args.push_back(std::move(*arg));
    }
  }
  if (shape_ok) check_shape_limits(s, launch, ctx);
  if (k.has_cost && k.cost_ok && launch.args.size() == k.params.size() && static_cast<size_t>(sym->index) < module_.kernels.size())
    launch_cost(module_.kernels[sym->index], k, launch, ctx);
  if (!k.budgets.empty())
    device_launch_placement(s.loc, "kernel `" + k.name + "` launches graphs and is launched", ctx);
  if (k.launch_in_source.valid()) kernel_launch_placement(s, k, ctx);
  out.nodes.push_back(std::move(node));
}

void Checker::launch_cost(const ast::Kernel& decl, const ir::Kernel& k, ir::KernelNode& node, BodyContext& ctx) {
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

}  // namespace orch::detail

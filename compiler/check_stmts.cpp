// The statement checker's entry and its plainest statements: a graph body statement by
// statement (each kind dispatched to its own checker: check_kernel_launch.cpp, check_control_flow.cpp,
// check_calls.cpp, check_collective.cpp), buffer references, where device launches may stand,
// and copies, fills and scalar updates.
#include <algorithm>
#include <map>

#include "compiler/check_stmt_helpers.h"
#include "support/overloaded.h"

namespace orch::detail {

ir::Node Checker::make_node(ir::NodeOp op, const ast::Stmt& s, const BodyContext& ctx) const {
  ir::Node node;
  node.op = std::move(op);
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
                 [&](const ast::Shmem& n) { shmem(s, n, ctx, out); },
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
  ir::Node node = make_node(ir::CopyNode{}, s, ctx);
  auto& copy = node.as<ir::CopyNode>();
  copy.src = src;
  copy.dst = dst;
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
  ir::Node node = make_node(ir::FillNode{}, s, ctx);
  auto& fill = node.as<ir::FillNode>();
  fill.dst = dst;
  fill.value = std::move(*value);
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
  ir::Node node = make_node(ir::ScalarUpdateNode{}, s, ctx);
  auto& update = node.as<ir::ScalarUpdateNode>();
  update.dst = sym->index;
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
  update.value = std::move(*value);
  out.nodes.push_back(std::move(node));
}

}  // namespace orch::detail

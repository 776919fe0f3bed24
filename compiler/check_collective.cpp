// Collectives (allreduce, broadcast, allgather, reduce_scatter): their comm, buffers, root and
// reduction.
#include <algorithm>
#include <map>

#include "compiler/check_stmt_helpers.h"

namespace orch::detail {

void Checker::collective(const ast::Stmt& s, const ast::Collective& n, BodyContext& ctx,
                         ir::Region& out) {
  ir::Node node = make_node(ir::CollectiveNode{}, s, ctx);
  auto& coll = node.as<ir::CollectiveNode>();
  coll.collective = static_cast<ir::CollectiveKind>(n.kind);
  const std::string kind = ir::to_string(coll.collective);
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
    coll.comm = comm->index;
  }
  if (n.kind == ast::CollectiveKind::AllReduce || n.kind == ast::CollectiveKind::ReduceScatter) {
    if (std::optional<ir::ReduceOp> op = ir::parse_reduce_op(n.op.name)) {
      coll.reduce_op = *op;
    } else {
      diags_.error(DiagCode::E0704, n.op.loc,
                   "unknown reduction `" + n.op.name + "`; use sum, prod, min, max or avg");
      ok = false;
    }
  }
  int src = buffer_ref(n.src, ("`" + kind + "` source").c_str());
  int dst = n.dst ? buffer_ref(*n.dst, ("`" + kind + "` destination").c_str()) : src;
  if (src < 0 || dst < 0) return;
  coll.src = src;
  coll.dst = dst;
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
    coll.root = expr(*n.root, ExprContext::Host, &ctx);
    if (coll.root && finish(*coll.root, ir::ScalarType::U32, DiagCode::E0702).failed()) coll.root.reset();
    if (!coll.root) {
      ok = false;
    } else if (reads_rank(*coll.root)) {
      diags_.error(DiagCode::E0109, n.root->loc,
                   "the root of `broadcast` must be the same on every rank; it cannot depend on "
                   "`rank`");
      ok = false;
    } else {
      ir::Expr world;
      world.kind = ir::ExprKind::WorldSize;
      world.type = ir::ScalarType::U32;
      program_->bind_checks.push_back({DiagCode::E0702, "`broadcast` root is a rank of the communicator",
                                       binary(expr::Op::And, binary(expr::Op::Ge, *coll.root, constant(0)),
                                              binary(expr::Op::Lt, *coll.root, world)),
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
    if (coll.collective == ir::CollectiveKind::AllReduce ||
        coll.collective == ir::CollectiveKind::Broadcast) {
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
    } else if (coll.collective == ir::CollectiveKind::AllGather) {
      program_->bind_checks.push_back(
          {DiagCode::E0702, "`allgather` destination `" + b.name + "` holds world_size times `" + a.name + "`",
           binary(expr::Op::Eq, dst_count, binary(expr::Op::Mul, src_count, world)), s.loc});
    } else {
      program_->bind_checks.push_back(
          {DiagCode::E0702, "`reduce_scatter` source `" + a.name + "` holds world_size times `" + b.name + "`",
           binary(expr::Op::Eq, src_count, binary(expr::Op::Mul, dst_count, world)), s.loc});
    }
  } else if (ok && (coll.collective == ir::CollectiveKind::AllGather ||
                    coll.collective == ir::CollectiveKind::ReduceScatter)) {
    diags_.error(DiagCode::E0702, s.loc, "`" + kind + "` needs separate source and destination buffers");
    ok = false;
  }
  if (!ok) return;
  add_access(node.accesses, src, true, src == dst);
  add_access(node.accesses, dst, src == dst, true);
  collective_writes_[ctx.graph].push_back(dst);
  out.nodes.push_back(std::move(node));
}

}  // namespace orch::detail

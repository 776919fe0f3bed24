// The last pass: the lowered program as pipeline.bin (artifact/pipeline.fbs).
#include <map>
#include <string>
#include <unordered_map>

#include "artifact/arena.h"
#include "artifact/artifact.h"
#include "artifact/expr_code.h"
#include "lowering/passes.h"
#include "artifact/pipeline_generated.h"

namespace orch::lowering {

// What the checker proves and what the loader enforces must be the same numbers: a pipeline
// that checks must load (compiler/rules_test.cpp and lowering/lowering_test.cpp walk both sides).
static_assert(mir::kMaxConditionalNesting == artifact::kMaxGraphDepth);
static_assert(mir::kMaxFamilySize == artifact::kMaxFamilySize);
static_assert(kCudaMaxFireAndForgetLaunches == artifact::kMaxFireAndForgetLaunches);
static_assert(kCudaMaxTailLaunches == artifact::kMaxTailLaunches);

namespace {

namespace fb = orch::fb;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

class Serializer {
 public:
  Serializer(const lir::Program& p, const SourceManager& sources) : p_(p), sources_(sources) {}

  std::string run() {
    std::vector<Offset<fb::Param>> params;
    for (const lir::Param& x : p_.params) {
      auto name = fbb().CreateString(x.name);
      fb::ParamBuilder b(fbb());
      b.add_name(name);
      b.add_type(static_cast<fb::ScalarType>(x.type));
      if (x.default_value) {
        // A value of the param's type: integers' bits in default_i, floats in default_f.
        b.add_has_default(true);
        if (x.default_value->is_float()) b.add_default_f(x.default_value->f64());
        else b.add_default_i(x.default_value->i64());
      }
      fb::SourceLoc l = loc(x.loc);
      b.add_loc(&l);
      params.push_back(b.Finish());
    }
    std::vector<Offset<fb::Buffer>> buffers;
    for (const lir::Buffer& x : p_.buffers) {
      auto name = fbb().CreateString(x.name);
      Offset<fb::Expr> count = x.count ? expr(*x.count) : 0;
      fb::BufferBuilder b(fbb());
      b.add_name(name);
      b.add_type(static_cast<fb::ScalarType>(x.elem));
      if (x.count) b.add_count(count);
      b.add_host(x.host);
      fb::SourceLoc l = loc(x.loc);
      b.add_loc(&l);
      if (x.symmetric) b.add_symmetric(true);
      buffers.push_back(b.Finish());
    }
    std::vector<Offset<fb::Comm>> comms;
    for (const lir::Comm& c : p_.comms) comms.push_back(fb::CreateComm(fbb(), fbb().CreateString(c.name)));
    std::vector<Offset<fb::Kernel>> kernels;
    for (const lir::Kernel& k : p_.kernels) kernels.push_back(kernel(k));
    std::vector<Offset<fb::Module>> modules;
    for (const lir::Module& m : p_.modules) {
      std::vector<Offset<fb::KernelImage>> images = kernel_images(m.images);
      auto images_v = fbb().CreateVector(images);
      auto ptx = m.ptx.empty() ? 0 : fbb().CreateVector(reinterpret_cast<const uint8_t*>(m.ptx.data()), m.ptx.size());
      auto ptx_arch = m.ptx_arch.empty() ? 0 : fbb().CreateString(m.ptx_arch);
      modules.push_back(fb::CreateModule(fbb(), images_v, ptx, ptx_arch));
    }
    std::vector<Offset<fb::Graph>> graphs;
    for (const lir::Graph& g : p_.graphs) graphs.push_back(graph(g));
    std::vector<Offset<fb::ConditionalHandle>> handles;
    for (const lir::ConditionalHandle& h : p_.handles)
      handles.push_back(fb::CreateConditionalHandle(fbb(), h.graph, h.default_value, h.set_default));
    std::vector<Offset<fb::BindCheck>> checks;
    for (const lir::BindCheck& c : p_.bind_checks) {
      auto code = fbb().CreateString(c.code);
      auto message = fbb().CreateString(c.message);
      auto condition = expr(c.condition);
      fb::BindCheckBuilder b(fbb());
      b.add_code(code);
      b.add_message(message);
      b.add_condition(condition);
      fb::SourceLoc l = loc(c.loc);
      b.add_loc(&l);
      b.add_family_size(c.family_size);
      checks.push_back(b.Finish());
    }
    std::vector<Offset<fb::StatusSite>> sites;
    for (const lir::StatusSite& x : p_.status_sites) {
      auto what = fbb().CreateString(x.what);
      fb::StatusSiteBuilder b(fbb());
      fb::SourceLoc l = loc(x.loc);
      b.add_loc(&l);
      b.add_what(what);
      sites.push_back(b.Finish());
    }
    std::vector<Offset<flatbuffers::String>> targets;
    for (const std::string& t : p_.targets) targets.push_back(fbb().CreateString(t));
    // Source files last: every loc() above has registered the files it names.
    std::vector<Offset<flatbuffers::String>> files;
    for (uint32_t id : file_order_) files.push_back(fbb().CreateString(sources_.path(id)));

    auto name = fbb().CreateString(p_.name);
    auto version = fbb().CreateString(ORCH_VERSION_STRING);
    auto files_v = fbb().CreateVector(files);
    auto targets_v = fbb().CreateVector(targets);
    auto params_v = fbb().CreateVector(params);
    auto buffers_v = fbb().CreateVector(buffers);
    auto comms_v = fbb().CreateVector(comms);
    auto kernels_v = fbb().CreateVector(kernels);
    auto graphs_v = fbb().CreateVector(graphs);
    auto segments_v = fbb().CreateVector(p_.segments);
    auto device_order_v = p_.device_order.empty() ? 0 : fbb().CreateVector(p_.device_order);
    auto handles_v = fbb().CreateVector(handles);
    auto checks_v = fbb().CreateVector(checks);
    auto sites_v = fbb().CreateVector(sites);
    auto modules_v = modules.empty() ? 0 : fbb().CreateVector(modules);
    auto ops_v = fbb().CreateVector(ops_);
    auto plan = memory_plan();
    auto nvshmem_version = p_.nvshmem_version.empty() ? 0 : fbb().CreateString(p_.nvshmem_version);
    fb::PipelineBuilder b(fbb());
    b.add_name(name);
    b.add_compiler_version(version);
    b.add_source_files(files_v);
    b.add_targets(targets_v);
    b.add_params(params_v);
    b.add_buffers(buffers_v);
    b.add_comms(comms_v);
    b.add_kernels(kernels_v);
    b.add_graphs(graphs_v);
    b.add_main_graph(p_.main_graph);
    b.add_segments(segments_v);
    b.add_handles(handles_v);
    b.add_bind_checks(checks_v);
    b.add_collective_hash(p_.collective_hash);
    b.add_status_sites(sites_v);
    if (!modules.empty()) b.add_modules(modules_v);
    b.add_ops(ops_v);
    if (!plan.IsNull()) b.add_memory_plan(plan);
    if (!nvshmem_version.IsNull()) b.add_nvshmem_version(nvshmem_version);
    if (!p_.device_order.empty()) b.add_device_order(device_order_v);
    fb::FinishPipelineBuffer(fbb(), b.Finish());
    return artifact::wrap_payload(fbb().GetBufferPointer(), fbb().GetSize());
  }

 private:
  // The arena's slots and conflicts; none when no buffer shares.
  Offset<fb::MemoryPlan> memory_plan() {
    const lir::MemoryPlan& m = p_.memory_plan;
    if (m.slots.empty()) return 0;
    std::vector<fb::ArenaSlot> slots;
    for (const lir::MemoryPlan::Slot& s : m.slots)
      slots.emplace_back(static_cast<uint32_t>(s.buffer), m.laid_out ? s.offset : 0, m.laid_out ? s.bytes : 0);
    std::vector<fb::SlotPair> conflicts;
    for (const auto& [a, b] : m.conflicts) conflicts.emplace_back(a, b);
    auto slots_v = fbb().CreateVectorOfStructs(slots);
    auto conflicts_v = fbb().CreateVectorOfStructs(conflicts);
    fb::MemoryPlanBuilder b(fbb());
    b.add_alignment(artifact::kArenaAlignment);
    b.add_slots(slots_v);
    b.add_conflicts(conflicts_v);
    b.add_laid_out(m.laid_out);
    b.add_arena_bytes(m.laid_out ? m.arena_bytes : 0);
    return b.Finish();
  }

  fb::SourceLoc loc(const SourceRange& r) {
    if (!r.valid()) return fb::SourceLoc(0, 0, 0);
    auto [it, inserted] = file_index_.emplace(r.file, static_cast<uint32_t>(file_order_.size()));
    if (inserted) file_order_.push_back(r.file);
    return fb::SourceLoc(it->second, r.begin.line, r.begin.col);
  }

  Offset<fb::Expr> expr(const lir::Expr& e) {
    std::vector<fb::ExprInstr> code;
    for (const expr::Instr& in : e.code) code.push_back(artifact::to_fb(in));
    return fb::CreateExprDirect(fbb(), &code);
  }

  std::vector<Offset<fb::KernelImage>> kernel_images(const std::vector<lir::Image>& in) {
    std::vector<Offset<fb::KernelImage>> images;
    for (const lir::Image& i : in)
      images.push_back(fb::CreateKernelImage(
          fbb(), fbb().CreateString(i.arch),
          fbb().CreateVector(reinterpret_cast<const uint8_t*>(i.cubin.data()), i.cubin.size())));
    return images;
  }

  Offset<fb::Kernel> kernel(const lir::Kernel& k) {
    std::vector<Offset<fb::KernelImage>> images = kernel_images(k.images);
    std::vector<Offset<fb::KernelParam>> params;
    for (const lir::KernelParam& q : k.params)
      params.push_back(fb::CreateKernelParam(
          fbb(), fbb().CreateString(q.name), static_cast<fb::KernelParamKind>(q.kind),
          static_cast<fb::ScalarType>(q.elem), static_cast<fb::Access>(q.access), q.family_size));
    auto name = fbb().CreateString(k.name);
    auto lowered = fbb().CreateString(k.lowered_name.empty() ? k.entry : k.lowered_name);
    auto images_v = fbb().CreateVector(images);
    Offset<flatbuffers::Vector<uint8_t>> ptx =
        k.ptx.empty() ? 0
                      : fbb().CreateVector(reinterpret_cast<const uint8_t*>(k.ptx.data()), k.ptx.size());
    Offset<flatbuffers::String> ptx_arch = k.ptx_arch.empty() ? 0 : fbb().CreateString(k.ptx_arch);
    auto params_v = fbb().CreateVector(params);
    fb::KernelBuilder b(fbb());
    b.add_name(name);
    b.add_lowered_name(lowered);
    b.add_generated(k.generated);
    if (k.module >= 0) b.add_in_module(k.module);
    else b.add_images(images_v);
    if (!k.ptx.empty()) b.add_ptx(ptx);
    if (!k.ptx_arch.empty()) b.add_ptx_arch(ptx_arch);
    b.add_params(params_v);
    b.add_uses_device_runtime(k.uses_device_runtime);
    b.add_launches_kernels(k.launches_kernels);
    b.add_cost_flops_type(static_cast<fb::ScalarType>(k.cost_precision));
    if (k.waits_at_entry) b.add_waits_at_entry(true);
    fb::SourceLoc l = loc(k.loc);
    b.add_loc(&l);
    return b.Finish();
  }

  Offset<fb::KernelArg> arg(const lir::KernelArg& a, const lir::KernelParam& param) {
    switch (a.kind) {
      case lir::ArgKind::Value: {
        auto value = expr(a.value);
        return fb::CreateKernelArg(fbb(), fb::ArgKind::Value, static_cast<fb::ScalarType>(param.elem),
                                   value, -1);
      }
      case lir::ArgKind::Buffer:
        return fb::CreateKernelArg(fbb(), fb::ArgKind::Buffer, fb::ScalarType::U8, 0, a.ref);
      case lir::ArgKind::CondHandle:
        return fb::CreateKernelArg(fbb(), fb::ArgKind::CondHandle, fb::ScalarType::U8, 0, a.ref);
      case lir::ArgKind::GraphExec:
        return fb::CreateKernelArg(fbb(), fb::ArgKind::GraphExec, fb::ScalarType::U8, 0, a.ref, a.late);
      case lir::ArgKind::GraphTable:
        return fb::CreateKernelArg(fbb(), fb::ArgKind::GraphTable, fb::ScalarType::U8, 0, a.ref);
      case lir::ArgKind::Status:
        return fb::CreateKernelArg(fbb(), fb::ArgKind::Status, fb::ScalarType::U8, 0, -1);
    }
    return 0;
  }

  static fb::ReduceOp reduce_op(lir::ReduceOp op) {
    switch (op) {
      case lir::ReduceOp::None:
      case lir::ReduceOp::Sum: break;
      case lir::ReduceOp::Prod: return fb::ReduceOp::Prod;
      case lir::ReduceOp::Min: return fb::ReduceOp::Min;
      case lir::ReduceOp::Max: return fb::ReduceOp::Max;
      case lir::ReduceOp::Avg: return fb::ReduceOp::Avg;
    }
    return fb::ReduceOp::Sum;
  }

  static fb::ConditionalType conditional_type(lir::ConditionalType t) {
    switch (t) {
      case lir::ConditionalType::If: break;
      case lir::ConditionalType::While: return fb::ConditionalType::While;
      case lir::ConditionalType::Switch: return fb::ConditionalType::Switch;
    }
    return fb::ConditionalType::If;
  }

  template <class Body>
  Offset<fb::Op> op_with(Offset<flatbuffers::String> what, Offset<Body> body) {
    return fb::CreateOp(fbb(), what, fb::OpBodyTraits<Body>::enum_value, body.Union());
  }

  // The order of the add_ calls is the payload's layout: keep it (pipeline.bin of the same
  // program is the same bytes, release after release).
  Offset<fb::Op> op(const lir::Node& n) {
    auto what = fbb().CreateString(n.what);
    // Every op is its `what` and the table of its kind (format 8), written after it.
    auto op_of = [&](auto body) { return op_with(what, body); };
    return std::visit(
        lir::overloaded{
            [&](const lir::KernelNode& k) {
              // A launch shape of constants is one struct (format 3), which the runtime reads as
              // it is; otherwise the seven expressions.
              uint32_t shape[7] = {};
              const lir::Expr* parts[7] = {&k.grid[0],  &k.grid[1],  &k.grid[2],       &k.block[0],
                                           &k.block[1], &k.block[2], &k.shared_bytes};
              bool constant = true;
              for (int i = 0; i < 7 && constant; ++i) {
                const expr::Instr* leaf = parts[i]->leaf();
                constant = leaf && leaf->kind == expr::InstrKind::Const && expr::is_integer(leaf->type) &&
                           !leaf->value.negative() && leaf->value.magnitude() <= 0xffffffffu;
                if (constant) shape[i] = static_cast<uint32_t>(leaf->value.magnitude());
              }
              Offset<flatbuffers::Vector<Offset<fb::Expr>>> grid_v = 0, block_v = 0;
              Offset<fb::Expr> shared = 0;
              if (!constant) {
                std::vector<Offset<fb::Expr>> grid, block;
                for (int i = 0; i < 3; ++i) grid.push_back(expr(k.grid[i]));
                for (int i = 0; i < 3; ++i) block.push_back(expr(k.block[i]));
                shared = expr(k.shared_bytes);
                grid_v = fbb().CreateVector(grid);
                block_v = fbb().CreateVector(block);
              }
              std::vector<Offset<fb::KernelArg>> args;
              const lir::Kernel& kernel = p_.kernels[k.kernel];
              for (size_t i = 0; i < k.args.size(); ++i) args.push_back(arg(k.args[i], kernel.params[i]));
              auto args_v = fbb().CreateVector(args);
              Offset<fb::Expr> cost_bytes = k.cost_bytes ? expr(*k.cost_bytes) : 0;
              Offset<fb::Expr> cost_flops = k.cost_flops ? expr(*k.cost_flops) : 0;
              const fb::LaunchShape launch(shape[0], shape[1], shape[2], shape[3], shape[4], shape[5], shape[6]);
              fb::KernelOpBuilder b(fbb());
              b.add_kernel(k.kernel);
              if (constant) {
                b.add_launch(&launch);
              } else {
                b.add_grid(grid_v);
                b.add_block(block_v);
                b.add_shared_bytes(shared);
              }
              b.add_args(args_v);
              if (k.cost_bytes) b.add_cost_bytes(cost_bytes);
              if (k.cost_flops) b.add_cost_flops(cost_flops);
              return op_of(b.Finish());
            },
            [&](const lir::MemcpyNode& m) { return op_of(fb::CreateMemcpyOp(fbb(), m.src, m.dst)); },
            [&](const lir::MemsetNode& m) {
              return op_of(fb::CreateMemsetOp(fbb(), m.dst, m.value, m.element_size));
            },
            [&](const lir::EmptyNode&) { return op_of(fb::CreateEmptyOp(fbb())); },
            [&](const lir::ConditionalNode& c) {
              std::vector<Offset<fb::Graph>> bodies;
              for (const lir::Body& body : c.bodies) bodies.push_back(graph_body(body));
              auto bodies_v = fbb().CreateVector(bodies);
              return op_of(fb::CreateConditionalOp(fbb(), conditional_type(c.type), c.handle, bodies_v));
            },
            [&](const lir::CollectiveNode& c) {
              Offset<fb::Expr> root = c.root ? expr(*c.root) : 0;
              fb::CollectiveOpBuilder b(fbb());
              b.add_collective(static_cast<fb::CollectiveKind>(c.kind));
              if (c.op != lir::ReduceOp::None) b.add_reduce_op(reduce_op(c.op));
              b.add_src(c.src);
              b.add_dst(c.dst);
              b.add_comm(c.comm);
              if (c.root) b.add_root(root);
              if (c.high_priority) b.add_high_priority(true);
              return op_of(b.Finish());
            },
        },
        n.op);
  }

  // The index of `n`'s op in Pipeline.ops, written on its first use. An op is known by its bytes
  // serialized alone (a scratch builder, the same calls): nodes that do the same thing share one.
  // Conditional ops hold their bodies (which refer to ops themselves) and a handle that drives
  // one node: each is its own.
  uint32_t op_index(const lir::Node& n) {
    if (!std::holds_alternative<lir::ConditionalNode>(n.op)) {
      FlatBufferBuilder scratch(256);
      cur_ = &scratch;
      scratch.Finish(op(n));
      cur_ = &main_;
      std::string key(reinterpret_cast<const char*>(scratch.GetBufferPointer()), scratch.GetSize());
      auto [it, inserted] = op_of_bytes_.emplace(std::move(key), static_cast<uint32_t>(ops_.size()));
      if (!inserted) return it->second;
    }
    ops_.push_back(op(n));
    return static_cast<uint32_t>(ops_.size() - 1);
  }

  // A body's nodes, its dependencies in one vector, their kinds where some edge is programmatic.
  struct BodyTables {
    Offset<flatbuffers::Vector<const fb::Node*>> nodes;
    Offset<flatbuffers::Vector<uint32_t>> deps;
    Offset<flatbuffers::Vector<fb::EdgeKind>> kinds;  // 0: every edge Full
  };
  BodyTables body_tables(const lir::Body& body) {
    std::vector<fb::Node> nodes;
    std::vector<uint32_t> deps;
    std::vector<fb::EdgeKind> kinds;
    bool any_programmatic = false;
    for (const lir::Node& n : body.nodes) {
      const fb::SourceLoc at = loc(n.loc);  // before the bodies': files are listed in first-use order
      const uint32_t op = op_index(n);
      for (const lir::Dep& d : n.deps) {
        deps.push_back(d.from);
        const bool programmatic = d.kind == lir::DepKind::Programmatic;
        kinds.push_back(programmatic ? fb::EdgeKind::Programmatic : fb::EdgeKind::Full);
        any_programmatic |= programmatic;
      }
      nodes.emplace_back(op, static_cast<uint32_t>(deps.size()), at);
    }
    BodyTables t;
    t.nodes = fbb().CreateVectorOfStructs(nodes);
    t.deps = fbb().CreateVector(deps);
    // Only where some edge is programmatic: absent means every edge is full.
    t.kinds = any_programmatic ? fbb().CreateVector(kinds) : 0;
    return t;
  }
  void add(fb::GraphBuilder& b, const BodyTables& t) {
    b.add_nodes(t.nodes);
    b.add_deps(t.deps);
    if (!t.kinds.IsNull()) b.add_dep_kinds(t.kinds);
  }

  Offset<fb::Graph> graph_body(const lir::Body& body) {
    const BodyTables t = body_tables(body);
    fb::GraphBuilder b(fbb());
    add(b, t);
    return b.Finish();
  }

  Offset<fb::Graph> graph(const lir::Graph& g) {
    auto name = fbb().CreateString(g.name);
    const BodyTables t = body_tables(g.body);
    fb::GraphBuilder b(fbb());
    b.add_name(name);
    add(b, t);
    b.add_device(g.device);
    b.add_family_size(g.family_size);
    b.add_fire_and_forget_launches(g.fire_and_forget_launches);
    b.add_tail_launches(g.tail_launches);
    return b.Finish();
  }

  const lir::Program& p_;
  const SourceManager& sources_;
  FlatBufferBuilder main_{1 << 16};
  FlatBufferBuilder* cur_ = &main_;  // where tables go: main_, or a scratch builder (op_index)
  FlatBufferBuilder& fbb() { return *cur_; }
  std::vector<Offset<fb::Op>> ops_;
  std::unordered_map<std::string, uint32_t> op_of_bytes_;  // an op serialized alone -> its index
  std::map<uint32_t, uint32_t> file_index_;
  std::vector<uint32_t> file_order_;
};

}  // namespace

std::string serialize(const lir::Program& program, const SourceManager& sources) {
  return Serializer(program, sources).run();
}

}  // namespace orch::lowering

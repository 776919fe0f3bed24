// generate_nvshmem_kernels: each NVSHMEM statement (put, get, signal, wait, quiet, barrier)
// becomes a kernel node running a kernel orchc writes, one block that calls NVSHMEM's device API.
// NVSHMEM's on-stream forms (nvshmemx_*_on_stream) would be stream memory-operation nodes, which
// CUDA allows in neither conditional bodies nor device graphs; kernel nodes go anywhere. One
// block needs no cooperative launch: the co-residency nvshmemx_collective_launch guarantees is
// that of every block of one grid, which one block always has. compile_all_kernels puts these
// kernels in a module of their own, compiled and linked with NVSHMEM (docs/multi-gpu.md).
#include "lowering/codegen.h"
#include "lowering/passes.h"

namespace orch::lowering {

namespace {

const char* cmp_name(mir::WaitCmp c) {
  switch (c) {
    case mir::WaitCmp::Eq: return "NVSHMEM_CMP_EQ";
    case mir::WaitCmp::Ne: return "NVSHMEM_CMP_NE";
    case mir::WaitCmp::Gt: return "NVSHMEM_CMP_GT";
    case mir::WaitCmp::Le: return "NVSHMEM_CMP_LE";
    case mir::WaitCmp::Lt: return "NVSHMEM_CMP_LT";
    case mir::WaitCmp::Ge: return "NVSHMEM_CMP_GE";
  }
  return "NVSHMEM_CMP_EQ";
}

// Threads of the block that moves a put's or get's bytes (the _block variants share the copy
// among them); the other statements are one thread's work.
constexpr int kCopyThreads = 512;

class NvshmemGenerator {
 public:
  NvshmemGenerator(mir::Program& p, const PassOptions& o, IrLowering& out) : p_(p), o_(o), out_(out) {}

  void region(mir::Region& r) {
    for (mir::Node& n : r.nodes) {
      for (mir::Region& b : mir::bodies(n)) region(b);
      if (n.is<mir::ShmemNode>()) n = lower(n);
    }
  }

 private:
  mir::Node lower(const mir::Node& n) {
    const mir::ShmemNode& s = n.as<mir::ShmemNode>();
    GeneratedKernel k(p_, "orch_nvshmem_" + std::string(mir::to_string(s.op)) + "_" + std::to_string(count_++));
    if (o_.pdl) k.wait_at_entry();
    std::vector<std::string> variants;
    if (n.guard) add_guard(k, p_, *n.guard, &variants);
    int threads = 1;
    // The signal or compared value: every thread computes the same, so all leave together when
    // it cannot be evaluated (reported once, by thread 0).
    auto value = [&] {
      const std::string v = expr::print_convert(k.expr(*s.value), s.value->type, mir::ScalarType::U64);
      k.add_statement("const orch_v<" + std::string(expr::type_code(mir::ScalarType::U64)) + "> value = " + v + ";");
      k.add_statement("if (value.e) { if (threadIdx.x == 0) orch_expr_error(value.e); return; }");
      return std::string("value.v");
    };
    auto pe = [&] { return k.value(*s.peer, mir::ScalarType::I32); };
    auto bytes = [&](int buffer) {
      const mir::Buffer& b = p_.buffers[buffer];
      mir::Expr count = b.count ? *b.count : int_constant(1, mir::ScalarType::U64);
      return k.value(mir::operation(expr::Op::Mul, count, int_constant(static_cast<int64_t>(expr::size_of(b.elem)),
                                                                      mir::ScalarType::U64)),
                     mir::ScalarType::U64);
    };
    const char* sig_op = s.signal_op == mir::SignalOp::Add ? "NVSHMEM_SIGNAL_ADD" : "NVSHMEM_SIGNAL_SET";
    switch (s.op) {
      case mir::ShmemOp::Put: {
        threads = kCopyThreads;
        const std::string src = k.buffer(s.src, false), dst = k.buffer(s.dst, true), peer = pe(), n_bytes = bytes(s.src);
        if (s.signal >= 0) {
          const std::string sig = k.buffer(s.signal, true);
          const std::string v = value();
          k.add_statement("nvshmemx_putmem_signal_block((void*)" + dst + ", (const void*)" + src + ", " + n_bytes +
                          ", (uint64_t*)" + sig + ", " + v + ", " + sig_op + ", " + peer + ");");
        } else {
          k.add_statement("nvshmemx_putmem_block((void*)" + dst + ", (const void*)" + src + ", " + n_bytes + ", " +
                          peer + ");");
        }
        break;
      }
      case mir::ShmemOp::Get: {
        threads = kCopyThreads;
        const std::string src = k.buffer(s.src, false), dst = k.buffer(s.dst, true), peer = pe(), n_bytes = bytes(s.src);
        k.add_statement("nvshmemx_getmem_block((void*)" + dst + ", (const void*)" + src + ", " + n_bytes + ", " +
                        peer + ");");
        break;
      }
      case mir::ShmemOp::Signal: {
        const std::string sig = k.buffer(s.signal, true), peer = pe();
        const std::string v = value();
        // The PE's earlier puts are complete first (each `put` was a kernel of its own: NVSHMEM
        // orders one thread's operations, not a graph's), so a peer that sees the signal sees them.
        k.add_statement("nvshmem_quiet();");
        k.add_statement("nvshmemx_signal_op((uint64_t*)" + sig + ", " + v + ", " + sig_op + ", " + peer + ");");
        break;
      }
      case mir::ShmemOp::Wait: {
        const std::string sig = k.buffer(s.signal, false);
        const std::string v = value();
        k.add_statement("nvshmem_signal_wait_until((uint64_t*)" + sig + ", " + cmp_name(s.cmp) + ", " + v + ");");
        break;
      }
      case mir::ShmemOp::Quiet:
        k.add_statement("nvshmem_quiet();");
        break;
      case mir::ShmemOp::Barrier:
        // Every PE's block arrives; completes this PE's puts first (NVSHMEM's barrier_all does).
        k.add_statement("nvshmemx_barrier_all_block();");
        break;
    }
    mir::Node out = k.finish_with_shape(n.loc, n.call_stack, int_constant(1), int_constant(threads));
    out.accesses = n.accesses;  // every symmetric buffer: a peer may touch any of them here
    const int kernel = out.as<mir::KernelNode>().kernel;
    if (o_.pdl) out_.waits_at_entry.insert(kernel);
    if (n.guard) {
      out.guard = n.guard;
      out_.guard_variants[kernel] = std::move(variants);
    }
    return out;
  }

  mir::Program& p_;
  const PassOptions& o_;
  IrLowering& out_;
  int count_ = 0;
};

}  // namespace

void generate_nvshmem_kernels(mir::Program& p, const PassOptions& o, IrLowering& out) {
  NvshmemGenerator gen(p, o, out);
  for (mir::Graph& g : p.graphs) gen.region(g.body);
}

}  // namespace orch::lowering

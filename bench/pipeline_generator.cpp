#include "bench/pipeline_generator.h"

#include <random>
#include <sstream>

namespace orch::bench {

std::string generate_pipeline(int statements, int buffers, unsigned seed) {
  std::mt19937 rng(seed);
  std::ostringstream out;
  out << "pipeline generated\ntarget sm_90\nparam n: u32 = 4096\nparam scale: f32 = 0.5\n";
  for (int b = 0; b < buffers; ++b) out << "buffer b" << b << ": f32[n]\n";
  out << "buffer counter: u32\nbuffer flag: u32\n";
  out << "kernel axpy(n: u32, a: f32, x: in f32[], y: inout f32[]) source \"\"\"\n"
         "extern \"C\" __global__ void axpy(unsigned n, float a, const float* x, float* y) {\n"
         "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i];\n"
         "}\n\"\"\"\n";
  out << "kernel probe(n: u32, x: in f32[], flag: out u32) source \"\"\"\n"
         "extern \"C\" __global__ void probe(unsigned n, const float* x, unsigned* flag) {\n"
         "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n && x[i] > 1e30f) *flag = 1;\n"
         "}\n\"\"\"\n";
  out << "graph main {\n";
  // Accesses stay mostly local (a sliding window over the buffers), as in a layered model,
  // with occasional long-range reads.
  std::uniform_int_distribution<int> near(0, 7), pick(0, 99);
  int emitted = 0, cursor = 0;
  auto buffer = [&](int offset) { return "b" + std::to_string((cursor + offset) % buffers); };
  while (emitted < statements) {
    int r = pick(rng);
    cursor = (cursor + 1) % buffers;
    if (r < 70) {
      std::string x = pick(rng) < 5 ? "b" + std::to_string(pick(rng) % buffers) : buffer(near(rng) + 1);
      std::string y = buffer(0);
      if (x == y) x = buffer(9);
      out << "  axpy<<<ceil_div(n, 256), 256>>>(n, scale, " << x << ", " << y << ")\n";
      emitted += 1;
    } else if (r < 80) {
      out << "  copy " << buffer(near(rng) + 1) << " -> " << buffer(0) << "\n";
      emitted += 1;
    } else if (r < 87) {
      out << "  fill " << buffer(0) << " = 0\n";
      emitted += 1;
    } else if (r < 94) {
      out << "  counter += 1\n";
      emitted += 1;
    } else if (statements - emitted >= 3) {
      out << "  fill flag = 0\n  probe<<<ceil_div(n, 256), 256>>>(n, " << buffer(1) << ", flag)\n"
          << "  if flag != 0 { fill " << buffer(0) << " = 0 }\n";
      emitted += 4;  // the fill inside the body counts too
    }
  }
  out << "}\n";
  return out.str();
}

}  // namespace orch::bench

"""The example of docs/python.md: compile a pipeline from its text, bind torch tensors, launch on
torch's stream, change a param, read the results. Needs a CUDA GPU, torch, and the CUDA toolkit's
NVRTC for orch.compile."""

import torch

import orch

SAXPY = '''
pipeline saxpy
target sm_90

param n: u32
param a: f32 = 2.0

buffer x: f32[n]
buffer y: f32[n]

kernel saxpy(n: u32, a: f32, x: in f32[], y: inout f32[]) source """
extern "C" __global__ void saxpy(unsigned n, float a, const float* x, float* y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""

graph main {
  saxpy<<<ceil_div(n, 256), 256>>>(n, a, x, y)
}
'''

artifact = orch.compile(SAXPY)  # bytes of pipeline.bin; orch.CompileError lists every problem
pipeline = orch.load(artifact)
print(pipeline)  # <orch.Pipeline saxpy: params n, a; buffers x, y; ...>

n = 1 << 20
stream = torch.cuda.Stream()
with torch.cuda.stream(stream):  # orch launches on torch's current stream by default
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    y0 = y.clone()
    exe = pipeline.instantiate(params={"n": n, "a": 3.0}, buffers={"x": x, "y": y})
    exe.launch()  # y = 3x + y, in place, ordered after the work already on `stream`
    z = y * 2  # torch work after it on the same stream sees the result
    exe.set_param("a", -1.0)  # patched in place, no rebuild
    exe.launch()  # y = -x + y
stream.synchronize()

torch.testing.assert_close(z, 2 * (3 * x + y0))
torch.testing.assert_close(y, 3 * x + y0 - x)
print("saxpy: ok;", exe.stats)

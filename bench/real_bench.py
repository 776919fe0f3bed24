#!/usr/bin/env python3
"""orch on kernels that do real work (issue 19): each row a pipeline compiled with orchc's defaults
and with the speed passes off in turn, the same graph built by hand, and the same work in torch
and JAX where it is expressible there, timed on one GPU in one run, each result checked against a
CPU reference first.

  bench/real_bench.py BUILD_DIR [--quick] [--only SUBSTRING]... [--markdown] [--no-profile]
                              [--orchc-flag FLAG]...  # e.g. --orchc-flag=--shared-memory-code=relocatable
  bench/real_bench.py BUILD_DIR --prepare     # compile everything into the cache; no GPU needed
  bench/real_bench.py BUILD_DIR --self-test   # CPU only: every pipeline checked and compiled small,
                                              # the references against plain loops (a ctest)

BUILD_DIR holds compiler/orchc and tools/orch-run (a build tree or scripts/stage-gpu's copy).
The rows (bench/real_workloads.py has each pipeline and why it is exact):
  chain     100 launches of x = 0.5 x + 1 over n floats (bandwidth-bound), n from 1 K to 64 M
  loop      while c > 0 { x = 0.5 x + 1; c -= 1 }, 1,000 iterations decided on the GPU
  fan-out   8 independent chains of 10 launches, then one kernel summing them
  fma       20 launches of a compute-bound kernel (256 dependent integer multiply-adds per element)
  heat      a 2-D heat step on nx^2 floats until the largest change (a max-reduction kernel into
            a device scalar) is below 1e-3, capped at 10,000 steps, two steps per trip
  sum-while x -= x >> 6 with the sum reduced into a device scalar, while the sum > n 2^14
  sgemm     4 chained products of n x n float matrices by a shared-memory tiled kernel
  moe       route tokens to 8 experts, each a device graph launched from the GPU (relu(x W_e))
Columns: orchc's default, --no-pdl, --unroll 1, --no-pdl --unroll 1; "profile": orchc --profile
with what `orch-run --profile` measured of the default artifact on these inputs, compiled on the
GPU machine (--no-profile leaves it out; rows with graphs launched from the device have none:
CUPTI cannot trace them); "by hand": the CUDA that
`orchc --emit=cuda --no-pdl --unroll 1` ejects, built with nvcc and timed by a generated harness
the way orch-run times an artifact (CUDA events around each cudaGraphLaunch, queued on one stream,
median); torch eager and torch.cuda.graph (torch's own ops, same event timing; a `while` is a host
loop in eager and the reference's trip count unrolled in the graph); JAX jit with lax.while_loop,
with XLA's default flags and with command buffers for WHILE and CONDITIONAL. "-": not measured.
A last table says what orchc chose for each row's default artifact (from `orchc --print-passes`):
programmatic edges, each loop's copies or why it has none, and the code each kernel source that
uses shared memory took (--shared-memory-code=auto); --prepare prints it too.

Compiled pipelines and by-hand binaries are cached by content (--cache, default
BUILD_DIR/real_bench_cache), so --prepare on a machine without a GPU saves the GPU machine's time.
The whole suite took 1 min 55 s on an H200 with everything prepared (--quick runs a third of the
repetitions; most of the time is process starts and the references; nvcc and orchc add about a
minute on 16 cores where nothing is cached). The run fails (exit 1)
where any column's result is wrong or its run failed; the table is printed first.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import real_workloads as W  # noqa: E402

OPTIONS = {"default": [], "--no-pdl": ["--no-pdl"], "--unroll 1": ["--unroll", "1"],
           "--no-pdl --unroll 1": ["--no-pdl", "--unroll", "1"]}
# Not a default: what a guarded copy costs where the compiler would not unroll (loops only).
FORCED = {"--unroll 16": ["--unroll", "16"]}
BASELINES = ["by hand", "torch eager", "torch graph", "JAX", "JAX cmdbuf"]
# orchc --profile: the defaults decided from what `orch-run --profile` measured on the default
# artifact with the row's inputs (docs/observe.md), compiled on the GPU machine.
PROFILED = "profile"
COLUMNS = list(OPTIONS) + [PROFILED] + BASELINES + list(FORCED)
# XLA's command buffers (CUDA graphs) for the loop and its condition; min_graph_size 1 because a
# jitted function whose top level is one while loop is a single command, below the default of 5.
JAX_FLAGS = {"JAX": "", "JAX cmdbuf": "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL "
                                      "--xla_gpu_graph_min_graph_size=1"}
NP_TYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "u32": np.uint32, "i64": np.int64,
            "u64": np.uint64}


def run(cmd, **kw) -> str:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"$ {' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def buffers(text: str) -> list:
    """(name, numpy dtype) of each buffer, in declaration order (the ejected file's order)."""
    out = []
    for name, ty, host in re.findall(r"^buffer (\w+): (\w+)(?:\[[^\]]*\])?( host)?$", text, re.M):
        assert not host and name.isidentifier(), name  # the harness binds device buffers by member name
        out.append((name, NP_TYPES[ty]))
    return out


def pipeline_name(text: str) -> str:
    return re.search(r"^pipeline (\w+)$", text, re.M).group(1)


# ---- compiling: orchc artifacts and by-hand binaries, cached by content -------------------------

def summarize_choices(printed: str) -> str:
    """orchc's choices for one pipeline, from its --print-passes output: programmatic edges (the
    last count, after the kernels are compiled), each loop's copies or why none, and the code each
    kernel source that uses shared memory took (--shared-memory-code=auto)."""
    parts = []
    edges = re.findall(r"note: programmatic edges: (\d+) of (\d+) kernel -> kernel edges", printed)
    if edges and edges[-1][1] != "0":
        parts.append(f"PDL {edges[-1][0]} of {edges[-1][1]} edges")
    for copies in re.findall(r"note: `while .*?` at line [\d:]+: (\d+) copies of its body", printed):
        parts.append(f"loop x{copies}")
    for why in re.findall(r"note: `while .*?` at line [\d:]+: not unrolled: (.*)", printed):
        parts.append("loop not unrolled (" + ("multi-wave" if "blocks" in why else why[:40]) + ")")
    # The last program printed holds the compiled kernels (compile_all_kernels onwards).
    last = printed[printed.rfind("=== after compile_all_kernels"):] if "=== after compile_all_kernels" in printed else ""
    smem = {}
    for name, mode, rest in re.findall(r"^kernel \d+ (\w+)\(.*shared-memory code ([\w-]+):(.*)$", last, re.M):
        smem.setdefault(name, mode + (" (patched at entry: linked either way)" if "patched at entry" in rest else ""))
    parts += [f"{k} {m}" for k, m in smem.items()]
    return "; ".join(parts) or "-"


class Builder:
    def __init__(self, build: pathlib.Path, cache: pathlib.Path, extra: list = ()):
        self.orchc = build / "compiler" / "orchc"
        self.extra = list(extra)  # --orchc-flag: given to every compile, so in every artifact's key
        self.orch_run = build / "tools" / "orch-run"
        self.cache = cache
        cache.mkdir(parents=True, exist_ok=True)
        # What an artifact depends on besides the .orch text and the options: orchc and the
        # target profiles it reads (the kernels' CUDA headers are the toolkit's, not keyed).
        h = hashlib.sha256(self.orchc.read_bytes())
        targets = pathlib.Path(os.environ.get("ORCH_TARGETS_DIR", "/nonexistent"))
        for y in sorted(targets.glob("*.yaml")):
            h.update(y.read_bytes())
        self.orchc_hash = h.hexdigest()
        self.nvcc = next((p for p in [os.environ.get("ORCH_NVCC"), os.environ.get("CUDA_HOME", "") + "/bin/nvcc",
                                      "/usr/local/cuda/bin/nvcc", shutil.which("nvcc")]
                          if p and os.access(p, os.X_OK)), None)

    def key(self, *parts) -> str:
        return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:20]

    def profiled(self, row_dir: pathlib.Path, slug: str, default: pathlib.Path, fills: list, repeat: int):
        """The default artifact's profile with the row's inputs, and the pipeline compiled from
        it (orchc --profile); never cached, since the profile is this GPU's."""
        prof = row_dir / "profile.json"
        run([self.orch_run, default, "--warmup", 3, "--repeat", max(3, min(repeat, 20)), *fills, "--profile", prof])
        out = row_dir / f"{slug}.profiled.bin"
        run([self.orchc, *self.extra, "--profile", prof, f"{slug}.orch", "-o", out], cwd=row_dir)
        return out

    def artifact(self, row_dir: pathlib.Path, slug: str, opts: list) -> pathlib.Path:
        text = (row_dir / f"{slug}.orch").read_text()
        opts = [*self.extra, *opts]
        out = self.cache / f"{slug}-{self.key(self.orchc_hash, *opts, text)}.bin"
        if not out.exists():
            tmp = out.with_suffix(".tmp")
            run([self.orchc, *opts, f"{slug}.orch", "-o", tmp], cwd=row_dir)
            tmp.rename(out)
        return out

    def choices(self, row_dir: pathlib.Path, slug: str) -> str:
        """What orchc chose for the default artifact, in a phrase (summarize_choices), from
        `orchc --print-passes`; cached beside the artifacts."""
        text = (row_dir / f"{slug}.orch").read_text()
        out = self.cache / f"{slug}-{self.key(self.orchc_hash, 'choices', *self.extra, text)}.txt"
        if not out.exists():
            printed = run([self.orchc, *self.extra, "--print-passes", f"{slug}.orch", "-o", f"{slug}.choices.bin"],
                          cwd=row_dir)
            out.write_text(summarize_choices(printed))
        return out.read_text()

    def harness_source(self, row_dir: pathlib.Path, slug: str, text: str) -> tuple:
        """The ejected CUDA of --no-pdl --unroll 1 and a main() that fills, times and dumps it."""
        cu = run([self.orchc, "--emit=cuda", "--no-pdl", "--unroll", "1", f"{slug}.orch"], cwd=row_dir)
        fn = pipeline_name(text)
        ty = "".join(part[:1].upper() + part[1:] for part in fn.split("_"))  # orchc's struct prefix
        bufs = buffers(text)
        status = f"H_CHECK(device_status_{fn}(g));" if f"cudaError_t device_status_{fn}(" in cu else ""
        main = HARNESS.format(cu=f"{slug}.cu", fn=fn, T=ty, n=len(bufs), status=status,
                              names=", ".join(f'"{b}"' for b, _ in bufs),
                              sizes=", ".join(str(np.dtype(t).itemsize) for _, t in bufs),
                              ptrs=", ".join(f"(void*)b.{b}" for b, _ in bufs))
        return cu, main

    def by_hand(self, row_dir: pathlib.Path, slug: str, text: str):
        """The harness binary, or a reason why there is none."""
        cu, main = self.harness_source(row_dir, slug, text)
        cmd = ["-arch=sm_90", "-rdc=true", "-O3", "harness.cu", "-lcudadevrt"]
        out = self.cache / f"{slug}-{self.key(cu, main, *cmd)}.byhand"
        if out.exists():
            return out
        if not self.nvcc:
            return "no nvcc (set ORCH_NVCC) and no cached binary (--prepare where nvcc is)"
        d = pathlib.Path(tempfile.mkdtemp(prefix=f"{slug}-", dir=row_dir))
        (d / f"{slug}.cu").write_text(cu)
        (d / "harness.cu").write_text(main)
        run([self.nvcc, *cmd, "-o", "harness.tmp"], cwd=d)
        shutil.move(d / "harness.tmp", out)
        return out


HARNESS = r'''// Times the graph that `orchc --emit=cuda --no-pdl --unroll 1` ejected ({cu}) as orch-run times
// an artifact; generated by bench/real_bench.py.
//   harness IN_DIR|- OUT_DIR|- WARMUP REPEAT
// Fills each buffer from IN_DIR/<buffer>.bin where that file exists (the rest start zeroed),
// builds the graphs, launches WARMUP times, then REPEAT times each between two CUDA events,
// queued on one stream; prints "median T us" and writes every buffer to OUT_DIR/<buffer>.bin.
#define ORCH_EJECT_NO_MAIN
#include "{cu}"
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#define H_CHECK(call)                                                                   \
  do {{                                                                                  \
    const cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {{                                                            \
      std::fprintf(stderr, "harness: %s: %s\n", #call, cudaGetErrorString(e_));         \
      return 1;                                                                         \
    }}                                                                                   \
  }} while (0)

int main(int argc, char** argv) {{
  if (argc != 5) {{
    std::fprintf(stderr, "usage: %s IN_DIR|- OUT_DIR|- WARMUP REPEAT\n", argv[0]);
    return 2;
  }}
  const std::string in = argv[1], out = argv[2];
  const int warmup = std::atoi(argv[3]), repeat = std::atoi(argv[4]);
  const char* const name[] = {{{names}}};
  const size_t size[] = {{{sizes}}};
  {T}Params p;
  {T}Buffers b;
  {T}Graphs g;
  unsigned long long count[{n}] = {{}};
  H_CHECK(buffer_counts_{fn}(p, count));
  H_CHECK(allocate_{fn}(p, &b));
  void* const dev[] = {{{ptrs}}};
  for (int i = 0; in != "-" && i < {n}; ++i) {{
    std::FILE* f = std::fopen((in + "/" + name[i] + ".bin").c_str(), "rb");
    if (!f) continue;
    std::vector<unsigned char> bytes(count[i] * size[i]);
    const bool whole = std::fread(bytes.data(), 1, bytes.size(), f) == bytes.size() && std::fgetc(f) == EOF;
    std::fclose(f);
    if (!whole) {{
      std::fprintf(stderr, "harness: %s.bin is not %zu bytes\n", name[i], bytes.size());
      return 1;
    }}
    H_CHECK(cudaMemcpy(dev[i], bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }}
  H_CHECK(build_{fn}(p, b, &g));
  H_CHECK(cudaDeviceSynchronize());
  cudaStream_t s;
  H_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < warmup; ++i) H_CHECK(launch_{fn}(g, s));
  H_CHECK(cudaStreamSynchronize(s));
  std::vector<cudaEvent_t> ev(2 * repeat);
  for (cudaEvent_t& e : ev) H_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < repeat; ++i) {{
    H_CHECK(cudaEventRecord(ev[2 * i], s));
    H_CHECK(launch_{fn}(g, s));
    H_CHECK(cudaEventRecord(ev[2 * i + 1], s));
  }}
  H_CHECK(cudaStreamSynchronize(s));
  {status}
  std::vector<float> ms(repeat);
  for (int i = 0; i < repeat; ++i) H_CHECK(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
  std::sort(ms.begin(), ms.end());
  if (repeat > 0)
    std::printf("median %.3f us\n", 1000.0 * (repeat % 2 ? ms[repeat / 2] : (ms[repeat / 2 - 1] + ms[repeat / 2]) / 2));
  for (int i = 0; out != "-" && i < {n}; ++i) {{
    std::vector<unsigned char> bytes(count[i] * size[i]);
    H_CHECK(cudaMemcpy(bytes.data(), dev[i], bytes.size(), cudaMemcpyDeviceToHost));
    std::FILE* f = std::fopen((out + "/" + name[i] + ".bin").c_str(), "wb");
    if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {{
      std::fprintf(stderr, "harness: cannot write %s.bin\n", name[i]);
      return 1;
    }}
  }}
  for (cudaEvent_t e : ev) cudaEventDestroy(e);
  cudaStreamDestroy(s);
  destroy_{fn}(&g);
  free_{fn}(&b);
  return 0;
}}
'''


# ---- checking ---------------------------------------------------------------------------------------

def compare(row: W.Row, got: dict, want: dict, bound) -> str | None:
    """None when `got` matches, else what differs."""
    for name in row.outputs:
        g, w = np.asarray(got[name]).reshape(-1), np.asarray(want[name]).reshape(-1)
        if g.shape != w.shape:
            return f"{name}: {g.size} elements, expected {w.size}"
        if row.check == "bound" and g.dtype.kind == "f":
            bad = int(np.sum(~(np.abs(g.astype(np.float64) - w) <= bound)))  # NaN counts as bad
            if bad:
                worst = float(np.max(np.abs(g - w) / bound))
                return f"{name}: {bad} of {g.size} elements outside the bound (worst at {worst:.2f}x it)"
        elif not np.array_equal(g, w.astype(g.dtype)):
            bad = int(np.sum(g != w.astype(g.dtype)))
            extra = f" ({g[0]} against {w[0]})" if g.size == 1 else ""
            return f"{name}: {bad} of {g.size} elements differ{extra}"
    return None


def read_dumps(row: W.Row, d: pathlib.Path, types: dict) -> dict:
    return {name: np.fromfile(d / f"{name}.bin", dtype=types[name]) for name in row.outputs}


def median_us(out: str) -> float:
    m = re.search(r"median ([0-9.]+) (us|ms|s)\b", out)
    return float(m.group(1)) * {"us": 1.0, "ms": 1e3, "s": 1e6}[m.group(2)]


# ---- torch --------------------------------------------------------------------------------------------

def torch_times(torch, fn, warmup: int, repeat: int) -> float:
    """Median of CUDA-event times of `fn` after `warmup` calls, the calls queued back to back on
    the current stream as orch-run queues its launches."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeat)]
    for start, stop in ev:
        start.record()
        fn()
        stop.record()
    torch.cuda.synchronize()
    return float(np.median([start.elapsed_time(stop) * 1e3 for start, stop in ev]))


def torch_columns(torch, row: W.Row, inputs: dict, want, repeat: int, cells: dict, notes: list):
    """Fills cells "torch eager" and "torch graph"; returns torch eager's result (the expected
    result where numpy has none)."""
    iters = int(want["iters"][0]) if want is not None and "iters" in want else None
    work = W.TorchWork(torch, row.torch, row.params, inputs, iters)
    work.load()
    work.eager()
    torch.cuda.synchronize()
    eager_result = work.result()
    if want is not None and (why := compare(row, eager_result, want, row_bound(row, inputs))):
        cells["torch eager"] = "FAIL"
        notes.append(f"{row.name}: torch eager: {why}")
    else:
        cells["torch eager"] = torch_times(torch, work.eager, 3, repeat)
    work.iters = int(eager_result["iters"][0]) if "iters" in eager_result else None
    if work.graphable is None:
        return eager_result
    stream = torch.cuda.Stream()  # warm up and capture on a side stream, as torch's docs ask
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            work.graphable()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        work.graphable()
    work.load()
    graph.replay()
    torch.cuda.synchronize()
    expected = want if want is not None else eager_result
    if why := compare(row, work.result(), expected, row_bound(row, inputs)):
        cells["torch graph"] = "FAIL"
        notes.append(f"{row.name}: torch graph: {why}")
    else:
        cells["torch graph"] = torch_times(torch, graph.replay, 3, repeat)
    del graph, work
    torch.cuda.empty_cache()
    return eager_result


_bounds = {}


def row_bound(row: W.Row, inputs: dict):
    if row.check != "bound":
        return None
    if row.slug not in _bounds:
        _bounds.clear()
        _bounds[row.slug] = row.bound(inputs)
    return _bounds[row.slug]


# ---- JAX ----------------------------------------------------------------------------------------------

def jax_columns(tasks: list, work: pathlib.Path, notes: list) -> dict:
    """Runs every JAX task once per flag setting, each setting in a process of its own (XLA reads
    XLA_FLAGS once); returns {(slug, column): result}."""
    results = {}
    spec = work / "jax_tasks.json"
    spec.write_text(json.dumps([t for t, _ in tasks]))
    for column, flags in JAX_FLAGS.items():
        env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", XLA_FLAGS=flags, TF_CPP_MIN_LOG_LEVEL="2")
        r = subprocess.run([sys.executable, __file__, "--jax-worker", str(spec)], capture_output=True, text=True, env=env)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("jax-results ")]
        if r.returncode != 0 or not lines:
            tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
            notes.append(f"{column} ({flags or 'default flags'}): the worker failed: {' / '.join(tail)}")
            continue
        for (task, slug), res in zip(tasks, json.loads(lines[0][len("jax-results "):])):
            results[(slug, column)] = res
    return results


# ---- the table -----------------------------------------------------------------------------------------

def fmt(v) -> str:
    if not isinstance(v, float):
        return v or "-"
    return f"{v:.1f} us" if v < 1000 else f"{v / 1000:.3f} ms"


def ratio(a, b) -> str:
    return f"{a / b:.3f}" if isinstance(a, float) and isinstance(b, float) else "-"


def print_tables(results: list, markdown: bool, choices: dict = None):
    forced = any(FORCED.keys() & cells.keys() for _, cells, _ in results)
    cols = COLUMNS if forced else COLUMNS[:-len(FORCED)]
    main = [["row", *cols, "checked"]]
    for name, cells, checked in results:
        main.append([name, *(fmt(cells.get(c)) for c in cols), checked])
    ratios = [["row", "default/best other orch", "default/profile", "default/by hand", "default/torch graph",
               "default/JAX cmdbuf"]]
    for name, cells, _ in results:
        others = [cells[k] for k in OPTIONS if k != "default" and isinstance(cells.get(k), float)]
        ratios.append([name, ratio(cells.get("default"), min(others) if others else None),
                       ratio(cells.get("default"), cells.get(PROFILED)),
                       ratio(cells.get("default"), cells.get("by hand")), ratio(cells.get("default"), cells.get("torch graph")),
                       ratio(cells.get("default"), cells.get("JAX cmdbuf"))])
    tables = [main, ratios]
    if choices:
        tables.append([["row", "orchc's choices (default)"]] + [[name, choices.get(name, "-")] for name, _, _ in results])
    for table in tables:
        if markdown:
            print("| " + " | ".join(table[0]) + " |")
            print("| --- |" + " ---: |" * (len(table[0]) - 1))
            for r in table[1:]:
                print("| " + " | ".join(r) + " |")
        else:
            widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
            for r in table:
                if table is not main and table is not ratios:  # text: left-aligned
                    print(r[0].ljust(widths[0]) + "  " + "  ".join(r[1:]))
                    continue
                print(r[0].ljust(widths[0]) + "".join(c.rjust(w + 2) for c, w in zip(r[1:], widths[1:])))
        print()


# ---- the run -------------------------------------------------------------------------------------------

def row_choices(builder: Builder, rows: list, work: pathlib.Path, notes: list) -> dict:
    """{row name: orchc's choices} for rows whose .orch prepare wrote under `work`."""
    out = {}
    for row in rows:
        try:
            out[row.name] = builder.choices(work / row.slug, row.slug)
        except RuntimeError as e:
            out[row.name] = "?"
            notes.append(f"{row.name}: orchc --print-passes: {str(e).splitlines()[0][:100]}")
    return out


def prepare(builder: Builder, rows: list, work: pathlib.Path, check: bool, jobs: int) -> dict:
    """Writes each row's .orch, compiles every option set and builds the by-hand binary (in
    parallel, before any timing); returns {slug: (artifacts, by-hand binary or reason)}."""
    def one(row):
        d = work / row.slug
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{row.slug}.orch").write_text(row.orch)
        if check:
            run([builder.orchc, "--check", f"{row.slug}.orch"], cwd=d)
        forced = FORCED if row.loop else {}
        arts = {label: builder.artifact(d, row.slug, opts) for label, opts in {**OPTIONS, **forced}.items()}
        try:
            hand = builder.by_hand(d, row.slug, row.orch)
        except RuntimeError as e:  # orchc --emit=cuda or nvcc: the command and its first error
            lines = str(e).strip().splitlines()
            hand = f"{lines[0][:80]}: {next((ln for ln in lines if 'error' in ln), lines[-1]).strip()}"
        return row.slug, (arts, hand)

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        return dict(pool.map(one, rows))


def bench(a, builder: Builder, rows: list) -> int:
    gpu = run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).strip().splitlines()[0]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    notes, results = [], []
    try:
        if a.orch_only:
            raise ImportError("--orch-only")
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 products in float32 (the bound assumes it)
        torch.set_float32_matmul_precision("highest")
        torch.ones(1, device="cuda")
    except Exception as e:  # ImportError, or no GPU for torch
        torch = None
        notes.append(f"torch columns '-': torch is not usable here ({type(e).__name__}: {e})")
    probe = subprocess.run([sys.executable, "-c", "import sys, jax; print(jax.__version__); sys.exit(%d)" % a.orch_only],
                           capture_output=True, text=True)
    have_jax = probe.returncode == 0
    if not have_jax:
        notes.append("JAX columns '-': jax is not importable by this interpreter")
    versions = "; ".join(v for v in (f"torch {torch.__version__}" if torch else "",
                                     f"jax {probe.stdout.strip()}" if have_jax else "") if v)
    div = 3 if a.quick else 1
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        built = prepare(builder, rows, work, check=False, jobs=os.cpu_count() or 2)
        choices = row_choices(builder, rows, work, notes)
        jax_tasks, jax_expect = [], {}
        for row in rows:
            d, (arts, hand) = work / row.slug, built[row.slug]
            repeat = max(3, row.repeat // div)
            types = dict(buffers(row.orch))
            inputs = row.inputs()
            (d / "in").mkdir()
            for name, v in inputs.items():
                v.astype(types[name]).tofile(d / "in" / f"{name}.bin")
            fills = [arg for name in inputs for arg in ("--fill", f"{name}=file:{d / 'in' / name}.bin")]
            want = row.reference(inputs) if row.reference else None
            checked = row.check if want is not None else "-"
            cells = {}
            if torch is not None and row.torch:
                try:
                    eager_result = torch_columns(torch, row, inputs, want, repeat, cells, notes)
                    if want is None:
                        want, checked = eager_result, "=torch"
                except Exception as e:
                    notes.append(f"{row.name}: torch failed: {type(e).__name__}: {str(e).splitlines()[0]}")
            bound = row_bound(row, inputs)
            columns = list(arts.items())
            if not a.no_profile:
                try:
                    columns.append((PROFILED, builder.profiled(d, row.slug, arts["default"], fills, repeat)))
                except RuntimeError as e:
                    columns.append((PROFILED, f"{' / '.join(str(e).strip().splitlines()[-2:])}"))
            for label, art in columns + [("by hand", hand)]:
                if not isinstance(art, pathlib.Path):
                    # A row orch-run cannot profile (graphs launched from the device: CUPTI
                    # cannot trace them) has no profile column; it is not a wrong result.
                    notes.append(f"{row.name}: {label}: {art}")
                    continue
                out = d / f"out-{label.replace(' ', '_')}"
                out.mkdir()
                if label == "by hand":
                    check_cmd = [art, d / "in", out, 0, 1]
                    time_cmd = [art, d / "in", "-", 3, repeat]
                else:
                    dumps = [arg for name in row.outputs for arg in ("--dump", f"{name}={out / name}.bin")]
                    check_cmd = [builder.orch_run, art, "--warmup", 0, "--repeat", 1, *fills, *dumps]
                    time_cmd = [builder.orch_run, art, "--warmup", 3, "--repeat", repeat, *fills]
                try:
                    if want is not None:
                        run(check_cmd)
                        if why := compare(row, read_dumps(row, out, types), want, bound):
                            cells[label] = "FAIL"
                            notes.append(f"{row.name}: {label}: {why}")
                            continue
                    cells[label] = median_us(run(time_cmd))
                except RuntimeError as e:  # the run failed: the rest of the table still comes
                    cells[label] = "error"
                    notes.append(f"{row.name}: {label}: {' / '.join(str(e).strip().splitlines()[-2:])}")
            if have_jax and row.jax:
                np.save(d / "jax_in.npy", next(iter(inputs.values())))
                jax_tasks.append(({**row.jax, "input": str(d / "jax_in.npy"), "output": str(d / "jax_out"),
                                   "calls": 3, "batches": repeat}, row.slug))
                jax_expect[row.slug] = (row, want)
            results.append((row.name, cells, checked))
            print(f"  {row.name}: " + ", ".join(f"{k} {fmt(v)}" for k, v in cells.items()), file=sys.stderr, flush=True)
        for (slug, column), res in jax_columns(jax_tasks, work, notes).items():
            row, want = jax_expect[slug]
            cells = next(c for n, c, _ in results if n == row.name)
            if "error" in res:
                cells[column] = "error"
                notes.append(f"{row.name}: {column}: {res['error']}")
                continue
            got = {n: np.load(work / slug / f"jax_out.{n}.npy") for n in res["outputs"]}
            if want is not None and (why := compare(row, got, want, None)):
                cells[column] = "FAIL"
                notes.append(f"{row.name}: {column}: {why}")
            else:
                cells[column] = res["us"]
    print(f"real_bench: {gpu}; {now}; medians per launch of the whole pipeline (orch-run, the by-hand "
          f"harness and torch: CUDA events; JAX: wall time of queued calls){' (--quick)' if a.quick else ''}"
          + (f"; {versions}" if versions else ""))
    print()
    print_tables(results, a.markdown, choices)
    worst = max((c["default"] / min(c[k] for k in OPTIONS if k != "default" and isinstance(c.get(k), float))
                 for _, c, _ in results if isinstance(c.get("default"), float)
                 and any(isinstance(c.get(k), float) for k in OPTIONS if k != "default")), default=0)
    print(f"worst default/best other orch: {worst:.3f} (target: <= 1.02)")
    gains = [c["default"] / c[PROFILED] for _, c, _ in results
             if isinstance(c.get("default"), float) and isinstance(c.get(PROFILED), float)]
    if gains:
        print(f"default/profile: {min(gains):.3f} to {max(gains):.3f} over {len(gains)} rows (> 1: the profile's "
              f"choices faster), geometric mean {float(np.exp(np.mean(np.log(gains)))):.3f}")
    for n in notes:
        print(f"note: {n}")
    # A wrong result or a failed run anywhere (orch, by hand, torch or JAX) fails the run.
    return 1 if any(v in ("FAIL", "error") for _, c, _ in results for v in c.values()) else 0


def self_test(build: pathlib.Path) -> int:
    """CPU only (a ctest): every row's pipeline at its real size through the checker's rules; a
    small pipeline of each kind checked with its kernels, compiled with the defaults and with the
    speed passes off, ejected, and its by-hand harness generated (nvcc is --prepare's: too slow
    for a test); every CPU reference against plain loops on tiny inputs."""
    fails = W.self_test_references()
    small = [W.chain_row(1000, "t", 1, launches=3), W.loop_row(1000, "t", 1, iters=5),
             W.fanout_row(1000, "t", 1, branches=2, depth=2), W.fma_row(1000, "t", 1, launches=2),
             W.heat_row(32, 1, True), W.shrink_row(4096, "t", 1, True), W.gemm_row(128, 1, depth=2),
             W.moe_row(256, 64, 1)]
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        builder = Builder(build, work / "cache")  # an empty cache: every compile runs
        for row in W.rows() + small:
            d = work / ("small-" if row in small else "") / row.slug
            d.mkdir(parents=True, exist_ok=True)
            (d / f"{row.slug}.orch").write_text(row.orch)
            try:
                if row not in small:
                    run([builder.orchc, "--check", "--no-kernels", f"{row.slug}.orch"], cwd=d)
                    continue
                run([builder.orchc, "--check", f"{row.slug}.orch"], cwd=d)
                for opts in (OPTIONS["default"], OPTIONS["--no-pdl --unroll 1"]):
                    builder.artifact(d, row.slug, opts)
                cu, main = builder.harness_source(d, row.slug, row.orch)
                for name, _ in buffers(row.orch):
                    if f"(void*)b.{name}" not in main or f" {name} = nullptr;" not in cu:
                        fails.append(f"{row.name}: the harness or the ejected file lacks buffer {name}")
                inputs = row.inputs()
                want = row.reference(inputs)
                if set(want) != set(row.outputs) or set(inputs) - set(dict(buffers(row.orch))):
                    fails.append(f"{row.name}: the reference or the inputs name other buffers than the pipeline")
            except RuntimeError as e:
                fails.append(f"{row.name}: {e}")
    for f in fails:
        print(f"real_bench self-test: FAIL: {f}")
    print(f"real_bench self-test: {len(W.rows())} rows checked, {len(small)} small pipelines compiled and ejected, "
          f"{'failed' if fails else 'ok'}")
    return 1 if fails else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?")
    ap.add_argument("--quick", action="store_true", help="a third of the repetitions")
    ap.add_argument("--only", action="append", default=[], help="rows whose name contains SUBSTRING (repeatable)")
    ap.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    ap.add_argument("--orch-only", action="store_true", help="no torch or JAX columns (A/B runs of orchc's flags)")
    ap.add_argument("--no-profile", action="store_true", help="no `profile` column (orch-run --profile, orchc --profile)")
    ap.add_argument("--cache", help="compiled pipelines and by-hand binaries (default BUILD_DIR/real_bench_cache)")
    ap.add_argument("--prepare", action="store_true", help="compile and build every row into the cache; no GPU")
    ap.add_argument("--orchc-flag", action="append", default=[], metavar="FLAG",
                    help="give every orchc compile FLAG too, e.g. --orchc-flag=--shared-memory-code=relocatable")
    ap.add_argument("--self-test", action="store_true", help="CPU only: pipelines and references, small")
    ap.add_argument("--jax-worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.jax_worker:
        print("jax-results " + json.dumps(W.jax_tasks_run(json.loads(pathlib.Path(a.jax_worker).read_text()))))
        return 0
    if not a.build:
        ap.error("BUILD_DIR is required")
    build = pathlib.Path(a.build).resolve()
    if a.self_test:
        return self_test(build)
    # orchc finds its target profiles through ORCH_TARGETS_DIR, or the source tree it was built
    # from, which a staged copy on another machine lacks: the checkout this script is in.
    targets = pathlib.Path(__file__).resolve().parent.parent / "targets"
    if "ORCH_TARGETS_DIR" not in os.environ and (targets / "sm_90.yaml").exists():
        os.environ["ORCH_TARGETS_DIR"] = str(targets)
    builder = Builder(build, pathlib.Path(a.cache).resolve() if a.cache else build / "real_bench_cache", a.orchc_flag)
    rows = [r for r in W.rows() if not a.only or any(s in r.name for s in a.only)]
    if a.prepare:
        with tempfile.TemporaryDirectory() as tmp:
            built = prepare(builder, rows, pathlib.Path(tmp), check=True, jobs=2)
            notes = []
            choices = row_choices(builder, rows, pathlib.Path(tmp), notes)
        for row in rows:
            arts, hand = built[row.slug]
            print(f"{row.name}: {len(arts)} artifacts, by hand: {hand if isinstance(hand, str) else hand.name}; "
                  f"orchc's choices: {choices[row.name]}")
        for n in notes:
            print(f"note: {n}")
        return 0 if all(not isinstance(h, str) for _, h in built.values()) else 1
    return bench(a, builder, rows)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""PyTorch DistributedDataParallel on the scaling benchmark's data-parallel step, and the table.

    scaling_ddp.py RESULTS                  # DDP at the world size of the GPUs visible; appends to RESULTS
    scaling_ddp.py --table RESULTS [--markdown]

The step is bench/scaling_dp.orch's (bench/scaling_bench.cu has the orch and hand-captured
variants): 4 layers of 2 Mi f32 parameters; the loss of layer l is the mean over this rank's
samples of 0.5 * |w_l - x_k|^2, so its gradient is w_l - mean_k x_k; SGD, lr 1/8. The model is a
custom autograd Function per layer whose backward computes that gradient with x.sum(0) and one
torch.sub (orch does it in one kernel) and passes the backward signal to the layer before it, so
autograd runs the layers last first, as orch's pipeline orders its gradient kernels; the forward
computes no loss value (orch computes none either): one tiny copy per layer. Same sizes, same
data (the same hash of the same keys as scaling_bench.cu, generated on the GPU).

DDP settings: device_ids=[rank], bucket_cap_mb=8 (one bucket per 8 MiB layer, so DDP issues one
allreduce per layer as orch does, each as soon as its layer's gradient is ready: DDP's first step
reduces everything in one bucket, then it rebuilds the buckets by this cap, in the order the
gradients came), gradient_as_bucket_view=True,
everything else default (find_unused_parameters=False, broadcast_buffers=True); SGD(lr=0.125),
foreach (the default on CUDA); zero_grad(set_to_none=True) before every eager step, so that
backward writes the gradient as orch's kernel does instead of adding to it.
- ddp: eager steps on a side stream.
- ddp_graph: the whole step (forward, backward with DDP's allreduces, optimizer step) captured
  with torch.cuda.graph and replayed, as PyTorch documents for DDP with NCCL >= 2.9.6
  ("Usage with DistributedDataParallel"): TORCH_NCCL_ASYNC_ERROR_HANDLING=0 before the process
  group, DDP constructed in a side-stream context, at least 11 eager DDP steps before capture,
  zero_grad(set_to_none=True) before capture, static inputs (the data tensors never change).

Each variant first runs one step from the initial weights and is checked exactly: the data are
multiples of 2^-10 chosen so that every sum in the step is exact in f32 (scaling_bench.cu says
why), so the weights after one step equal an exact CPU reference at sampled indices and their
fingerprint over all 8 Mi weights must equal orch's bit for bit (the table compares them).
Times: µs per step, the median of 7 batches (CUDA events), the slowest rank's.

Every process gets NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1 and
TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (unless set): no NVLink multicast.
"""
import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import tempfile

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("NVSHMEM_DISABLE_NVLS", "1"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
               ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")):
    os.environ.setdefault(_k, _v)

LAYERS = 4
P = 1 << 21             # parameters per layer
STRONG_BATCH = 32       # global batch, strong scaling
WEAK_BATCH = 8          # samples per rank, weak scaling
LR = 0.125
BATCHES = 7
BUCKET_CAP_MB = 8
WARMUP = 11             # eager DDP steps before capture (PyTorch's documented minimum)
M32 = 0xFFFFFFFF


# ---- The data: scaling_bench.cu's hash, in Python integers (the reference) and in torch.
def mix32(x):
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    x ^= x >> 16
    return x


def signed_unit(key, i):
    return ((mix32(i ^ mix32(key)) >> 21) - 1024) / 1024.0


def w_key(layer):
    return 0x57000000 + layer


def x_key(layer, sample):
    return 0x58000000 + (layer << 16) + sample


def config_text(b, world):
    # The same words as scaling_bench.cu's, so that the table pairs the rows.
    return f"{LAYERS} layers x {P} f32 parameters, {b} samples per rank, global batch {b * world}, lr {LR:g}"


def worker(rank, world, init_file, results):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method="file://" + init_file, rank=rank, world_size=world, device_id=dev)

    def mul32(x, c):  # (x * c) mod 2^32 for int64 tensors x < 2^32, without overflowing int64
        return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & M32

    def mix32_t(x):
        x = x ^ (x >> 16)
        x = mul32(x, 0x7FEB352D)
        x = x ^ (x >> 15)
        x = mul32(x, 0x846CA68B)
        return x ^ (x >> 16)

    index = torch.arange(P, device=dev, dtype=torch.int64)

    def signed_unit_t(key):
        return (((mix32_t(index ^ mix32(key)) >> 21) - 1024).to(torch.float32)) / 1024.0

    class Layer(torch.autograd.Function):
        @staticmethod
        def forward(ctx, h, w, x, inv_b):
            ctx.save_for_backward(w, x)
            ctx.inv_b = inv_b
            return h.clone()

        @staticmethod
        def backward(ctx, dh):
            w, x = ctx.saved_tensors
            return dh, torch.sub(w, x.sum(0), alpha=ctx.inv_b), None, None

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.ParameterList(
                [torch.nn.Parameter(torch.empty(P, device=dev)) for _ in range(LAYERS)])

        def forward(self, h, xs, inv_b):
            for w, x in zip(self.w, xs):
                h = Layer.apply(h, w, x, inv_b)
            return h.sum()

    def gather(values):
        mine = torch.tensor(values, dtype=torch.float64, device=dev)
        out = torch.empty(world * len(values), dtype=torch.float64, device=dev)
        dist.all_gather_into_tensor(out, mine)
        return out.view(world, len(values)).tolist()

    def append(record):
        if rank == 0:
            with open(results, "a") as f:
                f.write(json.dumps(record) + "\n")

    if rank == 0:
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        print(f"scaling_ddp: {world} rank(s), torch {torch.__version__}, NCCL {nccl}, "
              f"{torch.cuda.get_device_name(dev)}", flush=True)
        append({"kind": "meta", "source": "scaling_ddp", "world": world, "torch": torch.__version__, "nccl": nccl,
                "ddp": f"bucket_cap_mb={BUCKET_CAP_MB}, gradient_as_bucket_view=True, SGD foreach, "
                       f"zero_grad(set_to_none=True)"})

    side = torch.cuda.Stream(device=dev)
    failed = False
    for strong in (True, False):
        b = STRONG_BATCH // world if strong else WEAK_BATCH
        scaling = "strong" if strong else "weak"
        inv_b = 1.0 / b
        xs = [torch.empty(b, P, device=dev) for _ in range(LAYERS)]
        for layer in range(LAYERS):
            for k in range(b):
                xs[layer][k] = signed_unit_t(x_key(layer, rank * b + k))
        w0 = [signed_unit_t(w_key(layer)) for layer in range(LAYERS)]
        h0 = torch.zeros(1, device=dev)

        # The exact reference at sampled weights (and each layer's first and last).
        rng = random.Random(4321 + rank)
        idx = [0, P - 1] + [rng.randrange(P) for _ in range(254)]
        global_batch = b * world
        want = []
        for layer in range(LAYERS):
            row = []
            for i in idx:
                w = signed_unit(w_key(layer), i)
                mean = sum(signed_unit(x_key(layer, s), i) for s in range(global_batch)) / global_batch
                row.append(w - LR * (w - mean))
            want.append(row)

        model = Model()
        with torch.no_grad():
            for w, init in zip(model.w, w0):
                w.copy_(init)
        torch.cuda.synchronize(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            ddp = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[rank], bucket_cap_mb=BUCKET_CAP_MB, gradient_as_bucket_view=True)
        opt = torch.optim.SGD(model.parameters(), lr=LR)

        def reset():
            with torch.no_grad():
                for w, init in zip(model.w, w0):
                    w.copy_(init)

        def eager_step():
            opt.zero_grad(set_to_none=True)
            ddp(h0, xs, inv_b).backward()
            opt.step()

        def check():
            torch.cuda.synchronize(dev)
            for layer in range(LAYERS):
                got = model.w[layer].detach()[torch.tensor(idx, device=dev)].tolist()
                for k, (g, wv) in enumerate(zip(got, want[layer])):
                    if g != wv:
                        return False, f"w{layer}[{idx[k]}] after one step: got {g!r}, want {wv!r} (exact)"
            return True, f"one step equals the exact CPU reference at {len(idx) * LAYERS} sampled weights"

        def fingerprint():
            a = b_ = 0
            weight = (index % 4096) + 1
            for w in model.w:
                bits = w.detach().view(torch.int32).to(torch.int64) & M32
                a += int(bits.sum().item())
                b_ += int(((bits >> 8) * weight).sum().item())
            return f"{a:016x}:{b_:016x}"

        def time_us(stream, per_batch, fn):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            times = []
            for _ in range(BATCHES):
                start.record(stream)
                for _ in range(per_batch):
                    fn()
                end.record(stream)
                end.synchronize()
                times.append(start.elapsed_time(end) * 1000.0 / per_batch)
            return sorted(times)[len(times) // 2]

        def report(variant, us, ok, what, fp):
            nonlocal failed
            rows = gather([us, 1.0 if ok else 0.0])
            all_ok = all(r[1] == 1.0 for r in rows)
            failed |= not all_ok
            worst = max(r[0] for r in rows)
            if rank == 0:
                print(f"dp    {scaling:<7} N={world} {variant:<9} {worst:10.2f} us/step  ranks "
                      f"{[round(r[0], 2) for r in rows]}  {'ok' if all_ok else 'WRONG'}: {what}", flush=True)
            append({"kind": "result", "bench": "dp", "scaling": scaling, "world": world, "variant": variant,
                    "us": worst, "us_ranks": [r[0] for r in rows], "ok": all_ok, "check": what,
                    "config": config_text(b, world), "fingerprint": fp})

        # Eager: one checked step from the initial weights, the warm-up, the timed steps.
        with torch.cuda.stream(side):
            reset()
            eager_step()
            ok, what = check()
            fp = fingerprint()
            for _ in range(WARMUP):
                eager_step()
            us = time_us(side, 20, eager_step)
        torch.cuda.current_stream(dev).wait_stream(side)
        report("ddp", us, ok, what, fp)
        if rank == 0 and strong:
            try:  # DDP's buckets once it has rebuilt them after the first step (a private API)
                print(f"scaling_ddp: DDP buckets (bytes): {ddp._get_ddp_logging_data().get('bucket_sizes')}", flush=True)
            except Exception:
                pass

        # CUDA graph of the whole step, replayed.
        graph = torch.cuda.CUDAGraph()
        try:
            torch.cuda.synchronize(dev)
            opt.zero_grad(set_to_none=True)
            with torch.cuda.graph(graph):
                ddp(h0, xs, inv_b).backward()
                opt.step()
            stream = torch.cuda.current_stream(dev)
            reset()
            graph.replay()
            ok, what = check()
            fp = fingerprint()
            for _ in range(5):
                graph.replay()
            us = time_us(stream, 30, graph.replay)
        except Exception as e:  # reported in the table, not hidden: the other variants still count
            ok, what, fp, us = False, f"capture failed: {type(e).__name__}: {e}".replace("\n", " ")[:300], "", 0.0
        report("ddp_graph", us, ok, what, fp)
        del graph, ddp, opt, model, xs, w0
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()

    dist.destroy_process_group()
    if failed:
        sys.exit(1)


def run(results):
    import torch
    import torch.multiprocessing as mp

    world = min(torch.cuda.device_count(), 8)
    if world < 1 or world & (world - 1):
        print(f"scaling_ddp: {torch.cuda.device_count()} GPUs visible; runs on 1, 2, 4 or 8; skipped")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(world, os.path.join(tmp, "rendezvous"), results), nprocs=world, join=True)
    return 0


# ---- The table, from every line scaling_bench and this script appended.
def table(results, markdown):
    meta, rows = {}, {}
    with open(results) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r["kind"] == "meta":
                meta.setdefault(r["source"], r)
            else:
                rows[(r["bench"], r["scaling"], r["world"], r["variant"])] = r
    bench = meta.get("scaling_bench", {})
    ddp = meta.get("scaling_ddp", {})
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except Exception:
        smi = ""
    date = bench.get("date") or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    print(f"Scaling: {bench.get('gpu', smi or '?')}, driver {bench.get('driver', '?')}, orch's NCCL "
          f"{bench.get('nccl', '?')}, torch {ddp.get('torch', 'n/a')} with NCCL {ddp.get('nccl', 'n/a')}, "
          f"NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE', '?')}, {date}")
    if ddp:
        print(f"DDP: {ddp.get('ddp')}")
    variants = ["orch", "hand", "ddp", "ddp_graph"]
    head = ["workload", "scaling", "GPUs", "orch µs", "hand µs", "DDP µs", "DDP graph µs", "eff orch", "eff hand",
            "eff DDP", "eff DDP graph", "orch/hand", "orch/DDP graph", "checked"]
    lines = []
    problems = []
    for bench_name in ("dp", "halo"):
        for scaling in ("strong", "weak"):
            worlds = sorted({k[2] for k in rows if k[0] == bench_name and k[1] == scaling})
            for n in worlds:
                cells = [bench_name, scaling, str(n)]
                got = {v: rows.get((bench_name, scaling, n, v)) for v in variants}
                base = {v: rows.get((bench_name, scaling, 1, v)) for v in variants}
                for v in variants:
                    r = got[v]
                    cells.append("—" if r is None else (f"{r['us']:.1f}" if r["ok"] else "WRONG"))
                for v in variants:
                    r, r1 = got[v], base[v]
                    if r is None or r1 is None or not r["ok"] or not r1["ok"] or r["us"] <= 0:
                        cells.append("—")
                    else:
                        e = r1["us"] / r["us"] / (n if scaling == "strong" else 1)
                        cells.append(f"{e:.2f}")
                for other in ("hand", "ddp_graph"):
                    o, r = got[other], got["orch"]
                    ok = o is not None and r is not None and o["ok"] and r["ok"] and r["us"] > 0
                    cells.append(f"{o['us'] / r['us']:.2f}" if ok else "—")
                present = [v for v in got if got[v] is not None]
                wrong = [v for v in present if not got[v]["ok"]]
                for v in wrong:
                    problems.append(f"{bench_name} {scaling} N={n} {v}: {got[v]['check']}")
                fps = {got[v]["fingerprint"] for v in present if got[v]["ok"] and got[v].get("fingerprint")}
                configs = {got[v]["config"] for v in present}
                if len(fps) > 1:
                    problems.append(f"{bench_name} {scaling} N={n}: the variants' weights differ: " +
                                    ", ".join(f"{v} {got[v]['fingerprint']}" for v in present))
                if len(configs) > 1:
                    problems.append(f"{bench_name} {scaling} N={n}: the variants ran different problems: {configs}")
                cells.append("all" if not wrong and len(fps) <= 1 and len(configs) == 1 else "NO")
                lines.append(cells)
    configs = {}
    for (bench_name, scaling, n, v), r in sorted(rows.items()):
        configs.setdefault((bench_name, scaling), {})[n] = r["config"]
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("| " + " | ".join("---" if i < 2 else "---:" for i in range(len(head))) + " |")
        for c in lines:
            print("| " + " | ".join(c) + " |")
    else:
        widths = [max(len(h), *(len(c[i]) for c in lines)) if lines else len(h) for i, h in enumerate(head)]
        print("  ".join(h.rjust(w) if i > 1 else h.ljust(w) for i, (h, w) in enumerate(zip(head, widths))))
        for c in lines:
            print("  ".join(x.rjust(w) if i > 1 else x.ljust(w) for i, (x, w) in enumerate(zip(c, widths))))
    print("µs per step, the slowest rank's median; halo: per sweep (20 per launch, each after its exchange). "
          "eff: strong t1 / (N tN), weak t1 / tN, per column. orch/hand = hand µs / orch µs, "
          "orch/DDP graph = DDP graph µs / orch µs (> 1: orch faster).")
    for (bench_name, scaling), by_n in configs.items():
        print(f"  {bench_name} {scaling}: " + "; ".join(f"N={n}: {c}" for n, c in sorted(by_n.items())))
    checks = sorted({r["check"] for r in rows.values() if r["ok"]})
    for c in checks:
        print(f"  checked: {c}")
    if any(k[0] == "dp" for k in rows):
        print("  dp: every variant's weights after one step have the same fingerprint (all 8 Mi weights) "
              "at each size, where the column says 'all'")
    for p in problems:
        print(f"  PROBLEM: {p}")
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--table", action="store_true", help="print the table from RESULTS")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    if a.table:
        return table(a.results, a.markdown)
    return run(a.results)


if __name__ == "__main__":
    sys.exit(main())

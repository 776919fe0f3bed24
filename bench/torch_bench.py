#!/usr/bin/env python3
"""PyTorch's side of bench/launch_bench: a chain of N tiny dependent ops (x.add_(1) on a
one-element int32 tensor, one kernel each, each reading what the previous one wrote), run
eagerly and replayed as a torch.cuda.graph, in microseconds per op (median of repeats, timed
with CUDA events after a warm-up; the result is checked). launch_bench runs this script and
puts its numbers in its table.

    torch_bench.py [N]

Prints "KEY VALUE" lines: torch, eager_us_per_op, graph_us_per_op; or one line "n/a WHY" (and
exits 0) where torch cannot be imported or sees no GPU.
"""
import statistics
import sys


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    reps = 20
    try:
        import torch
    except Exception as e:  # not installed, or a broken install
        print(f"n/a torch is not importable ({type(e).__name__}: {e})")
        return 0
    if not torch.cuda.is_available():
        print("n/a torch sees no CUDA device")
        return 0

    x = torch.zeros(1, dtype=torch.int32, device="cuda")
    stream = torch.cuda.Stream()

    def chain():
        for _ in range(n):
            x.add_(1)

    def median_us_per_op(run):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        run()  # warm-up
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            start.record()
            run()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1000.0 / n)
        return statistics.median(times)

    with torch.cuda.stream(stream):
        x.zero_()
        eager = median_us_per_op(chain)
        torch.cuda.synchronize()
        expected = n * (reps + 1)
        if int(x.item()) != expected:
            print(f"torch eager chain: x = {int(x.item())}, expected {expected}", file=sys.stderr)
            return 1

    # Capture on a side stream after a warm-up there, as torch.cuda.graphs' documentation asks.
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        chain()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        chain()
    x.zero_()
    torch.cuda.synchronize()
    replay = median_us_per_op(graph.replay)
    torch.cuda.synchronize()
    expected = n * (reps + 1)
    if int(x.item()) != expected:
        print(f"torch.cuda.graph chain: x = {int(x.item())}, expected {expected}", file=sys.stderr)
        return 1

    print(f"torch {torch.__version__} (CUDA {torch.version.cuda})")
    print(f"eager_us_per_op {eager:.4f}")
    print(f"graph_us_per_op {replay:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

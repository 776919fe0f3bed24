#!/usr/bin/env python3
"""How long orch-lsp takes to publish fresh diagnostics after a change to a 1,000-statement file
(issue 25: under 50 ms). A benchmark, not a timed test: it prints the numbers and asserts
nothing about them.

  lsp_latency.py ORCH_LSP SOURCE_DIR [--edits N] [--statements N]

Generates a pipeline of N statements in `graph main` (kernel launches, copies, fills and scalar
updates over 100 buffers: a DAG of a thousand nodes), opens it, then makes `--edits` changes,
each replacing one statement in the middle (alternately with an undefined buffer, E0101, and
back), and measures from the didChange leaving the client to the publishDiagnostics of that
version arriving: the whole round trip through the pipe, the debounce, the parse, the check
and the DAG. Twice: with the default debounce (15 ms) and with --debounce-ms 0; the last column
is the server's own time per check (parse, check, index: its --verbose lines).
"""
import argparse
import os
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tools/orch_lsp"))
import lsp_client  # noqa: E402


def pipeline(statements):
    lines = ["pipeline latency", "target sm_90", "param n: u32 = 1 << 16", "param a: f32 = 0.5"]
    lines += [f"buffer b{i}: f32[n]" for i in range(100)]
    lines += ["buffer count: u32",
              'kernel axpy(n: u32, a: f32, x: in f32[], y: inout f32[]) source """',
              'extern "C" __global__ void axpy(unsigned n, float a, const float* x, float* y) {',
              "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }",
              '"""', "graph main {"]
    first = len(lines)
    for s in range(statements):
        i, j = s % 100, (s * 7 + 3) % 100
        kind = s % 4
        if kind == 0:
            lines.append(f"  axpy<<<ceil_div(n, 256), 256>>>(n, a, b{i}, b{j if j != i else (j + 1) % 100})")
        elif kind == 1:
            lines.append(f"  copy b{i} -> b{j if j != i else (j + 1) % 100}")
        elif kind == 2:
            lines.append(f"  fill b{i} = {s % 10}")
        else:
            lines.append("  count += 1")
    lines.append("}")
    return "\n".join(lines) + "\n", first


def measure(server, source_dir, statements, edits, debounce):
    text, first = pipeline(statements)
    env = dict(os.environ, ORCH_TARGETS_DIR=str(pathlib.Path(source_dir) / "targets"))
    args = ["--no-compile-on-save", "--verbose"] + ([] if debounce is None else ["--debounce-ms", str(debounce)])
    client = lsp_client.Client(server, args, env=env)
    client.initialize()
    doc = "file:///latency/latency.orch"
    client.open(doc, text)
    d = client.diagnostics(doc, version=1, timeout=60)["params"]["diagnostics"]
    assert d == [], d
    line = first + statements // 2 + 2  # a fill (statement index 2 mod 4)
    original = text.split("\n")[line]
    assert original.startswith("  fill"), original
    times = []
    for k in range(edits):
        new = "  fill missing = 1" if k % 2 == 0 else original
        version = k + 2
        # The whole line (a character past its end is its end).
        sent = client.change(doc, version, [{"range": {"start": {"line": line, "character": 0},
                                                       "end": {"line": line, "character": 1000}},
                                             "text": new}])
        reply = client.diagnostics(doc, version=version, timeout=60)
        codes = [x["code"] for x in reply["params"]["diagnostics"]]
        assert codes == (["E0101"] if k % 2 == 0 else []), codes
        times.append(1000 * (reply["_received"] - sent))
    client.close()
    # The server's own time per check (parse, check, index), from its --verbose lines.
    checks = [float(line.split(" in ")[-1].split()[0]) for line in client.proc.stderr.read().decode().splitlines()
              if line.startswith("orch-lsp: checked") and "(version 1)" not in line]
    return times, checks


def main():
    p = argparse.ArgumentParser()
    p.add_argument("server")
    p.add_argument("source_dir")
    p.add_argument("--edits", type=int, default=60)
    p.add_argument("--statements", type=int, default=1000)
    a = p.parse_args()
    print(f"orch-lsp: change -> fresh diagnostics, a {a.statements}-statement file, {a.edits} edits")
    print(f"{'debounce':>14} {'median ms':>10} {'p90 ms':>8} {'max ms':>8}   {'check alone: median ms':>22}")
    for debounce, label in [(None, "default (15)"), (0, "0")]:
        t, checks = measure(a.server, a.source_dir, a.statements, a.edits, debounce)
        t = sorted(t)
        p90 = t[min(len(t) - 1, int(0.9 * len(t)))]
        print(f"{label:>14} {statistics.median(t):10.1f} {p90:8.1f} {t[-1]:8.1f}   {statistics.median(checks):22.1f}")
    if hasattr(os, "getloadavg"):
        print("load average during the run: %.2f (1 min)" % os.getloadavg()[0])


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A static reading, no GPU: the SASS that each `orchc --shared-memory-code` mode gives every kernel
source that uses shared memory in examples/ and bench/real_workloads.py, compiled the way orchc
compiles it (lowering/kernel_compiler.cpp):

  whole-program          nvcc -ptx, then ptxas whole program          (nvcc -cubin)
  relocatable            nvcc -ptx -rdc=true, then ptxas -c (nvJitLink) (nvcc -rdc=true, nvlink)
  relocatable-whole-ptx  nvcc -ptx, then ptxas -c (nvJitLink)

Device-runtime units (route) take nvcc's -rdc code in every mode and are listed once. For each
kernel: registers, spill stores/loads and stack (ptxas -v), its shared-memory loads and stores by
width, and for each loop holding 16 FFMAs or more, the cycles one warp takes per trip in a toy
in-order issue model (each instruction issues a cycle after the one before at the earliest and not
before its source registers are ready; LDS 30 cycles, LDG 0 or 250, anything else 5). The model
says which schedule exposes shared-memory latency; only the GPU says what it costs.

  bench/shared_memory_sass.py [--cuobjdump PATH] [--keep DIR]

cuobjdump: --cuobjdump, $CUOBJDUMP, else on PATH or in $CUDA_HOME/bin.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODES = ("whole-program", "relocatable", "relocatable-whole-ptx")
DEVICE_RUNTIME = re.compile(r"\bcuda(GraphLaunch|GraphSetConditional|GetCurrentGraphExec|Malloc|Free|LaunchDevice)\b|<<<")


def units() -> list:
    """(name, code) of every kernel source that declares shared memory."""
    sys.path.insert(0, str(ROOT / "bench"))
    import real_workloads as W  # noqa: E402
    texts = [v for v in vars(W).values() if isinstance(v, str) and 'source """' in v]
    out = []
    for text in texts:
        for m in re.finditer(r'kernel (\w+)\((?:.|\n)*?source """((?:.|\n)*?)"""', text):
            if "__shared__" in m.group(2):
                out.append((f"real_workloads {m.group(1)}", m.group(2)))
    for cu in sorted((ROOT / "examples").rglob("*.cu")):
        code = cu.read_text()
        if "__shared__" in code:
            out.append((str(cu.relative_to(ROOT)), code))
    return out


def run(cmd, cwd) -> str:
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"$ {' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def compile_unit(code: str, mode: str, d: pathlib.Path, nvcc: str, ptxas: str, rdc: bool) -> tuple:
    """(cubin path, ptxas -v text)"""
    (d / "k.cu").write_text(code)
    ptx_rdc = rdc or mode == "relocatable"
    run([nvcc, "-ptx", "-arch=compute_90", "-std=c++17", *(["-rdc=true"] if ptx_rdc else []), "k.cu", "-o", "k.ptx"], d)
    whole = mode == "whole-program" and not rdc
    info = run([ptxas, "-v", "-arch=sm_90", *([] if whole else ["-c"]), "k.ptx", "-o", "k.cubin"], d)
    return d / "k.cubin", info


def resources(info: str) -> dict:
    """Per kernel: registers, spill stores, spill loads, stack bytes (ptxas -v)."""
    out, name = {}, None
    for line in info.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            name = m.group(1)
            out[name] = {"regs": 0, "spill_st": 0, "spill_ld": 0, "stack": 0}
        elif name and (m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)):
            out[name].update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
        elif name and (m := re.search(r"Used (\d+) registers", line)):
            out[name]["regs"] = int(m.group(1))
    return out


def sass(cuobjdump: str, cubin: pathlib.Path) -> dict:
    """Per kernel: [(address, instruction)]"""
    text = run([cuobjdump, "-sass", cubin], cubin.parent)
    out, name = {}, None
    for line in text.splitlines():
        if m := re.match(r"\s*Function : (\S+)", line):
            name = m.group(1)
            out[name] = []
        elif name and (m := re.match(r"\s*/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;", line)):
            out[name].append((int(m.group(1), 16), m.group(2)))
    return out


def regs(s: str) -> list:
    return [int(r) for r in re.findall(r"\bR(\d+)\b", s)]


def trip_cycles(body: list, lds: int = 30, ldg: int = 250, alu: int = 5) -> int:
    """One warp's cycles per trip of `body` (steady state) in the in-order model above."""
    ready, t, per = {}, 0, 0
    for _ in range(3):
        t0 = t
        for ins in body:
            ins = re.sub(r"^@!?U?P\w+\s+", "", ins)
            op = ins.split()[0]
            base = op.split(".")[0]
            args = ins[len(op):]
            if base in ("BRA", "EXIT", "BAR", "NOP"):
                t += 1
                continue
            parts = args.split(",")
            writes = base not in ("ISETP", "FSETP", "STS", "STG", "ST", "RED", "ATOMS", "ATOMG")
            dst = regs(parts[0]) if writes else []
            if dst and (".64" in op or "WIDE" in op):
                dst.append(dst[0] + 1)
            if dst and ".128" in op:
                dst += [dst[0] + 1, dst[0] + 2, dst[0] + 3]
            src = [r for p in (parts[1:] if writes else parts) for r in regs(p)]
            if base in ("LDS", "LDG"):
                addr = args[args.index("["):]
                src = regs(addr) + ([regs(addr)[0] + 1] if ".64]" in addr and regs(addr) else [])
            t = max([t + 1] + [ready.get(r, 0) for r in src])
            for r in dst:
                ready[r] = t + {"LDS": lds, "LDG": ldg}.get(base, alu)
        per = t - t0
    return per


def hot_loops(code: list) -> list:
    """Bodies of backward branches holding at least 16 FFMAs, innermost first."""
    out = []
    for i, (a, ins) in enumerate(code):
        m = re.search(r"BRA 0x([0-9a-f]+)", ins)
        if m and int(m.group(1), 16) < a:
            body = [x for b, x in code if int(m.group(1), 16) <= b <= a]
            if sum(x.startswith("FFMA") for x in body) >= 16:
                out.append(body)
    return sorted(out, key=len)


def shared_ops(code: list) -> str:
    counts: dict = {}
    for _, ins in code:
        op = ins.split()[0] if not ins.startswith("@") else ins.split()[1]
        if op.split(".")[0] in ("LDS", "STS"):
            counts[op] = counts.get(op, 0) + 1
    return " ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuobjdump")
    ap.add_argument("--keep", help="keep the PTX and CUBINs here")
    a = ap.parse_args()
    home = pathlib.Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    nvcc = os.environ.get("ORCH_NVCC") or shutil.which("nvcc") or str(home / "bin" / "nvcc")
    ptxas = str(pathlib.Path(nvcc).parent / "ptxas")
    cuobjdump = a.cuobjdump or os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump") or str(home / "bin" / "cuobjdump")
    if not pathlib.Path(cuobjdump).exists():
        print(f"no cuobjdump at {cuobjdump} (--cuobjdump or $CUOBJDUMP)", file=sys.stderr)
        return 2
    top = pathlib.Path(a.keep) if a.keep else pathlib.Path(tempfile.mkdtemp(prefix="smem_sass_"))
    print("| unit | kernel | mode | registers | spills st/ld, stack | shared ops | hot loop: instr, cycles/trip (LDG 0 / 250) |")
    print("| --- | --- | --- | ---: | --- | --- | --- |")
    for name, code in units():
        rdc = bool(DEVICE_RUNTIME.search(code))
        for mode in (MODES[:1] if rdc else MODES):
            d = top / re.sub(r"\W+", "_", name) / mode
            d.mkdir(parents=True, exist_ok=True)
            cubin, info = compile_unit(code, mode, d, nvcc, ptxas, rdc)
            res, code_of = resources(info), sass(cuobjdump, cubin)
            for k, r in res.items():
                loops = hot_loops(code_of.get(k, []))
                hot = (f"{len(loops[0])}, {trip_cycles(loops[0], ldg=0)} / {trip_cycles(loops[0])}" if loops else "-")
                label = "every mode (device runtime)" if rdc else mode
                print(f"| {name} | {k} | {label} | {r['regs']} | {r['spill_st']}/{r['spill_ld']}, {r['stack']} "
                      f"| {shared_ops(code_of.get(k, []))} | {hot} |")
    if not a.keep:
        shutil.rmtree(top, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

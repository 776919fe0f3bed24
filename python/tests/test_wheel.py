"""The wheel installs into a fresh virtual environment of every Python from 3.10 to 3.13 found
here, offline (--no-index), and works there: import, compile from text, load, describe. The
wheel comes from ORCH_WHEEL (scripts/test builds it); the Pythons from ORCH_TEST_PYTHONS (paths,
separated by ':'), else the pyenv versions 3.10-3.13 and python3."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest

WHEEL = os.environ.get("ORCH_WHEEL", "")


def pythons():
    env = os.environ.get("ORCH_TEST_PYTHONS")
    if env:
        return [p for p in env.split(":") if p]
    found = []
    for minor in (10, 11, 12, 13):
        candidates = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/3.{minor}.*/bin/python3")))
        candidates += [shutil.which(f"python3.{minor}") or ""]
        found += [c for c in candidates[:1] if c]
    return found or [sys.executable]


SCRIPT = r'''
import json, orch, sys
text = """pipeline venv_check
target sm_90
param n: u32 = 64
buffer x: f32[n]
kernel twice(n: u32, x: inout f32[]) source \"\"\"
extern "C" __global__ void twice(unsigned n, float* x) { unsigned i = threadIdx.x; if (i < n) x[i] *= 2; }
\"\"\"
graph main { twice<<<1, 64>>>(n, x) }
"""
p = orch.load(orch.compile(text, cache_dir=""))
print(json.dumps({"python": sys.version.split()[0], "name": p.name, "params": list(p.params),
                  "x": p.buffers["x"].declaration, "file": orch.__file__}))
'''


@pytest.mark.skipif(not WHEEL, reason="no wheel to install (set ORCH_WHEEL; scripts/test builds one)")
@pytest.mark.parametrize("python", pythons())
def test_the_wheel_installs_offline_and_works(python, tmp_path):
    import json

    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, capture_output=True)
    py = str(venv / "bin" / "python")
    run = subprocess.run(
        [py, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", "-q", WHEEL],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("ORCH_LIBRARY_DIR", "PYTHONPATH")}
    run = subprocess.run([py, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout)
    assert out["name"] == "venv_check" and out["params"] == ["n"] and out["x"] == "f32[n]"
    assert out["file"].startswith(str(venv))  # the installed package, not the checkout's

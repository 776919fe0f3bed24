"""Shared fixtures. Paths come from the environment so the tests run against a build tree
(ORCH_LIBRARY_DIR=build/python, PYTHONPATH=python) or an installed wheel alike:
  ORCH_EXAMPLES_DIR  the example pipelines (and errors/ in it); default examples/ in the checkout
  ORCH_ORCHC      the orchc binary, to compare CompileError's text with (tests skip without it)
  ORCH_WHEEL      a built wheel, for the fresh-venv install test
"""

from __future__ import annotations

import os
import re
import pathlib
import shutil

import pytest

# None of the caller's settings that change what orch does reach the tests: a targets folder,
# printed passes, cache folders (the tests pass their own).
for _name in ("ORCH_TARGETS_DIR", "ORCH_PRINT_PASSES", "ORCH_CACHE_DIR", "ORCH_ARTIFACT_CACHE_DIR", "XDG_CACHE_HOME"):
    os.environ.pop(_name, None)

import orch  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def examples_dir() -> pathlib.Path:
    env = os.environ.get("ORCH_EXAMPLES_DIR")
    return pathlib.Path(env) if env else ROOT / "examples"


EXAMPLES = examples_dir()
ERRORS = EXAMPLES / "errors"
EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES.glob("*.orch")) if EXAMPLES.is_dir() else []
# Examples that use NVSHMEM (a symmetric buffer): compiling them needs NVSHMEM (ORCH_NVSHMEM_HOME,
# scripts/fetch-nvshmem), and loading them needs NVSHMEM's host library; the multi-GPU suite runs them.
NVSHMEM_EXAMPLES = {n for n in EXAMPLE_NAMES
                    if re.search(r"^buffer .*\bsymmetric\b", (EXAMPLES / f"{n}.orch").read_text(), re.M)}


@pytest.fixture(scope="session")
def examples() -> pathlib.Path:
    if not EXAMPLES.is_dir():
        pytest.skip(f"no examples at {EXAMPLES} (set ORCH_EXAMPLES_DIR)")
    return EXAMPLES


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> str:
    """One kernel cache for the session (tests compile the same kernels many times)."""
    return str(tmp_path_factory.mktemp("kernel-cache"))


_artifacts: dict = {}


def orchc_options() -> dict:
    """$ORCH_ORCHC_OPTIONS (as the C++ test helpers pass it to orchc) as orch.compile's arguments:
    --no-pdl, --unroll N and --no-memory-plan, the options the GPU suites may run again with."""
    words = os.environ.get("ORCH_ORCHC_OPTIONS", "").split()
    out: dict = {}
    for i, w in enumerate(words):
        if w == "--no-pdl":
            out["pdl"] = False
        elif w == "--unroll" and i + 1 < len(words):
            out["unroll"] = int(words[i + 1])
        elif w.startswith("--unroll="):
            out["unroll"] = int(w.split("=", 1)[1])
        elif w == "--no-memory-plan":
            out["memory_plan"] = False
    return out


@pytest.fixture(scope="session")
def compiled(examples, cache_dir):
    """compiled(name) -> the artifact of example `name`, compiled once per session."""

    def get(name: str) -> bytes:
        if name not in _artifacts:
            _artifacts[name] = orch.compile(EXAMPLES / f"{name}.orch", cache_dir=cache_dir, **orchc_options())
        return _artifacts[name]

    return get


@pytest.fixture(scope="session")
def orchc() -> str:
    for candidate in (os.environ.get("ORCH_ORCHC"), str(ROOT / "build" / "compiler" / "orchc"), shutil.which("orchc")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("no orchc binary (set ORCH_ORCHC)")


def _gpu_unavailable_reason(artifact: bytes) -> str:
    try:
        orch.load(artifact).load_kernels()
    except orch.Error as e:
        return str(e)
    return ""


@pytest.fixture(scope="session")
def gpu(compiled):
    """Skips (visibly, with CUDA's reason) where no GPU can run the sm_90 examples."""
    reason = _gpu_unavailable_reason(compiled("saxpy"))
    if reason:
        pytest.skip(f"no usable GPU: {reason}")
    return True

"""The two shared libraries and their C functions, through ctypes.

``liborch.so`` (the runtime's C API, orch/orch.h) is loaded when ``orch`` is imported: it needs
nothing but the C/C++ runtime and, to run anything, a CUDA driver. ``liborchc.so`` (orchc's C
API, orch/orchc.h) is loaded on the first ``orch.compile`` or ``orch.check``; it needs NVRTC and
nvJitLink from a CUDA toolkit, which are looked for first (see :func:`compiler`).

``ORCH_LIBRARY_DIR`` overrides where the libraries are looked for (a build tree's ``python/``
folder, for development).
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import sys
import threading
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint, c_uint32, c_int32, c_uint64, c_int64, c_float, c_double, c_void_p
from pathlib import Path
from typing import Optional

from ._errors import Error, ErrorCode

_PACKAGE_DIR = Path(__file__).resolve().parent


def library_dir() -> Path:
    env = os.environ.get("ORCH_LIBRARY_DIR")
    return Path(env) if env else _PACKAGE_DIR / "_lib"


def build_info() -> dict:
    """What the libraries were built with (orch_build.json next to them)."""
    try:
        return json.loads((library_dir() / "orch_build.json").read_text())
    except (OSError, ValueError):
        return {}


def targets_dir() -> Optional[Path]:
    """The target profiles shipped in the wheel (orch/targets), if present."""
    d = _PACKAGE_DIR / "targets"
    return d if d.is_dir() else None


class Stats(ctypes.Structure):
    _fields_ = [
        ("nodes_patched_in_place", c_size_t),
        ("patches_refused", c_size_t),
        ("graph_updates", c_size_t),
        ("device_graph_uploads", c_size_t),
        ("segments_rebuilt", c_size_t),
    ]


class CompileOptions(ctypes.Structure):
    _fields_ = [
        ("path", c_char_p),
        ("source", c_char_p),
        ("source_size", c_size_t),
        ("target", c_char_p),
        ("targets_dir", c_char_p),
        ("archs", c_char_p),
        ("cache_dir", c_char_p),
        ("jobs", c_uint),
        ("no_pdl", ctypes.c_int),
        ("unroll", c_uint),
        ("profile", c_char_p),
        ("no_memory_plan", ctypes.c_int),
    ]


def _load_runtime() -> ctypes.CDLL:
    path = library_dir() / "liborch.so"
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise ImportError(f"orch: cannot load the runtime library {path}: {e}") from e
    err = c_void_p  # orch_error*: a handle (an id, never dereferenced here)
    h = c_void_p

    def fn(name, restype, *argtypes):
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = list(argtypes)

    fn("orch_error_code", c_int, err)
    fn("orch_error_message", c_char_p, err)
    fn("orch_error_where", c_char_p, err)
    fn("orch_error_cuda", c_int, err)
    fn("orch_error_destroy", None, err)
    fn("orch_pipeline_load", err, c_char_p, POINTER(h))
    fn("orch_pipeline_load_from_memory", err, c_void_p, c_size_t, POINTER(h))
    fn("orch_pipeline_name", c_char_p, h)
    fn("orch_pipeline_image", c_char_p, h)
    fn("orch_pipeline_device", c_int, h)
    fn("orch_pipeline_destroy", None, h)
    fn("orch_artifact_open", err, c_void_p, c_size_t, POINTER(h))
    fn("orch_artifact_read", err, c_char_p, POINTER(h))
    fn("orch_artifact_name", c_char_p, h)
    fn("orch_artifact_describe", c_char_p, h)
    fn("orch_artifact_check", err, h, h)
    fn("orch_artifact_destroy", None, h)
    fn("orch_bindings_create", h)
    fn("orch_bindings_destroy", None, h)
    fn("orch_bindings_param_u32", err, h, c_char_p, c_uint32)
    fn("orch_bindings_param_i32", err, h, c_char_p, c_int32)
    fn("orch_bindings_param_u64", err, h, c_char_p, c_uint64)
    fn("orch_bindings_param_i64", err, h, c_char_p, c_int64)
    fn("orch_bindings_param_f32", err, h, c_char_p, c_float)
    fn("orch_bindings_param_f64", err, h, c_char_p, c_double)
    fn("orch_bindings_buffer", err, h, c_char_p, c_void_p, c_size_t)
    fn("orch_bindings_allow_overlap", err, h, c_char_p, c_char_p)
    fn("orch_bindings_comm", err, h, c_char_p, c_void_p, c_int, c_int)
    fn("orch_bindings_comm_from_unique_id", err, h, c_char_p, c_char_p, c_int, c_int)
    fn("orch_nccl_unique_id", err, c_char_p)
    fn("orch_instantiate", err, h, h, c_void_p, POINTER(h))
    fn("orch_launch", err, h, c_void_p)
    fn("orch_device_status", err, h)
    fn("orch_clear_device_status", err, h)
    fn("orch_set_param_u32", err, h, c_char_p, c_uint32)
    fn("orch_set_param_i32", err, h, c_char_p, c_int32)
    fn("orch_set_param_u64", err, h, c_char_p, c_uint64)
    fn("orch_set_param_i64", err, h, c_char_p, c_int64)
    fn("orch_set_param_f32", err, h, c_char_p, c_float)
    fn("orch_set_param_f64", err, h, c_char_p, c_double)
    fn("orch_rebind", err, h, c_char_p, c_void_p, c_size_t)
    fn("orch_executable_buffer", c_void_p, h, c_char_p)
    fn("orch_executable_buffer_bytes", c_size_t, h, c_char_p)
    fn("orch_executable_stats", err, h, POINTER(Stats))
    fn("orch_executable_comm", c_void_p, h, c_char_p)
    fn("orch_executable_rank", c_int, h)
    fn("orch_executable_world_size", c_int, h)
    fn("orch_executable_destroy", None, h)
    fn("orch_stream_wait", err, c_void_p, c_void_p)
    fn("orch_memory_info", err, c_void_p, POINTER(c_int), POINTER(c_int))
    return lib


runtime = _load_runtime()


def take_error(handle: Optional[int]) -> Optional[Error]:
    """The Error an ``orch_error*`` holds (destroying the handle), or None for NULL."""
    if not handle:
        return None
    try:
        code = runtime.orch_error_code(handle)
        message = (runtime.orch_error_message(handle) or b"").decode("utf-8", "replace")
        where = (runtime.orch_error_where(handle) or b"").decode("utf-8", "replace")
        cuda = runtime.orch_error_cuda(handle)
    finally:
        runtime.orch_error_destroy(handle)
    try:
        code = ErrorCode(code)
    except ValueError:
        code = ErrorCode.InvalidArgument
    return Error(code, message, where, cuda)


def check(handle: Optional[int]) -> None:
    """Raises the Error an ``orch_error*`` holds; nothing for NULL."""
    e = take_error(handle)
    if e is not None:
        raise e


# ---- the compiler library, loaded on first use ---------------------------------------------

_compiler_lock = threading.Lock()
_compiler: Optional[ctypes.CDLL] = None
_cuda_libs: list = []  # preloaded NVRTC / nvJitLink, kept loaded


def _cuda_library_dirs() -> list:
    """Where NVRTC and nvJitLink may be, in order: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, and
    NVIDIA's pip packages (what torch and CuPy install: nvidia/cu13/lib, nvidia/cuda_nvrtc/lib,
    nvidia/nvjitlink/lib) in every folder on sys.path."""
    dirs = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            dirs += [os.path.join(root, "lib64"), os.path.join(root, "lib"), os.path.join(root, "targets", "x86_64-linux", "lib")]
    dirs += ["/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib"]
    for entry in sys.path:
        for sub in ("nvidia/cu13/lib", "nvidia/cu12/lib", "nvidia/cuda_nvrtc/lib", "nvidia/nvjitlink/lib"):
            dirs.append(os.path.join(entry or ".", sub))
    return dirs


def _preload(soname: str, dirs: list) -> Optional[str]:
    """Loads `soname` globally (so liborchc.so's dependency on it is met): through the dynamic
    loader's own search first, else from the first of `dirs` that holds it. Returns where it was
    found, or None."""
    mode = getattr(os, "RTLD_GLOBAL", 0x100) | getattr(os, "RTLD_NOW", 2)
    try:
        _cuda_libs.append(ctypes.CDLL(soname, mode=mode))
        return soname
    except OSError:
        pass
    for d in dirs:
        path = os.path.join(d, soname)
        if os.path.isfile(path):
            try:
                _cuda_libs.append(ctypes.CDLL(path, mode=mode))
                return path
            except OSError:
                continue
    return None


def compiler() -> ctypes.CDLL:
    """liborchc.so, loaded once. NVRTC and nvJitLink (the sonames the library was linked with)
    are preloaded from the CUDA toolkit or NVIDIA's pip packages; missing ones are an Error
    that says where they were looked for."""
    global _compiler
    with _compiler_lock:
        if _compiler is not None:
            return _compiler
        info = build_info()
        dirs = _cuda_library_dirs()
        missing = []
        found = {}
        for key, default in (("nvrtc", "libnvrtc.so.13"), ("nvjitlink", "libnvJitLink.so.13")):
            soname = info.get(key, default)
            where = _preload(soname, dirs)
            if where is None:
                missing.append(soname)
            else:
                found[key] = where
        if missing:
            raise Error(
                ErrorCode.Io,
                "orch.compile needs the CUDA toolkit's compiler libraries, and "
                + " and ".join(missing)
                + " cannot be found (looked through the dynamic loader, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda and "
                "the nvidia-* pip packages on sys.path). Install the CUDA toolkit "
                f"{info.get('cuda', '13')} (or `pip install nvidia-cuda-nvrtc nvidia-nvjitlink`) and set CUDA_HOME; "
                "loading and running compiled pipelines does not need them.",
            )
        # NVRTC opens its builtins library by soname when it first compiles; load it from the
        # folder NVRTC came from, where the dynamic loader might not look.
        nvrtc_dir = os.path.dirname(found["nvrtc"])
        if nvrtc_dir:
            builtins = info.get("nvrtc_builtins", "")
            candidates = [os.path.join(nvrtc_dir, builtins)] if builtins else []
            candidates += sorted(glob.glob(os.path.join(nvrtc_dir, "libnvrtc-builtins.so.*")))
            for c in candidates:
                if os.path.isfile(c) and ".alt." not in c:
                    try:
                        _cuda_libs.append(ctypes.CDLL(c, mode=getattr(os, "RTLD_GLOBAL", 0x100)))
                        break
                    except OSError:
                        continue
        path = library_dir() / "liborchc.so"
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as e:
            raise Error(ErrorCode.Io, f"cannot load orch's compiler library {path}: {e}") from e
        opts = POINTER(CompileOptions)
        out = POINTER(c_void_p)
        lib.orch_compile.restype = c_int
        lib.orch_compile.argtypes = [opts, out, POINTER(c_size_t), out, out]
        lib.orch_check.restype = c_int
        lib.orch_check.argtypes = [opts, out, out]
        lib.orch_compile_free.restype = None
        lib.orch_compile_free.argtypes = [c_void_p]
        _compiler = lib
        return lib

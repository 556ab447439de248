"""Loading the candidate from the evaluation directory: a Python module, or a CUDA source built
with nvcc into a shared library whose `extern "C"` launcher is called through ctypes.

The library lands in `build/` inside the evaluation directory (the working directory), named by a
hash of the source, flags and architecture: every step process can call the build again and only
the first one compiles, and an edited source can never be served a stale library.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import cast

import torch

from aka.evaluation.wire import BASELINE_SOURCES_DIR
from aka.harness import interpreter_bfloat16
from aka.harness.jit_globals import check_jit_globals

DEFAULT_ARCH = "sm_90"
BASE_FLAGS = ("-O3", "-shared", "-Xcompiler", "-fPIC")

log = logging.getLogger(__name__)


class BuildError(Exception):
    """The candidate's source did not build; the message is the compiler's first error line(s)."""


class ToolMissingError(Exception):
    """A tool the build needs (nvcc) is not on this machine: the step is skipped, not failed."""


BASELINE_MODULE_PREFIX = "_aka_baseline_"
CANDIDATE_MODULE_PREFIX = "_aka_candidate_"  # the candidate's modules outside cwd's top level
_separate_loads: list[int] = []  # the serial of the current separate load; empty: loads are shared


@contextlib.contextmanager
def separate_load(serial: int) -> Iterator[None]:
    """Within: `import_candidate` executes the sources anew under a module name of their own and
    `load_cuda_library` loads a copy of the library file, so a task's `load_candidate` returns a
    second, separately loaded copy of the same code (new Triton JIT functions, new CUDA modules
    at other code addresses; the performance step spreads each side over several of them)."""
    _separate_loads.append(serial)
    try:
        yield
    finally:
        _separate_loads.pop()


def import_candidate(module: str = "kernel", directory: Path | None = None) -> ModuleType:
    """Import `<module>.py` from `directory` (default: the evaluation directory, cwd).

    Sources in cwd import under their own name (cwd goes first on sys.path), those in a folder of
    it (a repository task's package) under `_aka_candidate_<module>` (never shadowing a library
    of that name); the pristine baseline copy (`.aka_baseline/`, or any directory outside cwd)
    under `_aka_baseline_<module>`, so the two never share a module and only the candidate's
    modules get the launch counter. Inside `separate_load(n)` the name gets the suffix
    `__aka_load<n>` and is always executed anew. A module outside cwd itself is imported as
    `<that name>__pkg<folder hash>.<module>`, in a package of its folder (`_folder_package`), so
    its relative imports find its neighbours.
    """
    cwd = Path.cwd().resolve()
    base = (directory or cwd).resolve()
    if not base.is_relative_to(cwd) or base.is_relative_to(cwd / BASELINE_SOURCES_DIR):
        name = f"{BASELINE_MODULE_PREFIX}{module}"
    else:
        name = module if base == cwd else f"{CANDIDATE_MODULE_PREFIX}{module}"
    if base == cwd and str(base) not in sys.path:
        sys.path.insert(0, str(base))
    path = base / f"{module}.py"
    if _separate_loads:
        name = f"{name}__aka_load{_separate_loads[-1]}"
    if base != cwd:  # a folder's module, in a package of that folder: `from ._x import y` resolves there
        folder = hashlib.sha256(os.fsencode(base)).hexdigest()[:8]  # two folders never share one
        name = f"{name}__pkg{folder}.{module}"
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path) and not _separate_loads:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ImportError(f"no candidate source {path.name} in {base}")
    if base != cwd:
        _folder_package(name.rpartition(".")[0], base)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    if interpreted:
        interpreter_bfloat16.install()  # the interpreter's bfloat16 is not the GPU's
        _autotune_untimed()
    try:
        spec.loader.exec_module(loaded)
        if interpreted and "triton" in sys.modules:
            check_jit_globals(loaded)  # what compiled Triton refuses, the interpreter allows
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return loaded


def _folder_package(package: str, base: Path) -> None:
    """Make `package` the package of the folder `base` (named after the module with its prefix
    and load, so a separate load gets its own submodules), its `__init__.py` run where there is
    one: a repository's module may import its neighbours relatively, and an honest candidate
    that did failed "no known parent package" (red team F, session 54)."""
    if package in sys.modules and not _separate_loads:
        return
    init = base / "__init__.py"
    if init.is_file():
        spec = importlib.util.spec_from_file_location(package, init, submodule_search_locations=[str(base)])
    else:
        spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
        spec.submodule_search_locations = [str(base)]
    if spec is None:
        raise ImportError(f"no package for the folder {base}")
    made = importlib.util.module_from_spec(spec)
    sys.modules[package] = made
    try:
        if init.is_file() and spec.loader is not None:
            spec.loader.exec_module(made)
    except BaseException:
        sys.modules.pop(package, None)
        raise


def _untimed(fn: Callable[[], object], quantiles: Sequence[float] | None = None, **_: object) -> object:
    return [0.0] * len(quantiles) if quantiles else 0.0


def _autotune_untimed() -> None:
    """Under Triton's interpreter the autotuner's benchmarker asks for a GPU driver ("0 active
    drivers"), and an honest autotuned kernel failed on the CPU (red team, session 51). Times mean
    nothing there: every config reads 0 untried, and the autotuner keeps its first."""
    try:
        from triton.runtime import autotuner
    except ImportError:
        return
    autotuner.Autotuner.do_bench = property(lambda self: self._do_bench or _untimed)


def candidate_function(module: str, name: str) -> Callable[[Path], Callable[..., object]]:
    """A `load_candidate` for Python sources: the function `name` of `<module>.py` in a directory."""

    def load(directory: Path) -> Callable[..., object]:
        function: object = getattr(import_candidate(module, directory), name, None)
        if not callable(function):
            raise TypeError(f"{module}.py defines no function '{name}'")
        return function

    return load


def cuda_arch() -> str:
    """`AKA_CUDA_ARCH` (e.g. `sm_90`, as the evaluator detected it), else sm_90 for the H100/H200."""
    arch = os.environ.get("AKA_CUDA_ARCH", "").strip() or DEFAULT_ARCH
    return f"sm_{arch}" if arch.isdigit() else arch


def first_error_lines(output: str, limit: int = 2) -> str:
    """The compiler's first `error` lines joined on one line; else its last non-empty line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    picked = errors[:limit] or lines[-1:]
    return " | ".join(picked)[:500] or "no compiler output"


NVCC_SUBDIR = "aka-nvcc"


@functools.cache
def _scratch_build_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix=".aka-build-", dir=Path.cwd()))


def private_build_dir() -> Path:
    """Where nvcc builds go: next to this worker's Triton cache (the step's fresh, unguessable
    folder for the baseline, the evaluation's shared one for the candidate), else a folder this
    process made."""
    cache = os.environ.get("TRITON_CACHE_DIR")
    return Path(cache) / NVCC_SUBDIR if cache else _scratch_build_dir()


def compile_cuda_library(
    source: str | Path, arch: str | None = None, flags: Sequence[str] = (), build_dir: str | Path | None = None
) -> Path:
    """Compile `source` with `nvcc -O3 -shared -Xcompiler -fPIC -arch=ARCH` into `build_dir`
    (default: this process's private build folder).

    Raises `ToolMissingError` without nvcc and `BuildError` when nvcc rejects the source.
    """
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise ToolMissingError("nvcc is not on PATH on this machine, so CUDA sources cannot be built")
    src = Path(source).resolve()
    if not src.is_file():
        raise BuildError(f"CUDA source {src.name} does not exist")
    target_arch = arch or cuda_arch()
    command = [nvcc, *BASE_FLAGS, f"-arch={target_arch}", *flags]
    digest = hashlib.sha256(src.read_bytes() + "\0".join(command).encode()).hexdigest()[:16]
    out_dir = Path(build_dir).resolve() if build_dir is not None else private_build_dir()
    library = out_dir / f"{src.stem}-{target_arch}-{digest}.so"
    if library.is_file():
        return library
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(suffix=".so", dir=out_dir)
    os.close(fd)
    log.info("building %s for %s", src.name, target_arch)
    try:
        done = subprocess.run([*command, "-o", tmp_name, str(src)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise BuildError(f"nvcc failed on {src.name}: {first_error_lines(done.stderr + done.stdout)}")
        os.replace(tmp_name, library)
    finally:
        Path(tmp_name).unlink(missing_ok=True)
    return library


def load_cuda_library(path: str | Path) -> ctypes.CDLL:
    """Load a built library; loading needs no GPU, so the compile step can check the symbols.
    Inside `separate_load(n)`, a copy of the file is loaded (the same path returns the handle
    already loaded)."""
    if _separate_loads and Path(path).is_file():
        source = Path(path)
        copy = source.with_name(f"{source.stem}-load{_separate_loads[-1]}{source.suffix}")
        fd, tmp_name = tempfile.mkstemp(suffix=source.suffix, dir=source.parent)
        os.close(fd)
        shutil.copyfile(source, tmp_name)  # always anew: never a file left there by someone else
        os.replace(tmp_name, copy)
        path = copy
    try:
        return ctypes.CDLL(str(path))
    except OSError as exc:
        raise BuildError(f"cannot load {Path(path).name}: {exc}") from exc


def launcher(library: ctypes.CDLL, name: str) -> Callable[..., int]:
    """The `extern "C"` function `name`, returning a CUDA error code (0 = success)."""
    try:
        function = getattr(library, name)
    except AttributeError:
        raise BuildError(f"the library exports no extern \"C\" function '{name}'") from None
    function.restype = ctypes.c_int
    return cast(Callable[..., int], function)


def _c_arg(value: torch.Tensor | float) -> ctypes.c_void_p | ctypes.c_longlong | ctypes.c_float:
    if isinstance(value, torch.Tensor):
        return ctypes.c_void_p(value.data_ptr())
    if isinstance(value, int):
        return ctypes.c_longlong(value)
    return ctypes.c_float(value)


@dataclass(frozen=True)
class CudaSource:
    """A CUDA-source task's editable file: `build` is the task's compile step (nvcc errors fail
    it, a machine without nvcc skips it) and `launcher(directory, name)` binds the built
    library's `extern "C"` launcher, building it first if needed (cached by source hash)."""

    file: str

    def build(self, directory: Path) -> None:
        compile_cuda_library(directory / self.file)

    def launcher(self, directory: Path, name: str) -> Callable[..., int]:
        return launcher(load_cuda_library(compile_cuda_library(directory / self.file)), name)


def call_launcher(function: Callable[..., int], *args: torch.Tensor | float) -> None:
    """Call a launcher as `f(args..., stream)`: tensors as device pointers, ints as `long long`,
    floats as `float`, then the current torch CUDA stream as `cudaStream_t`.

    A non-zero return is raised as `RuntimeError`, so a bad launch fails the case it belongs to.
    """
    devices = [a.device for a in args if isinstance(a, torch.Tensor)]
    stream = torch.cuda.current_stream(devices[0] if devices else None).cuda_stream
    code = function(*(_c_arg(a) for a in args), ctypes.c_void_p(stream))
    if code != 0:
        raise RuntimeError(f"{getattr(function, '__name__', 'launcher')} returned CUDA error {code}")

"""Compiled Triton's rule on globals, checked under the interpreter (the CPU profile)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from aka.harness.candidates import import_candidate
from aka.harness.jit_globals import non_constexpr_globals

KERNELS = """
import math
import triton
import triton.language as tl

SCALE = 1.4426950408889634
BLOCK = tl.constexpr(128)
DTYPE = tl.float32


@triton.jit
def helper(x):
    return x * 2


@triton.jit
def plain_global(x_ptr, n):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n).to(DTYPE)
    tl.store(x_ptr + offsets, helper(x) * SCALE, mask=offsets < n)


@triton.autotune(configs=[triton.Config({}, num_warps=4)], key=["n"])
@triton.jit
def autotuned_plain_global(x_ptr, n):
    tl.store(x_ptr, SCALE)


@triton.jit
def argument_shadows(x_ptr, SCALE):
    tl.store(x_ptr, SCALE + math.pi)


def host_code(x):
    return x * SCALE
"""


def _load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, name: str) -> ModuleType:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_plain_globals_read_by_kernels_are_found_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _load(tmp_path, monkeypatch, KERNELS, "jit_globals_case")
    assert non_constexpr_globals(module) == [
        "autotuned_plain_global: SCALE",
        "plain_global: SCALE",
    ]


def test_constexpr_globals_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = KERNELS.replace("SCALE = 1.4426950408889634", "SCALE = tl.constexpr(1.4426950408889634)")
    assert non_constexpr_globals(_load(tmp_path, monkeypatch, fixed, "jit_globals_fixed")) == []


def test_the_interpreted_candidate_fails_to_load_as_it_would_fail_to_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kernel.py").write_text(KERNELS)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("kernel", None)
    with pytest.raises(NameError, match="plain_global: SCALE"):
        import_candidate("kernel")
    assert "kernel" not in sys.modules


HONEST_STYLES = """
import triton
import triton.language as tl

BLOCK_SIZE = 256
CONFIGS = [triton.Config({"BLOCK": 128}, num_warps=4)]


def get_autotune_config():
    return CONFIGS


@triton.autotune(configs=get_autotune_config(), key=["n"])
@triton.jit
def tutorial_style(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)


@triton.jit
def default_from_a_global(x_ptr, n, BLOCK: tl.constexpr = BLOCK_SIZE):
    offsets = tl.arange(0, BLOCK)
    for _ in range(min(n, 2)):
        tl.store(x_ptr + offsets, 1.0, mask=offsets < n)
"""


def test_decorators_and_defaults_may_read_plain_globals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """They are Python's, evaluated as the module loads, and compiled Triton takes them: the
    tutorial's `configs=get_autotune_config()` and a default from a global were refused on the
    CPU (red team, session 52)."""
    assert non_constexpr_globals(_load(tmp_path, monkeypatch, HONEST_STYLES, "jit_globals_styles")) == []


HOST_CALLS = """
import sys
import types
import triton
import triton.language as tl

_host = types.ModuleType("host")
_host.work = lambda: None


@triton.jit
def imports_the_host(x_ptr):
    __import__("sys").modules[__name__].work()


@triton.jit
def calls_its_own_module(x_ptr):
    _host.work()


@triton.jit
def climbs_to_builtins(x_ptr):
    tl.__builtins__["print"]("host")


@triton.jit
def reads_sys(x_ptr):
    sys.modules


@triton.jit
def climbs_with_a_string(x_ptr):
    getattr(tl, "__builtins__")


@triton.jit
def climbs_through_triton(x_ptr):
    tl.core.builtins.print(x_ptr)


def work():
    pass
"""


def test_a_kernel_cannot_reach_host_code_under_the_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreter runs a kernel's body as Python at every launch, so a red team's kernels
    computed their outputs on the host through `__import__` and a module of their own (session 52);
    compiled Triton knows neither, or runs such calls once at compile time."""
    module = _load(tmp_path, monkeypatch, HOST_CALLS, "jit_globals_host")
    assert non_constexpr_globals(module) == [
        "calls_its_own_module: _host (module host: its code would run on the host)",
        "climbs_through_triton: tl.core.builtins (module builtins: its code would run on the host)",
        "climbs_to_builtins: __builtins__",
        "climbs_with_a_string: __builtins__",
        "imports_the_host: __import__ (a builtin compiled Triton does not know)",
        "imports_the_host: __name__",
        "reads_sys: sys (module sys: its code would run on the host)",
    ]


def test_a_kernel_that_names_another_module_is_checked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A red team's kernel called a host function from its body and set its function's
    `__module__` to Triton's so that the check passed it over (red team F, session 54)."""
    source = (
        "import triton\nimport triton.language as tl\n\n\ndef _host():\n    return 1\n\n\n"
        "@triton.jit\ndef renamed(x_ptr):\n    _host()\n\n\n"
        'renamed.fn.__module__ = "triton.language.standard"\n'
    )
    module = _load(tmp_path, monkeypatch, source, "renamed_kernels")
    assert non_constexpr_globals(module) == ["renamed: _host"]

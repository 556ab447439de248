"""The worker's report that a side autotunes, which makes its first calls wait for the device alone."""

from __future__ import annotations

import types

import triton
import triton.language as tl

from aka.harness.worker import autotunes


def _module(**values: object) -> types.ModuleType:
    module = types.ModuleType("candidate")
    vars(module).update(values)
    return module


@triton.jit
def _kernel(x_ptr, BLOCK: tl.constexpr):
    pass


class _Says:
    """Any object of the candidate's: its `fn` may raise anything."""

    @property
    def fn(self) -> object:
        raise RuntimeError("not telling")


def test_an_autotuner_is_found_under_stacked_decorators_and_nothing_else_counts() -> None:
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=[])(_kernel)
    assert autotunes([_module(k=tuned)])
    assert autotunes([_module(k=triton.heuristics({"BLOCK": lambda args: 64})(tuned))])
    assert not autotunes([_module(k=_kernel, n=3, said=_Says())])  # a raising `fn` is no autotuner, and no error
    assert not autotunes([])

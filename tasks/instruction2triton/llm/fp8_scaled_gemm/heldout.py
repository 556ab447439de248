"""Held-out cases: hidden from the agent (listed in hidden_files), used to measure generalization."""

from aka.harness import Case


def _case(m: int, n: int, k: int, scaling: str) -> Case:
    return Case.make(m=m, n=n, k=k, scaling=scaling)


CASES = [
    _case(3000, 5120, 5120, "tensor"),
    _case(8192, 2048, 7168, "row"),
    _case(127, 14336, 4096, "row"),
    _case(1024, 18432, 7168, "tensor"),
]
CI_CASES = [_case(7, 48, 64, "tensor"), _case(20, 16, 80, "row")]

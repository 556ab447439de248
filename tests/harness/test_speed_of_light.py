"""Speed-of-light floors: the peak table and which bound wins (each task's declared work is
checked with the rest of its declarations in test_task_suite.py)."""

from __future__ import annotations

import pytest
import torch

from aka.harness import Case, KernelTask
from aka.harness import speed_of_light as sol


def test_peak_matches_the_h100_datasheet() -> None:
    # H100/H200 SXM: 132 SMs; 989 dense bf16 TFLOPS and 1979 fp8 at the 1830 MHz tensor boost clock.
    assert sol.peak_ops_per_ms((9, 0), 132, 1_830_000, 16) == pytest.approx(989.4e9, rel=0.001)
    assert sol.peak_ops_per_ms((9, 0), 132, 1_830_000, 8) == pytest.approx(1978.9e9, rel=0.001)
    # 32-bit work is bounded by the 16-bit rate (nothing computes fp32 products faster).
    assert sol.peak_ops_per_ms((9, 0), 132, 1_830_000, 32) == sol.peak_ops_per_ms((9, 0), 132, 1_830_000, 16)
    # A100: 108 SMs at 1410 MHz, 312 dense bf16 TFLOPS.
    assert sol.peak_ops_per_ms((8, 0), 108, 1_410_000, 16) == pytest.approx(312e9, rel=0.002)


def test_unknown_architecture_has_no_flops_floor() -> None:
    assert sol.peak_ops_per_ms((7, 5), 40, 1_590_000, 16) is None


def _task(min_bytes: int | None, min_flops: int | None, bits: int = 16) -> KernelTask:
    return KernelTask(
        name="t",
        cases=[Case.make(n=1)],
        make_inputs=lambda case, gen, dev: (),
        reference=lambda: None,
        load_candidate=lambda path: lambda: None,
        min_bytes=None if min_bytes is None else lambda case: min_bytes,
        min_flops=None if min_flops is None else lambda case: min_flops,
        flops_operand_bits=bits,
    )


@pytest.fixture
def fake_h100(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sol, "device_bandwidth", lambda device: 4.0e9)  # 4 TB/s in bytes per ms
    monkeypatch.setattr(
        sol, "device_peak_ops_per_ms", lambda device, bits: sol.peak_ops_per_ms((9, 0), 132, 1_980_000, bits)
    )


@pytest.mark.usefixtures("fake_h100")
def test_the_larger_bound_sets_the_floor() -> None:
    device = torch.device("cpu")
    gemm = sol.case_floor(_task(3 * 2 * 4096 * 4096, 2 * 4096**3), Case.make(n=1), device)
    assert gemm is not None and "flops" in gemm.bound
    assert gemm.ms == pytest.approx(2 * 4096**3 / sol.peak_ops_per_ms((9, 0), 132, 1_980_000, 16))
    copy = sol.case_floor(_task(2 * 2**30, 2**20), Case.make(n=1), device)
    assert copy is not None and "bytes" in copy.bound and copy.ms == pytest.approx(2 * 2**30 / 4.0e9)
    fp8 = sol.case_floor(_task(None, 2 * 4096**3, bits=8), Case.make(n=1), device)
    assert fp8 is not None and fp8.ms == pytest.approx(gemm.ms / 2)
    assert sol.case_floor(_task(None, None), Case.make(n=1), device) is None


@pytest.mark.usefixtures("fake_h100")
def test_a_task_without_min_bytes_is_bounded_by_its_outputs() -> None:
    """An imported task declares nothing: any correct kernel still writes its outputs once."""
    device = torch.device("cpu")
    derived = sol.case_floor(_task(None, None), Case.make(n=1), device, output_bytes=2 * 2**30)
    declared = sol.case_floor(_task(2 * 2**30, None), Case.make(n=1), device)
    assert derived is not None and declared is not None and derived.ms == pytest.approx(declared.ms)
    assert "output" in derived.bound and "minimum bytes" in declared.bound
    assert sol.case_floor(_task(None, None), Case.make(n=1), device) is None  # nothing to bound by


def test_bandwidth_is_the_driver_peak_or_a_copy_over_its_efficiency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sol, "copy_bandwidth", lambda device: 4.0e9)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(sol, "dram_peak_from_driver", lambda ordinal: 4.9e9)
    sol.device_bandwidth.cache_clear()
    assert sol.device_bandwidth(torch.device("cuda", 0)) == 4.9e9
    monkeypatch.setattr(sol, "dram_peak_from_driver", lambda ordinal: None)
    sol.device_bandwidth.cache_clear()
    assert sol.device_bandwidth(torch.device("cuda", 0)) == pytest.approx(4.0e9 / sol.COPY_EFFICIENCY)
    sol.device_bandwidth.cache_clear()


def test_floor_rejects_only_below_its_slack() -> None:
    floor = sol.Floor(1.0, "x")
    assert floor.rejects(0.89) and not floor.rejects(0.91) and not floor.rejects(5.0)

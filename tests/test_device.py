from __future__ import annotations

import pytest

from aka.device import DeviceInfo, resolve_target_model, short_model_name
from aka.errors import PreflightError


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H200", "H200"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("AMD Instinct MI300X", "MI300X"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA Quadro XYZ", "Quadro"),
    ],
)
def test_short_model_names(name: str, model: str) -> None:
    assert short_model_name(name) == model


def test_target_model_preflight() -> None:
    h200 = DeviceInfo("cuda", "H200", "NVIDIA H200", "sm_90", 1)
    assert resolve_target_model("auto", h200, "c.yaml") == "H200"
    assert resolve_target_model("h200", h200, "c.yaml") == "H200"
    with pytest.raises(PreflightError, match="c.yaml: field 'target_gpu_model': 'MI300'"):
        resolve_target_model("MI300", h200, "c.yaml")
    cpu = DeviceInfo("cpu", "cpu", "cpu", None, 0)
    assert resolve_target_model("cpu", cpu, "c.yaml") == "cpu"
    with pytest.raises(PreflightError, match="set it to 'cpu' or 'auto'"):
        resolve_target_model("H200", cpu, "c.yaml")

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def test_harness_import_stays_light() -> None:
    """Candidate processes import aka.harness; it must not drag in the platform's dependencies."""
    code = (
        "import sys, aka.harness; print(sorted(m for m in ('pydantic', 'yaml', 'rich', 'typer') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(SRC)}, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_public_api_is_lazy_but_complete() -> None:
    import aka

    assert aka.TaskResult.__name__ == "TaskResult"
    assert callable(aka.register_agent) and callable(aka.register_scorer)
    assert callable(aka.compare_arms) and callable(aka.load_arms) and aka.CompareOptions().alpha == 0.05

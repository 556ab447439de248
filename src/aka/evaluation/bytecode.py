"""Python bytecode for the modules every step process imports, written once by a trusted process.

Step processes run with PYTHONDONTWRITEBYTECODE: candidate code runs in them, and a `.pyc` it
planted would be imported by a later step. Where the installed packages have no bytecode yet
(an image installed with `pip --no-compile`, or a fresh machine whose only torch users are step
processes), every step then compiles torch, triton and the harness from source: on an H200 host
3 s before the step can start. So, once per evaluator process and
before any step starts, a process that runs no candidate code imports those modules with
bytecode writing on, as any first `import torch` would; where the packages are read-only it
writes nothing and nothing changes.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

WARM_MODULES = (
    "torch",
    "triton",
    "triton.language",
    "triton.compiler",
    "triton.testing",
    "aka.harness",
    "aka.harness.runner",
    "aka.harness.checks",
    "aka.harness.perf",
    "aka.harness.worker",
)
WARM_TIMEOUT_S = 600
log = logging.getLogger(__name__)


@functools.cache
def warm_bytecode(src_root: Path, modules: tuple[str, ...] = WARM_MODULES) -> float:
    """Import `modules` once in a child with bytecode writing on; returns its seconds (a
    failure is logged and ignored: the steps then compile from source, as before)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AKA_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(src_root), env.get("PYTHONPATH", "")) if p)
    code = (
        "import importlib\n"
        f"for name in {modules!r}:\n"
        "    try:\n        importlib.import_module(name)\n"
        "    except Exception:\n        pass\n"
    )
    start = time.perf_counter()
    try:
        subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=src_root, capture_output=True, timeout=WARM_TIMEOUT_S, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("could not pre-compile the step processes' bytecode: %s", exc)
    return time.perf_counter() - start

"""`aka import kernelbench`: KernelBench problem files (`Model`, `get_inputs`, `get_init_inputs`;
checked with `ast`) become torch2triton / torch2cuda task folders with reference.py (verbatim),
kernel.py, harness.py and config.yaml (docs/kernelbench-import.md). Each written task's reference
is then probed in a child process (finite, not passed by zeros or a constant) and the verdicts go
to the suite's `import_report.yaml`: a problem that fails is imported, and recorded as such."""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from aka.authoring.kernelbench_harness import (
    CHEATSHEET,
    KERNEL,
    KERNEL_CU,
    KERNEL_PARTS,
    KERNELBENCH_TOLERANCES,
    harness_source,
    instructions,
)
from aka.authoring.reference_probe import PROBE_TIMEOUT_S, ProbeResult, memory_share, probe_in_child
from aka.config.families import FAMILIES as REGISTERED
from aka.errors import AkaError
from aka.results.task_result import write_yaml_atomic

FAMILIES = tuple(f.name for f in REGISTERED.values() if f.importable)  # torch2triton, torch2cuda
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
STEPS = ("compile", "correctness", "performance")


class ImportProblemError(AkaError):
    """No such folder, or an unknown family."""


IMPORT_REPORT = "import_report.yaml"


@dataclass
class ImportResult:
    created: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    probes: dict[str, ProbeResult] = field(default_factory=dict)  # task folder name -> its reference probe
    report: Path | None = None


def snake_case(stem: str) -> str:
    """`19_ReLU` -> `19_relu`, `Conv2d_Add` -> `conv2d_add`; CamelCase is split only without `_`s."""
    text = stem if "_" in stem else re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", stem)
    text = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()
    return re.sub(r"_+", "_", text) or "problem"


def missing_names(source: str) -> list[str]:
    """The required top-level names (class Model, get_inputs, get_init_inputs) a source lacks."""
    defined = {node.name for node in ast.parse(source).body if isinstance(node, ast.ClassDef | ast.FunctionDef)}
    return [name for name in REQUIRED_NAMES if name not in defined]


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the prompt) as readable `|` blocks."""


_BlockDumper.add_representer(
    str,
    lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None),
)


def _config(name: str, family: str, tolerances: Mapping[str, float]) -> dict[str, object]:
    return {
        "task_type": family,
        "source_file_path": ["kernel.py"] + (["kernel.cu"] if family == "torch2cuda" else []),
        "target_kernel_functions": ["kernel"],
        **{f"{step}_command": [f"python3 harness.py {step}"] for step in STEPS},
        **{f"{step}_timeout": timeout for step, timeout in zip(STEPS, (600, 900, 900), strict=True)},
        "baseline": "reference",
        "prompt": {"instructions": instructions(name, family, tolerances), "cheatsheet": CHEATSHEET},
    }


def parse_tolerances(values: Sequence[str]) -> dict[str, float]:
    """`--tolerance 1e-3` (every dtype) or `--tolerance float32=1e-3` over KernelBench's defaults."""
    tolerances = dict(KERNELBENCH_TOLERANCES)
    for value in values:
        dtype, _, number = value.rpartition("=")
        if dtype and dtype not in tolerances:
            raise ImportProblemError(f"--tolerance {value}: the dtype must be one of {', '.join(tolerances)}")
        try:
            tolerance = float(number)
        except ValueError:
            raise ImportProblemError(f"--tolerance {value}: not a number (e.g. 1e-3 or float32=1e-3)") from None
        if not tolerance >= 0:
            raise ImportProblemError(f"--tolerance {value}: must be a number >= 0")
        tolerances.update({dtype: tolerance} if dtype else dict.fromkeys(tolerances, tolerance))
    return tolerances


def write_task(
    problem: Path, task_dir: Path, task_name: str, family: str, tolerances: Mapping[str, float] = KERNELBENCH_TOLERANCES
) -> None:
    """One task folder from one problem file (reference.py is the file, byte for byte)."""
    name = task_dir.name
    task_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(problem, task_dir / "reference.py")
    (task_dir / "harness.py").write_text(harness_source(name, task_name, family, tolerances))
    (task_dir / "kernel.py").write_text(KERNEL.substitute(name=name, family=family, **KERNEL_PARTS[family]))
    if family == "torch2cuda":
        (task_dir / "kernel.cu").write_text(KERNEL_CU)
    (task_dir / "config.yaml").write_text(
        yaml.dump(_config(name, family, tolerances), Dumper=_BlockDumper, sort_keys=False)
    )


def write_import_report(
    path: Path, source: Path, family: str, tolerances: Mapping[str, float], result: ImportResult
) -> None:
    """Per problem: the reference probe's status and checks; problems skipped, with why."""
    counts = {status: sum(p.status == status for p in result.probes.values()) for status in ("PASS", "WARN", "FAIL")}
    write_yaml_atomic(
        path,
        {
            "source": str(source),
            "family": family,
            "tolerances": dict(tolerances),
            "tolerance_source": "KernelBench src/kernelbench/eval.py get_tolerance_for_precision (atol = rtol)",
            "counts": counts,
            "skipped": result.skipped,
            "tasks": {name: probe.to_dict() for name, probe in sorted(result.probes.items())},
        },
    )


def import_kernelbench(
    source: Path,
    family: str,
    out: Path,
    level: int | None = None,
    suite: str | None = None,
    tolerances: Mapping[str, float] = KERNELBENCH_TOLERANCES,
    probe: bool = True,
    probe_timeout_s: float = PROBE_TIMEOUT_S,
    probe_device: str = "cpu",
    probe_jobs: int = 1,
    on_probe: Callable[[str, ProbeResult], None] | None = None,
) -> ImportResult:
    """Write a task per valid problem file of `source` (or `source/level{N}`); report the rest. With
    `probe`, each task's reference is checked (`probe_jobs` at once, on `probe_device`: level 1's
    largest inputs outgrow a small host) and the import report rewritten as each verdict comes."""
    if family not in FAMILIES:
        raise ImportProblemError(f"family must be one of {', '.join(FAMILIES)}, not '{family}'")
    if probe_device != "cpu" and not probe_device.startswith("cuda"):
        raise ImportProblemError(f"probe device must be cpu or cuda[:N], not '{probe_device}'")
    folder = source / f"level{level}" if level is not None and (source / f"level{level}").is_dir() else source
    if not folder.is_dir():
        raise ImportProblemError(f"{folder} is not a folder of KernelBench problem files")
    suite_name = suite or (f"kernelbench_level{level}" if level is not None else "kernelbench")
    result = ImportResult()
    for problem in sorted(folder.glob("*.py")):
        try:
            missing = missing_names(problem.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
            result.skipped.append(f"{problem.name}: not parseable Python ({type(exc).__name__})")
            continue
        if missing:
            result.skipped.append(f"{problem.name}: skipped, it does not define {', '.join(missing)}")
            continue
        name = snake_case(problem.stem)
        task_dir = out / family / suite_name / name
        write_task(problem, task_dir, f"{family}/{suite_name}/{name}", family, tolerances)
        result.created.append(task_dir)
    if probe and result.created:
        result.report = out / family / suite_name / IMPORT_REPORT
        share = memory_share(probe_jobs) if probe_device == "cpu" else None
        with ThreadPoolExecutor(max(probe_jobs, 1)) as pool:  # each probe is a child process
            verdicts = {
                pool.submit(
                    probe_in_child, task_dir, timeout_s=probe_timeout_s, device=probe_device, memory_limit=share
                ): task_dir.name
                for task_dir in result.created
            }
            for done in as_completed(verdicts):
                result.probes[verdicts[done]] = done.result()
                write_import_report(result.report, source, family, tolerances, result)
                if on_probe is not None:
                    on_probe(verdicts[done], result.probes[verdicts[done]])
    return result

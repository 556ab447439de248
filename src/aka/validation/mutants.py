"""Mutants of any task's baseline, made automatically: the baseline's own source with its entry
functions wrapped (`aka.validation.mutant_runtime`), so that each returns a particular kind of
wrong output. A task whose correctness check lets one of them pass accepts a wrong kernel.

The entry functions are found in the source itself: every public top-level function that is not
a Triton kernel (no `jit`/`autotune`/`heuristics` decorator). A helper one of them calls is
wrapped too, but only the outermost call is mutated. Whether a mutation can change an output at
all is decided from the shapes and dtypes of the reference's outputs (the probe's), and a
mutation that cannot is recorded as not applicable with its reason, never as killed.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aka.evaluation.warm_parent import script_argv
from aka.validation.mutant_runtime import MUTATIONS, WHOLE_CALL

DESCRIPTIONS = {
    "zeros": "every output all zeros",
    "ones": "every output all ones",
    "constant": "every output filled with the mean of the true output",
    "input_copy": "the first input (as many elements as the output) returned as the output",
    "perturb_one": "one element (the middle one) moved by 1 + |value|",
    "beyond_tolerance": "every element scaled away from zero by 3x the task's tolerance (at least 2 ulps)",
    "skip_last_block": "the last row (1-D: the last eighth) left at zero",
    "wrong_dtype": "the right values in another dtype (float32 <-> float16, bfloat16 -> float32, int64 -> int32, ...)",
    "transposed": "the values of the transpose of the last two dimensions, in the output's shape",
    "wrong_strides": "the right values in a non-contiguous layout",
    "stale": "the previous call's output (computed from the previous inputs)",
    "off_by_one": "the last element left at zero, as by a mask one short",
    "lower_precision": "inputs and output rounded to a narrower type (float32 -> bfloat16, 16-bit -> 8-bit)",
}
MUTANT_NAMES: tuple[str, ...] = (*MUTATIONS, *WHOLE_CALL)
FLOAT_DTYPES = frozenset({"float64", "float32", "float16", "bfloat16"})
OTHER_DTYPE_KNOWN = FLOAT_DTYPES | {"int64", "int32", "int16", "int8", "uint8", "bool"}
KERNEL_DECORATORS = ("jit", "autotune", "heuristics")
INSTALL = (
    "\n\n# --- aka validate: mutant {name} (generated; the baseline above is unchanged) ---\n"
    "import aka.validation.mutant_runtime as _aka_mutant_runtime  # noqa: E402\n"
    "_aka_mutant_runtime.install(globals(), {entries!r}, {name!r}, {tolerances!r})\n"
)

TASK_INSTALL = (
    "\n\n# --- aka validate: mutant {name} of the candidate's outputs (generated; the harness above is unchanged) ---\n"
    "import aka.validation.mutant_runtime as _aka_mutant_runtime  # noqa: E402\n"
    "{variable} = _aka_mutant_runtime.mutate_task({variable}, {name!r}, {tolerances!r})\n"
)


@dataclass(frozen=True)
class TensorShape:
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count


def _decorator_names(node: ast.expr) -> str:
    return ast.unparse(node)


def entry_functions(source: str) -> list[str]:
    """Public top-level functions of a Python source that are not Triton kernels."""
    tree = ast.parse(source)
    found = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
            continue
        decorators = " ".join(_decorator_names(d) for d in node.decorator_list)
        if not any(word in decorators for word in KERNEL_DECORATORS):
            found.append(node.name)
    return found


def mutant_source(source: str, entries: Sequence[str], name: str, tolerances: dict[str, tuple[float, float]]) -> str:
    return source.rstrip("\n") + INSTALL.format(entries=list(entries), name=name, tolerances=tolerances)


def write_mutant(
    baseline_dir: Path, sources: Sequence[str], dest: Path, name: str, tolerances: dict[str, tuple[float, float]]
) -> list[str]:
    """The mutant's editable files in `dest` (the Python ones wrapped, others copied as they are);
    returns the entry functions wrapped."""
    wrapped: list[str] = []
    for rel in sources:
        text = (baseline_dir / rel).read_text(encoding="utf-8")
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        entries = entry_functions(text) if rel.endswith(".py") else []
        target.write_text(mutant_source(text, entries, name, tolerances) if entries else text, encoding="utf-8")
        wrapped += [f"{rel}:{e}" for e in entries]
    return wrapped


def harness_file(task_dir: Path, correctness_command: str) -> tuple[Path, str] | None:
    """The harness script the correctness command runs, and the module variable holding its
    `KernelTask` (`TASK = KernelTask(...)`); None when the command is not such a script."""
    argv = script_argv(correctness_command)
    if argv is None or not (task_dir / argv[0]).is_file():
        return None
    script = task_dir / argv[0]
    for node in ast.parse(script.read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func).endswith("KernelTask")
        ):
            return script, node.targets[0].id
    return None


def write_mutant_task(
    task_dir: Path, dest: Path, correctness_command: str, name: str, tolerances: dict[str, tuple[float, float]]
) -> Path | None:
    """A copy of the task folder at `dest` whose harness mutates the candidate's outputs (for
    sources with no Python function to wrap); None when the harness declares no `KernelTask`."""
    found = harness_file(task_dir, correctness_command)
    if found is None:
        return None
    script, variable = found
    shutil.copytree(task_dir, dest, ignore=shutil.ignore_patterns("__pycache__"))
    copy = dest / script.relative_to(task_dir)
    text = copy.read_text(encoding="utf-8").rstrip("\n")
    copy.write_text(text + TASK_INSTALL.format(name=name, variable=variable, tolerances=tolerances), encoding="utf-8")
    return dest


def _matrix(t: TensorShape) -> bool:
    return len(t.shape) >= 2 and t.shape[-1] > 1 and t.shape[-2] > 1


def applicable(name: str, outputs: Sequence[TensorShape], inputs: Sequence[TensorShape]) -> str | None:
    """Why mutation `name` cannot change any of these outputs (None: it can)."""
    largest = max((i.numel for i in inputs), default=0)
    rules: dict[str, tuple[Callable[[TensorShape], bool], str]] = {
        "constant": (lambda t: t.numel >= 2, "every output has a single element"),
        "input_copy": (lambda t: largest >= max(t.numel, 2), "no input has as many elements as an output"),
        "beyond_tolerance": (lambda t: t.dtype in FLOAT_DTYPES, "no floating-point output (compared exactly)"),
        "lower_precision": (lambda t: t.dtype in FLOAT_DTYPES, "no floating-point output"),
        "wrong_dtype": (lambda t: t.dtype in OTHER_DTYPE_KNOWN, "no output of a dtype with a stand-in"),
        "transposed": (_matrix, "no output with two dimensions of size > 1"),
        "wrong_strides": (
            lambda t: t.numel >= 2 and (_matrix(t) or (len(t.shape) >= 1 and t.shape[-1] >= 2)),
            "no output with a dimension that can be strided",
        ),
        "skip_last_block": (lambda t: t.numel >= 2, "every output has a single element"),
        "off_by_one": (lambda t: t.numel >= 2, "every output has a single element"),
    }
    if name not in rules:
        return None if outputs else "the reference returned no tensor"
    rule, reason = rules[name]
    return None if any(rule(t) for t in outputs) else reason

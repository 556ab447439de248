"""A small library for task authors: cases, seeded inputs, comparison, timing and the step CLI.

A task's `harness.py` declares a `KernelTask` and ends with `raise SystemExit(run_task(TASK))`;
the step name comes from argv and everything else from the environment described in
docs/result-format.md. The step process is the judge; the candidate's code runs only in worker
processes it starts (docs/evaluation.md). Only the standard library and torch are imported here
(Triton is left to the workers' code), so the processes stay light.
"""

from aka.harness.candidates import (
    BuildError,
    CudaSource,
    ToolMissingError,
    call_launcher,
    candidate_function,
    compile_cuda_library,
    cuda_arch,
    import_candidate,
    launcher,
    load_cuda_library,
)
from aka.harness.cases import (
    Case,
    Distribution,
    Param,
    case_id,
    dtype_name,
    input_distribution,
    make_generator,
    parse_dtype,
    random_tensor,
)
from aka.harness.compare import (
    DEFAULT_TOLERANCES,
    EXACT,
    Comparison,
    Output,
    Tolerance,
    compare_outputs,
    tolerance_for,
)
from aka.harness.paired import PairedConfig, PairedResult, time_paired, trimmed_mean_with_ci
from aka.harness.report import CaseResult, StepResult, describe_exception
from aka.harness.runner import run_step, run_task
from aka.harness.task import NO_GPU_MESSAGE, HarnessError, KernelTask, StepContext
from aka.harness.timing import CPU_METHOD, CUDA_METHOD, Timing, TimingConfig, time_function

__all__ = [
    "CPU_METHOD",
    "CUDA_METHOD",
    "DEFAULT_TOLERANCES",
    "EXACT",
    "NO_GPU_MESSAGE",
    "BuildError",
    "Case",
    "CaseResult",
    "Comparison",
    "Distribution",
    "HarnessError",
    "KernelTask",
    "Output",
    "Param",
    "StepContext",
    "StepResult",
    "Timing",
    "TimingConfig",
    "Tolerance",
    "ToolMissingError",
    "call_launcher",
    "candidate_function",
    "case_id",
    "compare_outputs",
    "compile_cuda_library",
    "CudaSource",
    "cuda_arch",
    "describe_exception",
    "dtype_name",
    "import_candidate",
    "launcher",
    "load_cuda_library",
    "make_generator",
    "parse_dtype",
    "random_tensor",
    "run_step",
    "run_task",
    "time_function",
    "tolerance_for",
    "PairedConfig",
    "PairedResult",
    "trimmed_mean_with_ci",
    "time_paired",
    "input_distribution",
]

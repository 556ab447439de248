"""Task folders in the original AgentKernelArena's formats, written for these tests (none of the
original's code): the layouts of its vllm runners, rocmbench pytest files, instruction tasks,
geak harnesses and schema-v2 adapters, with small pure-Python "kernels" (fast, no torch) or a
real Triton kernel (run by Triton's interpreter on the CPU).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import yaml

MARKER_START = (
    "# >>> AKA-GENERATED: shared CUDA-graph benchmark helpers - edit src/tools/perf/"
    "vllm_cuda_graph_block.py then run `make sync-perf-helpers` >>>"
)
MARKER_END = "# <<< AKA-GENERATED <<<"
HELPER_STUB = 'raise RuntimeError("performance_utils_pytest.py is a generated stub in task sources.")\n'

SCALE_KERNEL = textwrap.dedent('''
    """A pure-Python stand-in for a kernel: out = FACTOR * x."""
    FACTOR = 2.0


    def scale_kernel(xs, out, factor):
        for i, x in enumerate(xs):
            out[i] = x * factor


    def scale(xs):
        out = [0.0] * len(xs)
        scale_kernel(xs, out, FACTOR)
        return out
''')
SCALE_FAST = SCALE_KERNEL.replace(
    """    out = [0.0] * len(xs)
    scale_kernel(xs, out, FACTOR)
    return out""",
    """    return [x * FACTOR for x in xs]""",
)
SCALE_WRONG = SCALE_KERNEL.replace("FACTOR = 2.0", "FACTOR = 3.0")
SCALE_FAILS_WHEN_TIMED = SCALE_KERNEL.replace(
    """def scale(xs):
""",
    """def scale(xs):
    import os
    if os.environ.get("AKA_STEP") == "performance" and len(xs) > 3000:
        raise RuntimeError("too big to time")
""",
)

VLLM_RUNNER = (
    textwrap.dedent('''
    #!/usr/bin/env python3
    """Task runner for triton2triton/toy (the original's vllm runner layout)."""
    import argparse
    import importlib.util
    import json
    import os
    import sys

    TASK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(TASK_DIR)
    SOURCE_FILE = os.path.join(TASK_DIR, "source", "toy_scale.py")
    TEST_SHAPES = [2000, 4000]
    WARMUP_ITERATIONS = 2
    BENCHMARK_ITERATIONS = 30


    MARKER_START
    def _benchmark_cuda_graph_or_events(*args, **kwargs):
        raise RuntimeError("CUDA-graph benchmark helpers were not materialized.")
    MARKER_END

    def load_module():
        spec = importlib.util.spec_from_file_location("toy_kernel", SOURCE_FILE)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


    def inputs(n):
        return [float(i % 7) - 3.0 for i in range(n)]


    def run_compile():
        try:
            mod = load_module()
            assert hasattr(mod, "scale") and hasattr(mod, "scale_kernel"), "Missing scale"
            return True, None
        except Exception as e:
            return False, str(e)


    def run_correctness(*, case_index=None):
        try:
            mod = load_module()
        except Exception as e:
            return False, f"Failed to load module: {e}"
        for i, n in enumerate(TEST_SHAPES):
            if case_index is not None and i != case_index:
                continue
            xs = inputs(n)
            if mod.scale(xs) != [2.0 * x for x in xs]:
                return False, f"Shape {i + 1} (n={n}): mismatch"
        return True, None


    def run_performance():
        try:
            mod = load_module()
        except Exception:
            return []
        cases = []
        for idx, n in enumerate(TEST_SHAPES):
            try:
                xs = inputs(n)

                def _bench_fn():
                    mod.scale(xs)
                ms, meta = _benchmark_cuda_graph_or_events(_bench_fn, warmup=WARMUP_ITERATIONS,
                                                           repetition=BENCHMARK_ITERATIONS)
                cases.append({"test_case_id": f"perf{idx + 1}", "execution_time_ms": ms, **meta, "params": {"n": n}})
            except Exception:
                cases.append({"test_case_id": f"perf{idx + 1}", "execution_time_ms": -1.0, "params": {"n": n}})
        return cases


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("mode", choices=["compile", "correctness", "performance"])
        mode = parser.parse_args().mode
        os.makedirs("build", exist_ok=True)
        if mode == "compile":
            ok, err = run_compile()
            json.dump({"status": "ok" if ok else "fail", "error": err}, open("build/compile_report.json", "w"))
            print(f"Compilation: {'PASS' if ok else 'FAIL'}")
            sys.exit(0 if ok else 1)
        if mode == "correctness":
            ok, err = run_correctness()
            json.dump({"status": "ok" if ok else "fail", "error": err}, open("build/correctness_report.json", "w"))
            print(f"Correctness: {'PASS' if ok else 'FAIL'}")
            sys.exit(0 if ok else 1)
        cases = run_performance()
        json.dump(cases, open("build/performance_report.json", "w"), indent=2)
        print(f"Performance: measured {len(cases)} test case(s), total time: 1.0 ms")  # never read
        sys.exit(0)


    if __name__ == "__main__":
        main()
''')
    .replace("MARKER_START", MARKER_START)
    .replace("MARKER_END", MARKER_END)
)


# A runner that times its calls itself (as 29 of the original's 118 vllm runners do, there with
# CUDA events around each call; here with the CPU's clock) and never calls the perf helpers.
SELF_TIMED_RUNNER = VLLM_RUNNER.replace(
    """            def _bench_fn():
                mod.scale(xs)
            ms, meta = _benchmark_cuda_graph_or_events(_bench_fn, warmup=WARMUP_ITERATIONS,
                                                       repetition=BENCHMARK_ITERATIONS)
            cases.append({"test_case_id": f"perf{idx + 1}", "execution_time_ms": ms, **meta, "params": {"n": n}})""",
    """            import time
            for _ in range(WARMUP_ITERATIONS):
                mod.scale(xs)
            times = []
            for _ in range(BENCHMARK_ITERATIONS):
                started = time.perf_counter()
                mod.scale(xs)
                times.append((time.perf_counter() - started) * 1000.0)
            ms = sum(times) / len(times)
            cases.append({"test_case_id": f"perf{idx + 1}", "execution_time_ms": ms,
                          "benchmark_method": "cuda_event_fallback", "params": {"n": n}})""",
)
assert SELF_TIMED_RUNNER != VLLM_RUNNER


def _write(folder: Path, files: dict[str, str], config: dict[str, object]) -> Path:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return folder


def vllm_task(
    root: Path,
    name: str = "triton2triton/vllm/toy_scale",
    kernel: str = SCALE_KERNEL,
    runner: str = VLLM_RUNNER,
    **fields: object,
) -> Path:
    config: dict[str, object] = {
        "source_file_path": ["source/toy_scale.py"],
        "target_kernel_functions": ["scale_kernel"],
        "compile_command": ["python3 scripts/task_runner.py compile"],
        "correctness_command": ["python3 scripts/task_runner.py correctness"],
        "performance_command": ["python3 scripts/task_runner.py performance"],
        "task_type": "triton2triton",
        "task_result_template": None,
        "prompt": {"source_code": None, "instructions": "Make scale faster.", "cheatsheet": None},
        "kernel_identity": {"logical_operator": "scale"},  # a field aka does not use: a warning
        **fields,
    }
    files = {
        "scripts/task_runner.py": runner,
        "source/toy_scale.py": kernel,
        # committed leftovers of an earlier run, as the original's vllm folders ship them
        "performance_report.json": json.dumps({"execution_time_ms": 1e-6}),
    }
    return _write(root / name, files, config)


ADD_TEST_FILE = textwrap.dedent("""
    ######################################## Imports ########################################
    import os

    import pytest
    ######################################## Imports ########################################


    def add_kernel(x, y, out):
        for i in range(len(x)):
            out[i] = sum((x[i], y[i]))


    def sub_kernel(x, y, out):
        for i in range(len(x)):
            out[i] = x[i] - y[i]

    ##################################################################################################
    from performance_utils_pytest import PytestBenchmarker, do_bench_config, save_all_benchmark_results

    result_gold = {}


    def data(size):
        return [float(i % 5) for i in range(size)], [float(i % 3) for i in range(size)]


    @pytest.mark.parametrize("SIZE", [1000, 3000])
    def test_add(SIZE):
        x, y = data(SIZE)
        out = [0.0] * SIZE
        add_kernel(x, y, out)
        result_gold[f"add_{SIZE}"] = out
        assert out == [a + b for a, b in zip(x, y)]


    @pytest.mark.parametrize("SIZE", [1000])
    def test_sub(SIZE):
        x, y = data(SIZE)
        out = [0.0] * SIZE
        sub_kernel(x, y, out)
        assert out == [a - b for a, b in zip(x, y)]


    @pytest.mark.parametrize("SIZE,dtype_str", [(2000, "float32"), (4000, "float16")])
    def test_performance(SIZE, dtype_str):
        x, y = data(SIZE)
        out = [0.0] * SIZE
        op_lambda = lambda: add_kernel(x, y, out)
        benchmarker = PytestBenchmarker(op_callable=op_lambda, op_name="add_kernel_perf",
                                        config=do_bench_config(warm_up=2, repetition=30))
        benchmarker.run_benchmark(current_params_dict={"SIZE": SIZE, "dtype_str": dtype_str})


    def test_save_results():
        with open(os.path.join(os.path.dirname(__file__), "results_gold.json"), "w") as handle:
            handle.write(repr(sorted(result_gold)))


    def test_save_performance_results():
        save_all_benchmark_results(os.path.join(os.path.dirname(__file__), "perf"))
""")


def rocmbench_task(
    root: Path,
    name: str = "triton2triton/rocmbench/easy/test_toy_add",
    test_file: str = ADD_TEST_FILE,
    **fields: object,
) -> Path:
    stem = Path(name).name
    config: dict[str, object] = {
        "compile_command": [f"python -c \"import ast; ast.parse(open('{stem}.py').read())\""],
        "correctness_command": [
            f'pytest -vv -x --maxfail=1 {stem}.py -k "not test_performance and not test_save_performance_results"'
        ],
        "performance_command": [
            f'pytest -vv -x --maxfail=1 {stem}.py -k "test_performance or test_save_performance_results"'
        ],
        "task_type": name.split("/")[0],
        "task_result_template": None,
        "prompt": {"cheatsheet": None, "instructions": "Optimize add_kernel.", "source_code": None},
        "source_file_path": [f"{stem}.py"],
        "target_kernel_functions": "add_kernel,sub_kernel",  # comma-joined, as three of the original's are
        **fields,
    }
    return _write(root / name, {f"{stem}.py": test_file, "performance_utils_pytest.py": HELPER_STUB}, config)


def instruction_task(root: Path, name: str = "instruction2triton/rocmbench/test_toy_add") -> Path:
    """The original's instruction tasks: `source_file_path: []`, the file named after the folder."""
    return rocmbench_task(root, name, source_file_path=[], task_result_template="task_result_template.yaml")


GEAK_KERNEL = """def _copy_kernel(x, out):
    for i, v in enumerate(x):
        out[i] = v


def copy(x):
    out = [0.0] * len(x)
    _copy_kernel(x, out)
    return out
"""
GEAK_HARNESS = textwrap.dedent("""
    import argparse
    import math
    import time

    from kernel import copy

    SHAPES = [1000, 2000]


    def main():
        parser = argparse.ArgumentParser()
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--correctness", action="store_true")
        group.add_argument("--full-benchmark", action="store_true")
        args = parser.parse_args()
        if args.correctness:
            for n in SHAPES:
                x = [float(i) for i in range(n)]
                if copy(x) != x:
                    print("CORRECTNESS FAILED")
                    raise SystemExit(1)
            print("All correctness checks passed.")
            return
        times = []
        for i, n in enumerate(SHAPES):
            x = [float(i) for i in range(n)]
            start = time.perf_counter()
            for _ in range(5):
                copy(x)
            times.append((time.perf_counter() - start) * 1000 / 5)
            print(f"  [{i}] n={n}  {times[-1]:.4f}ms")
        print("GEAK_RESULT_LATENCY_MS={:.4f}".format(math.exp(sum(math.log(t) for t in times) / len(times))))


    if __name__ == "__main__":
        main()
""")


def geak_task(root: Path, name: str = "triton2triton/geak_eval/L1/toy_copy") -> Path:
    config: dict[str, object] = {
        "task_type": "triton2triton",
        "source_file_path": ["kernel.py"],
        "harness_path": "test_kernel_harness.py",
        "compile_command": ["python3 -c \"import ast; ast.parse(open('kernel.py').read())\""],
        "correctness_command": ["python3 test_kernel_harness.py --correctness"],
        "performance_command": ["python3 test_kernel_harness.py --full-benchmark"],
        "target_kernel_functions": ["_copy_kernel"],
        "prompt": {"instructions": "Optimize the copy kernel."},
    }
    return _write(root / name, {"kernel.py": GEAK_KERNEL, "test_kernel_harness.py": GEAK_HARNESS}, config)


ARENA_EVAL = textwrap.dedent('''
    """A schema-v2 adapter in the original's layout over scripts/task_runner.py (written for aka's tests)."""
    import copy
    import importlib.util
    import json
    import math
    import os
    import sys
    from pathlib import Path

    ROOT = Path(__file__).resolve().parent


    def load_runner():
        spec = importlib.util.spec_from_file_location("_task_harness", ROOT / "scripts/task_runner.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


    def evaluate(role, action):
        data = json.loads((ROOT / "workloads.json").read_text())
        cases = [copy.deepcopy(r) for r in data["cases"] if action == "validate-task" or action in r["checks"]]
        cases = [] if action == "compile" else cases
        result = {"protocol": "arena-eval-v1", "role": role, "action": action, "status": "PASS", "cases": cases}
        try:
            runner = load_runner()
            if action == "validate-task":
                result["metadata"] = {"candidate_state": "implemented"}
            elif action == "compile":
                ok, error = runner.run_compile()
                if not ok:
                    raise RuntimeError(error)
            elif action == "correctness":
                for row in cases:
                    ok, error = runner.run_correctness(case_index=row["params"]["case_index"])
                    if not ok:
                        row.update(status="FAIL", reason=error, failure_kind="correctness_failure")
            else:
                rows = {r["test_case_id"]: r for r in runner.run_performance()}
                for row in cases:
                    record = rows.get(row["test_case_id"], {})
                    ms = record.get("execution_time_ms")
                    if not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms <= 0:
                        row.update(status="FAIL", reason="Invalid or failed measurement",
                                   failure_kind="measurement_failure")
                    else:
                        row.update(execution_time_ms=ms, benchmark_method=record.get("benchmark_method"),
                                   metadata={"harness_measurement": record})
            if any(r["status"] != "PASS" for r in cases):
                result.update(status="FAIL", reason="declared cases failed", failure_kind="case_failure")
        except BaseException as exc:
            result.update(status="FAIL", reason=f"{type(exc).__name__}: {exc}", failure_kind="execution_failure")
        return result


    def main():
        os.chdir(ROOT)
        args = sys.argv[1:]
        role, action = ("task", "validate-task") if args == ["validate-task"] else tuple(args)
        result = evaluate(role, action)
        print("ARENA_EVAL_RESULT=" + json.dumps(result, allow_nan=False, separators=(",", ":")))
        return 0 if result["status"] == "PASS" else 1


    if __name__ == "__main__":
        raise SystemExit(main())
''')


def workloads(extra_case: bool = False) -> dict[str, object]:
    cases = [
        {
            "test_case_id": f"perf{i + 1}",
            "dtype": "float32",
            "params": {"case_index": i, "configuration": [n], "configuration_names": "(n,)"},
            "checks": ["correctness", "performance"],
            "status": "PASS",
        }
        for i, n in enumerate([2000, 4000])
    ]
    if extra_case:
        cases.append(
            {
                "test_case_id": "perf3",
                "dtype": "float32",
                "params": {"case_index": 2},
                "checks": ["correctness", "performance"],
                "status": "PASS",
            }
        )
    return {"version": 1, "case_table": "TEST_SHAPES", "input_table": [[2000], [4000]], "cases": cases}


def v2_task(
    root: Path,
    name: str = "triton2triton/vllm/toy_scale_v2",
    kernel: str = SCALE_KERNEL,
    extra_case: bool = False,
    **fields: object,
) -> Path:
    config: dict[str, object] = {
        "schema_version": 2,
        "description": "Optimize toy_scale with the original operator contract.",
        "candidate": {
            "language": "triton",
            "initial_state": "implemented",
            "editable": [
                {
                    "path": "source/toy_scale.py",
                    "scope": "symbols",
                    "symbols": ["scale_kernel", "scale"],
                    "allow_new_helpers": True,
                }
            ],
            "entrypoints": [{"file": "source/toy_scale.py", "kind": "function", "symbol": "scale_kernel"}],
        },
        "baseline": {"kind": "initial_candidate", "language": "triton"},
        "evaluation": {"runner": ["python3", "_arena_eval.py"], "workloads": "workloads.json"},
        **fields,
    }
    files = {
        "scripts/task_runner.py": VLLM_RUNNER,
        "source/toy_scale.py": kernel,
        "_arena_eval.py": ARENA_EVAL,
        "workloads.json": json.dumps(workloads(extra_case), indent=2),
    }
    return _write(root / name, files, config)


TRITON_ADD_TEST_FILE = textwrap.dedent("""
    import os

    import pytest
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
        pid = tl.program_id(axis=0)
        offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n
        total = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, total, mask=mask)

    ##################################################################################################
    from performance_utils_pytest import PytestBenchmarker, do_bench_config, save_all_benchmark_results

    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


    def launch(x, y, out):
        add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK_SIZE=256)


    @pytest.mark.parametrize("SIZE", [1000])
    def test_add(SIZE):
        x, y = torch.randn(SIZE, device=DEVICE), torch.randn(SIZE, device=DEVICE)
        out = torch.empty_like(x)
        launch(x, y, out)
        torch.testing.assert_close(out, x + y)


    @pytest.mark.parametrize("SIZE", [1000])
    def test_performance(SIZE):
        x, y = torch.randn(SIZE, device=DEVICE), torch.randn(SIZE, device=DEVICE)
        out = torch.empty_like(x)
        op_lambda = lambda: launch(x, y, out)
        PytestBenchmarker(op_callable=op_lambda, op_name="add", config=do_bench_config(warm_up=1, repetition=4)
                          ).run_benchmark(current_params_dict={"SIZE": SIZE})


    def test_save_performance_results():
        save_all_benchmark_results(os.path.join(os.path.dirname(__file__), "perf"))
""")


def triton_rocmbench_task(root: Path, name: str = "triton2triton/rocmbench/easy/test_triton_add") -> Path:
    """A real Triton kernel in the rocmbench layout (the interpreter runs it on the CPU)."""
    task = rocmbench_task(root, name, TRITON_ADD_TEST_FILE, target_kernel_functions=["add_kernel"])
    return task

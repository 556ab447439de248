from __future__ import annotations

import os
import time
from pathlib import Path

from aka.process import TAIL_CHARS, StartedCommand, last_meaningful_line, run_command


def test_exit_code_and_output_tail(tmp_path: Path) -> None:
    out = run_command("echo hello; echo oops >&2; exit 3", tmp_path, dict(os.environ), 10, tmp_path / "log")
    assert out.exit_code == 3 and not out.timed_out and not out.ok
    assert "hello" in out.output_tail and "oops" in out.output_tail
    assert "exited with status 3: oops" in out.describe()


def test_a_crash_is_described_by_its_exception_not_the_hints_printed_after_it() -> None:
    torch_error = (
        'Traceback (most recent call last):\n  File "harness.py", line 3, in <module>\n'
        "torch.AcceleratorError: CUDA error: out of memory\n"
        "CUDA kernel errors might be asynchronously reported at some other API call.\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\n"
    )
    assert last_meaningful_line(torch_error) == "torch.AcceleratorError: CUDA error: out of memory"
    error = "aka.harness.cuda_driver.CudaOutOfMemoryError: cuMemCreate failed"
    assert last_meaningful_line(f"{error}\n--- the worker printed:\nhi\n--- end\n") == error
    assert last_meaningful_line("NameError('x is not defined')\n") == "NameError('x is not defined')"
    assert last_meaningful_line("kernel.cu(3): error: identifier y is undefined\n") == (
        "kernel.cu(3): error: identifier y is undefined"
    )
    assert last_meaningful_line("\n \n") == ""


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    marker = tmp_path / "child_alive"
    command = f"(sleep 3; touch {marker}) & sleep 60"
    start = time.monotonic()
    out = run_command(command, tmp_path, dict(os.environ), 1, tmp_path / "log")
    assert out.timed_out and out.exit_code is None
    assert time.monotonic() - start < 10
    time.sleep(3.5)
    assert not marker.exists(), "a background child survived the timeout"
    assert "timed out" in out.describe()


def test_leftover_children_are_killed_after_exit(tmp_path: Path) -> None:
    marker = tmp_path / "orphan"
    out = run_command(f"(sleep 2; touch {marker}) & exit 0", tmp_path, dict(os.environ), 10, tmp_path / "log")
    assert out.ok
    time.sleep(2.5)
    assert not marker.exists()


def test_signal_death_is_described(tmp_path: Path) -> None:
    out = run_command("kill -9 $$", tmp_path, dict(os.environ), 10, tmp_path / "log")
    assert out.exit_code == -9
    assert "killed by signal 9" in out.describe()


def test_argv_and_large_stdin(tmp_path: Path) -> None:
    prompt = ("x" * 1000 + "\n") * 300  # larger than a pipe buffer
    out = run_command(
        ["/bin/sh", "-c", "wc -c"], tmp_path, dict(os.environ), 10, tmp_path / "log", stdin=prompt.encode()
    )
    assert out.ok and out.output_tail.strip().endswith(str(len(prompt)))
    assert out.command == "/bin/sh -c 'wc -c'"


def test_stdin_is_closed_by_default(tmp_path: Path) -> None:
    out = run_command("cat; echo done", tmp_path, dict(os.environ), 5, tmp_path / "log")
    assert out.ok and "done" in out.output_tail


def test_only_the_end_of_a_huge_output_is_read_back(tmp_path: Path) -> None:
    out = run_command(
        "head -c 50000000 /dev/zero | tr '\\0' a; echo; echo THE-END",
        tmp_path,
        dict(os.environ),
        60,
        tmp_path / "log.txt",
    )
    assert out.exit_code == 0 and out.output_tail.rstrip().endswith("THE-END") and len(out.output_tail) <= TAIL_CHARS


def test_a_command_that_prints_past_its_output_limit_is_killed(tmp_path: Path) -> None:
    flood = "while :; do head -c 1000000 /dev/zero | tr '\\0' x; done; echo never"
    started = StartedCommand(flood, tmp_path, dict(os.environ), tmp_path / "log.txt", with_stdin=False)
    out = started.finish(None, 60, output_limit=2**20)
    assert out.flooded == 2**20 and not out.ok and out.exit_code is None and out.seconds < 10
    assert "printed more than 1 MiB (the output limit)" in out.describe()
    assert (tmp_path / "log.txt").stat().st_size < 2**29, "killed within a check, not left to fill the disk"

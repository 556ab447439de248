"""Candidate files from model completions: named blocks, unnamed single-file answers, clear errors."""

from __future__ import annotations

import pytest

from aka.rl.extract import CandidateError, CompletionError, extract_files

ONE = ["kernel.py"]
TWO = ["kernel.py", "csrc/ops.cu"]


def test_info_string_names_the_file() -> None:
    for info in ("python kernel.py", "kernel.py", 'python title="kernel.py"', "python:kernel.py", "py {kernel.py}"):
        assert extract_files(f"Here you go\n```{info}\nX = 1\n```\n", ONE) == {"kernel.py": "X = 1\n"}, info


def test_line_above_or_first_comment_names_the_file() -> None:
    completion = (
        "**File: kernel.py**\n```python\nA = 1\n```\n"
        "Then the CUDA part, `csrc/ops.cu`:\n```cuda\n__global__ void k() {}\n```\n"
    )
    assert extract_files(completion, TWO) == {"kernel.py": "A = 1\n", "csrc/ops.cu": "__global__ void k() {}\n"}
    assert extract_files("```cuda\n// file: ops.cu\nint x;\n```", TWO) == {"csrc/ops.cu": "// file: ops.cu\nint x;\n"}


def test_a_quoted_task_file_above_a_block_is_only_a_quote() -> None:
    completion = "The check in `harness.py`:\n```python\nassert ok\n```\nMy kernel:\n```python kernel.py\nV = 3\n```"
    assert extract_files(completion, ONE) == {"kernel.py": "V = 3\n"}


def test_single_editable_file_takes_the_last_fitting_unnamed_block() -> None:
    completion = "Draft:\n```python\nV = 1\n```\nRun it with\n```bash\npython3 harness.py\n```\nFinal:\n```\nV = 2\n```"
    assert extract_files(completion, ONE) == {"kernel.py": "V = 2\n"}


def test_last_named_block_wins_and_reasoning_is_ignored() -> None:
    completion = (
        "<think>maybe\n```python kernel.py\nBAD = 1\n```\n</think>\n"
        "```python kernel.py\nV = 1\n```\n```python kernel.py\nV = 2\n```"
    )
    assert extract_files(completion, ONE) == {"kernel.py": "V = 2\n"}


def test_longer_fences_hold_shorter_ones() -> None:
    completion = "````python kernel.py\nDOC = '''\n```\n'''\n````"
    assert extract_files(completion, ONE) == {"kernel.py": "DOC = '''\n```\n'''\n"}


@pytest.mark.parametrize(
    ("completion", "editable", "message"),
    [
        ("", ONE, "is empty"),
        ("   \n", ONE, "is empty"),
        ("I would make it faster.", ONE, "no fenced code block"),
        ("```python kernel.py\nX = 1\n", ONE, "never closed"),
        ("```python harness.py\nX = 1\n```", ONE, "'harness.py', which is not an editable file (editable: kernel.py)"),
        ("```python\nX = 1\n```", TWO, "no code block of the completion names an editable file"),
        ("```bash\nls\n```", ONE, "no code block"),
    ],
)
def test_errors_are_one_line(completion: str, editable: list[str], message: str) -> None:
    with pytest.raises(CompletionError) as caught:
        extract_files(completion, editable, "triton2triton/basic/gelu")
    text = str(caught.value)
    assert message in text and "\n" not in text and text.startswith("triton2triton/basic/gelu: ")
    assert isinstance(caught.value, CandidateError)


def test_a_long_first_line_is_no_file_name_and_costs_no_backtracking() -> None:
    """The first-comment pattern backtracks in the square of a line's length: a red team's `#a`,
    50,000 spaces and `x` held the reward server's event loop 9.7 s. A comment that names a file
    is short; a long one names nothing, and the block is taken as unnamed."""
    import time

    body = "#a" + " " * 200_000 + "x\nV = 1\n"
    started = time.monotonic()
    assert extract_files(f"```python\n{body}```", ONE) == {"kernel.py": body}
    assert time.monotonic() - started < 5.0  # the pattern alone: hours on this line


def test_only_markdowns_line_endings_end_a_line() -> None:
    """`str.splitlines` also breaks at U+0085, U+2028, form feed...: a fence hidden in a comment
    with them closed the visible block and opened another, so the judge ran code that Markdown
    and Python readers of the completion never see (red team G, session 54)."""
    hidden = "\x85```\x85```python kernel.py\x85def kernel(x):\x85    return x * 0"
    completion = f"```python kernel.py\ndef kernel(x):\n    return x * 2  # end{hidden}\n```\n"
    files = extract_files(completion, ["kernel.py"])
    assert files["kernel.py"].startswith("def kernel(x):\n    return x * 2  # end\x85")
    crlf = "```python kernel.py\r\nA = 1\r\n```\r\n"
    assert extract_files(crlf, ["kernel.py"]) == extract_files(crlf.replace("\r\n", "\n"), ["kernel.py"])


def test_a_long_fence_over_many_lines_is_read_in_one_pass() -> None:
    """The closing fence was rebuilt for every line: a 2 MB fence over a million empty lines held
    the reward server's event loop 24 s (red team G). Read once a block, it costs a line its
    length; the bound here is generous, a regression would take tens of seconds."""
    import time

    completion = "`" * 2_000_000 + "\n" * 1_000_000
    started = time.perf_counter()
    with pytest.raises(CompletionError):
        extract_files(completion, ["kernel.py"])
    assert time.perf_counter() - started < 5.0

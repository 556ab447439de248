"""Run `python3 SCRIPT.py ARGS...` (or `pytest ARGS...`) once its turn on the device comes, with
torch already imported.

The original's step commands are not gated the way our harness's steps are (they load, then wait
for their token), so the evaluator used to start them only inside their turn: every timed turn
then began with Python starting and importing torch (2-3 s on the H200's host), while every other
evaluation's timed step waited. The evaluator starts such a command as
`python3 .../gate.py SCRIPT.py ARGS...` before the turn instead. This imports torch and Triton
(neither touches the GPU on import), reads the one-line token that the evaluator writes to
standard input when the turn comes, and only then runs the script as `__main__`, as
`python3 SCRIPT.py ARGS...` would: the same `sys.argv`, the script's directory first on
`sys.path`, an absolute `__file__`. No code of the task runs before its turn.

`gate.py --pytest ARGS...` stands for `pytest ARGS...`: at the turn, the `pytest` that `PATH`
finds runs the same way as a script, if it is a Python script for this interpreter; any other
`pytest` is exec'd as the command would have run it.

Run as a file, not a module: this folder, `sys.path[0]` while the imports run, holds nothing
else. Standard library only.
"""

import os
import shutil
import sys
import types
from importlib.machinery import SourceFileLoader

NO_TURN_EXIT = 125  # standard input closed before the token came: the evaluator gave up the step


def _wait_for_turn() -> bool:
    """Block until the token's line arrives on standard input (True), or it closes (False)."""
    while True:
        chunk = os.read(0, 1)
        if not chunk:
            return False
        if chunk == b"\n":
            return True


def _our_python_script(path: str) -> bool:
    """Is `path` a script whose `#!` line names this interpreter, from the same folder (a virtual
    environment's python is a link to the system's, with other packages)?"""
    try:
        with open(path, "rb") as script:
            first = script.readline(4096)
    except OSError:
        return False
    words = first[2:].decode(errors="replace").split() if first.startswith(b"#!") else []
    if not words:
        return False
    named, ours = os.path.abspath(words[0]), os.path.abspath(sys.executable)
    return os.path.dirname(named) == os.path.dirname(ours) and os.path.realpath(named) == os.path.realpath(ours)


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: gate.py SCRIPT.py [ARGS...] | gate.py --pytest [ARGS...]")
    pytest_form = sys.argv[1] == "--pytest"
    for name in ("torch", "triton", *(["pytest"] if pytest_form else [])):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001, S110 - not installed or broken: the command meets it itself
            pass
    if not _wait_for_turn():
        sys.exit(NO_TURN_EXIT)
    if pytest_form:
        found = shutil.which("pytest")
        if found is None:
            sys.stderr.write("pytest: command not found\n")
            sys.exit(127)  # as bash says it
        if not _our_python_script(found):
            os.execv(found, [found, *sys.argv[2:]])  # noqa: S606 - as the command would have run it
        sys.argv = [found, *sys.argv[2:]]
    else:
        sys.argv = sys.argv[1:]
    path = os.path.abspath(sys.argv[0])
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # this folder, not the script's
    if not getattr(sys.flags, "safe_path", False):  # PYTHONSAFEPATH: python3 SCRIPT.py adds no folder either
        sys.path.insert(0, os.path.dirname(path))
    module = types.ModuleType("__main__")  # a fresh one: the script sees none of the gate's names
    module.__file__ = path
    module.__dict__["__cached__"] = None
    module.__loader__ = SourceFileLoader("__main__", path)
    sys.modules["__main__"] = module
    with open(path, "rb") as source:
        code = compile(source.read(), path, "exec")
    exec(code, module.__dict__)  # noqa: S102 - the task's own script, in its turn


if __name__ == "__main__":
    main()

"""Run `python3 SCRIPT.py ARGS...` once its turn on the device comes, with torch already imported.

The original's step commands are not gated the way our harness's steps are (they load, then wait
for their token), so the evaluator used to start them only inside their turn: every timed turn
then began with Python starting and importing torch (2-3 s on the H200's host), while every other
evaluation's timed step waited. The evaluator starts such a command as
`python3 .../gate.py SCRIPT.py ARGS...` before the turn instead. This imports torch and Triton
(neither touches the GPU on import), reads the one-line token that the evaluator writes to
standard input when the turn comes, and only then runs the script as `__main__`, as
`python3 SCRIPT.py ARGS...` would: the same `sys.argv`, the script's directory first on
`sys.path`, an absolute `__file__`. No code of the task runs before its turn.

Run as a file, not a module: this folder, `sys.path[0]` while the imports run, holds nothing
else. Standard library only.
"""

import os
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


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: gate.py SCRIPT.py [ARGS...]")
    script = sys.argv[1]
    for name in ("torch", "triton"):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001, S110 - not installed or broken: the script meets it itself
            pass
    if not _wait_for_turn():
        sys.exit(NO_TURN_EXIT)
    path = os.path.abspath(script)
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(path)
    main = types.ModuleType("__main__")  # a fresh one: the script sees none of the gate's names
    main.__file__ = path
    main.__dict__["__cached__"] = None
    main.__loader__ = SourceFileLoader("__main__", path)
    sys.modules["__main__"] = main
    with open(path, "rb") as source:
        code = compile(source.read(), path, "exec")
    exec(code, main.__dict__)  # noqa: S102 - the task's own script, in its turn


if __name__ == "__main__":
    main()

"""The CLI's consoles: rich output that wraps only for a terminal.

Rich fits its output to 80 columns when it is not writing to a terminal (a pipe, a file, CI's log),
which breaks a printed path in two and cuts the task names people paste back as selectors. Written
anywhere but a terminal, a line here is as long as it needs to be (unless COLUMNS says otherwise).
"""

from __future__ import annotations

from rich.console import Console, ConsoleDimensions

UNWRAPPED_WIDTH = 4096


class CliConsole(Console):
    """A rich console whose width is the terminal's, or unbounded when it writes elsewhere."""

    @property
    def size(self) -> ConsoleDimensions:
        measured = super().size
        if self._width is None and not self.is_terminal:  # COLUMNS, when set, is in _width already
            return ConsoleDimensions(UNWRAPPED_WIDTH, measured.height)
        return measured

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


def cli_console(stderr: bool = False) -> CliConsole:
    return CliConsole(stderr=stderr)

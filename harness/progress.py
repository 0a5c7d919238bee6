"""Progress for people: a live status line on a terminal, plain lines in CI logs. Plain output is one
line per result (an image built, a cell's outcome); the steps in between (each phase of each rank, each
build or debootstrap line) show only when verbose (`-v`): they are in the logs anyway. Lines quote what
ranks, builds and images said, so every text goes through escape.terminal (no control sequence of
theirs reaches the terminal) and is never read as rich markup or emoji codes."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.status import Status
from rich.text import Text

from .escape import terminal


class Progress:
    def __init__(self, console: Console | None = None, verbose: bool = False) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self.live = self.console.is_terminal
        self.verbose = verbose
        self._status: Status | None = None
        self._title = ""
        self._start = 0.0

    def say(self, text: str) -> None:
        self.console.print(terminal(text, lines=True), markup=False, emoji=False, soft_wrap=True)

    @contextmanager
    def task(self, title: str, echo: bool = True) -> Iterator[Progress]:
        """A long step: its title stays on screen with the latest detail and the elapsed time. In plain
        output the title is a line of its own unless `echo` is off (a step that ends with a line saying
        its result, like a cell) and not verbose."""
        self._title, self._start = title, time.monotonic()
        if self.live:
            with self.console.status(Text(terminal(title))) as status:
                self._status = status
                try:
                    yield self
                finally:
                    self._status = None
        else:
            if echo or self.verbose:
                self.say(title)
            yield self

    def detail(self, text: str) -> None:
        """A sub-step (e.g. 'Step 4/9 : RUN pip install ...'): on the status line, or a plain line when verbose."""
        if self._status is not None:
            elapsed = time.monotonic() - self._start
            self._status.update(Text(terminal(f"{self._title} [{elapsed:4.0f}s] {text[:100]}")))
        elif self.verbose:
            print(f"    {terminal(text[:160])}", file=sys.stderr, flush=True)

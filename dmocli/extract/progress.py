"""A rich progress bar with items/s for `dmo extract`, drawn only on a terminal (quiet in batch jobs)."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeRemainingColumn
from rich.text import Text


class RateColumn(ProgressColumn):
    """Items per second over rich's recent window."""

    def render(self, task: Task) -> Text:
        return Text(f"{task.speed:,.0f} items/s" if task.speed else "- items/s")


@contextlib.contextmanager
def progress_bar(console: Console, description: str) -> Iterator[Callable[[int], Callable[[int], None]] | None]:
    """Yields a `progress(total) -> advance(n)` factory, or None when stderr is not a terminal."""
    if not console.is_terminal:
        yield None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:

        def start(total: int) -> Callable[[int], None]:
            task = bar.add_task(description, total=total)
            return lambda n: bar.advance(task, n)

        yield start

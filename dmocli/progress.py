"""A sign of life on long work: one rich progress display on stderr, drawn only where someone is watching.

Training loops, streaming passes and Dask jobs open a `task` and `advance` it; whether anything is drawn is
decided here, once: on when stderr is a terminal (and, under torchrun, in process 0 only), off in CI logs,
pipes and nohup jobs, and forced either way by `dmo --progress/--no-progress` (`configure`). When off, `task`
yields a shared no-op whose calls cost one method call, so a loop needs no `if`. Tasks opened inside another
(an ERO fit inside a cross-fitting fold) join the same display as another line. rich is imported only when a
display is drawn, so `dmo --help` and the quiet paths do not pay for it.

    with progress.task("ero", total=outer_steps, unit="outer iterations") as bar:
        for ...:
            bar.advance(1, objective=0.93, violating=12)
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Callable, Iterable, Iterator, Sized, TypeVar, Union

Field = Union[float, int, str, None]
Item = TypeVar("Item", bound=Sized)
RATE_UNITS = ("rows", "items")  # units whose rate per second is worth showing (not epochs, folds)

_forced: bool | None = None
_lock = threading.Lock()
_display: _Display | None = None


def configure(enabled: bool | None) -> None:
    """Force the display on (True: drawn even into a file or pipe) or off (False); None lets stderr decide."""
    global _forced
    _forced = enabled


def enabled() -> bool:
    """Whether tasks opened now are drawn."""
    if _forced is not None:
        return _forced
    if os.environ.get("RANK", "0") != "0":  # a torchrun group shares one terminal: process 0 draws for it
        return False
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return False


class Task:
    """What a loop holds: the no-op used when nothing is drawn (and the interface of a drawn task)."""

    def advance(self, n: float = 1, **fields: Field) -> None:
        """n more units done; `fields` (an objective, a loss, a count) are shown beside the bar."""

    def update(self, completed: float | None = None, total: float | None = None, **fields: Field) -> None:
        """Set how much is done (or the total, once it is known) instead of adding to it."""


OFF = Task()


def _format(value: Field) -> str:
    if value is None:
        return "-"
    if isinstance(value, (bool, str)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.4g}"


class _Drawn(Task):
    """A line of the shared display; fields given once stay shown until given again."""

    def __init__(self, display: _Display, task_id: Any):
        self._display = display
        self._id = task_id
        self._fields: dict[str, Field] = {}

    def _info(self, fields: dict[str, Field]) -> str:
        self._fields.update(fields)
        return "  ".join(f"{key.replace('_', ' ')} {_format(value)}" for key, value in self._fields.items())

    def advance(self, n: float = 1, **fields: Field) -> None:
        self._display.progress.update(self._id, advance=n, info=self._info(fields))

    def update(self, completed: float | None = None, total: float | None = None, **fields: Field) -> None:
        extra: dict[str, Any] = {"info": self._info(fields)}
        if total is not None:
            extra["total"] = total
        self._display.progress.update(self._id, completed=completed, **extra)


class _Display:
    """One rich Progress on stderr shared by every open task; started by the first, stopped by the last."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
        from rich.text import Text

        class Done(ProgressColumn):
            """'3/20 outer iterations', '12,000 rows  40,000 rows/s' (no total: a pipe, a CSV)."""

            def render(self, task: Any) -> Text:
                unit = task.fields.get("unit", "")
                done = f"{task.completed:,.0f}" + (f"/{task.total:,.0f}" if task.total is not None else "")
                rate = f"  {task.speed:,.0f} {unit}/s" if unit in RATE_UNITS and task.speed else ""
                return Text(f"{done} {unit}{rate}".rstrip())

        console = Console(stderr=True, force_terminal=True if _forced else None)
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            Done(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[info]}"),
            console=console,
            transient=True,  # the summary lines that follow stand alone
            redirect_stdout=False,  # stdout carries data (`predict -o -`, `--json`): never routed through the display
        )
        self.users = 0


@contextlib.contextmanager
def task(
    description: str, total: float | Callable[[], float | None] | None = None, unit: str = "", **fields: Field
) -> Iterator[Task]:
    """A line of progress for the duration of the block: `description`, a bar (of `total` units, when known),
    the count done, the elapsed time and `fields`. Yields OFF when nothing is drawn. `total` may be a function,
    called only when the line is drawn: a count that costs a look at the data (parquet footers) is then not
    paid for in a batch job."""
    global _display
    if not enabled():
        yield OFF
        return
    if callable(total):
        total = total()
    with _lock:
        if _display is None:
            _display = _Display()
            _display.progress.start()
        display = _display
        display.users += 1
        task_id = display.progress.add_task(description, total=total, unit=unit, info="")
    drawn = _Drawn(display, task_id)
    if fields:
        drawn.update(**fields)
    try:
        yield drawn
    finally:
        with _lock:
            display.progress.refresh()  # the last state is drawn once, even for a task shorter than a refresh
            display.progress.remove_task(task_id)
            display.users -= 1
            if display.users == 0:
                display.progress.stop()
                _display = None


def advancing(items: Iterable[Item], bar: Task) -> Iterator[Item]:
    """The items (record batches, tables) unchanged, advancing `bar` by each one's length (its rows) once it is
    handed on."""
    for item in items:
        bar.advance(len(item))
        yield item

"""What a streaming fit shows the user: a progress bar while it runs, a plot of online F afterwards."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from dmocli.report import save_figure


@contextlib.contextmanager
def progress_bar(total: int | None, label: str) -> Iterator[Callable[[int, float], None] | None]:
    """A rich bar with rows/s and online F on a TTY; None (no output at all) otherwise, e.g. in CI logs."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[rate]}"),
        TextColumn("online F {task.fields[f]:.4f}"),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total, f=0.0, rate="")

        def update(rows: int, f: float) -> None:
            speed = bar.tasks[task].speed
            bar.update(task, completed=rows, f=f, rate=f"{speed:,.0f} rows/s" if speed else "")

        yield update


def plot_online_curve(path: str | Path, online: dict[str, Any], title: str) -> None:
    """Online (progressive) F-beta against rows seen, with pass boundaries when there were several."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = online["curve"]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    ax.plot(curve["rows"], curve["f_beta"], color="tab:blue", label=f"online F{online['beta']:g}")
    boundary = 0
    for i, one_pass in enumerate(online["passes"][:-1]):
        boundary += one_pass["n"]
        ax.axvline(boundary, color="gray", linestyle=":", linewidth=1, label="new pass" if i == 0 else None)
    ax.set_xlabel("rows seen")
    ax.set_ylabel(f"online F{online['beta']:g} (predictions made before each label)")
    ax.set_ylim(0, 1.01)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)

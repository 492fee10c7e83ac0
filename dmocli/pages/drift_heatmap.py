"""The monitoring page's drift heat map: every feature (rows, the most drifted first) by period (columns), each cell
its PSI against the training profile, the gate's limit marked on the colour scale and each cell past it (the gate's
drift reasons: PSI at the limit or above and significant, not a trend) marked with a cross.

The cells are one raster image (a few kilobytes for 200 features x 52 periods, where as many vector rectangles
would weigh megabytes); the table under the figure has every PSI as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from dmocli.pages.document import Figure, Table
from dmocli.pages.svg import new_figure
from dmocli.use.verdicts import PSI_LIMIT

SCORE_ROW = "(the model's score)"  # the score's PSI, drawn as the first row where the model's score is compared


def drift_heatmap(
    periods: Sequence[str],
    psi: Sequence[Mapping[str, float] | None],
    past_limit: Sequence[Sequence[str]],
    score_psi: Sequence[float | None],
) -> Figure | None:
    """The heat map of `psi` (one mapping a period, None where the period has no drift figures), `past_limit` the
    features past the gate's limit per period; None where no period has any drift figure."""
    features = _ordered(psi)
    if not features:
        return None
    with_score = any(value is not None for value in score_psi)
    names = ([SCORE_ROW] if with_score else []) + features
    values = np.full((len(names), len(periods)), np.nan)
    for column, (found, score) in enumerate(zip(psi, score_psi)):
        if with_score and score is not None:
            values[0, column] = score
        for row, name in enumerate(features, start=len(names) - len(features)):
            if found is not None and name in found:
                values[row, column] = found[name]
    marks = [
        (column, names.index(name))
        for column, names_past in enumerate(past_limit)
        for name in names_past
        if name in names
    ]
    figure = _draw(values, names, periods, marks)
    marked = set(marks)
    table = Table(
        f"PSI of every feature by period (the gate's limit: {PSI_LIMIT:g}; * past the limit and significant)",
        ["feature", *periods],
        [
            [name, *[_cell(values[row, column], (column, row) in marked) for column in range(len(periods))]]
            for row, name in enumerate(names)
        ],
    )
    worst = np.nanmax(values) if np.isfinite(values).any() else float("nan")
    alt = (
        f"Heat map of the PSI of {len(features)} features over {len(periods)} periods, darker for more drift; "
        f"the highest PSI {worst:.3f}; {len(marks)} cell(s) past the gate's limit {PSI_LIMIT:g}, marked with a cross"
    )
    return Figure.of(figure, anchor="drift", title="Drift of every feature by period (PSI)", alt=alt, table=table)


def _ordered(psi: Sequence[Mapping[str, float] | None]) -> list[str]:
    """Every feature any period has, the highest PSI over the periods first (ties by name)."""
    worst: dict[str, float] = {}
    for found in psi:
        for name, value in (found or {}).items():
            worst[name] = max(worst.get(name, -np.inf), value)
    return sorted(worst, key=lambda name: (-worst[name], name))


def _draw(values: np.ndarray, names: list[str], periods: Sequence[str], marks: list[tuple[int, int]]):
    rows, columns = values.shape
    fig, ax = new_figure(min(4.0 + 0.22 * columns, 16.0), min(1.8 + 0.16 * rows, 40.0))
    top = max(2 * PSI_LIMIT, float(np.nanmax(values)) if np.isfinite(values).any() else 0.0)
    image = ax.imshow(
        np.ma.masked_invalid(values),
        cmap="YlOrRd",
        vmin=0.0,
        vmax=min(top, 1.0),
        aspect="auto",
        interpolation="nearest",
    )
    if marks:
        xs, ys = zip(*marks)
        ax.scatter(xs, ys, marker="x", s=14, color="black", linewidths=0.8)
    ax.set_xticks(range(columns), list(periods), rotation=90, fontsize=7)
    ax.set_yticks(range(rows), names, fontsize=7 if rows > 30 else 8)
    ax.set_xlabel("period")
    ax.set_ylabel("feature (most drifted first)")
    # the title on two short lines and the bar's label short: on one line they ran into each other on a narrow map
    ax.set_title(f"PSI of every feature against the training profile\n(x: past the gate's limit {PSI_LIMIT:g})")
    bar = fig.colorbar(image, ax=ax, fraction=0.05, pad=0.03, extend="max")
    bar.set_label(f"PSI (line: limit {PSI_LIMIT:g})")
    bar.ax.axhline(PSI_LIMIT, color="black", linewidth=2)
    return fig


def _cell(value: float, past: bool) -> str | None:
    if np.isnan(value):
        return None
    return f"{value:.4f}{' *' if past else ''}"

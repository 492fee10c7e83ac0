"""The runs whose pages the browser check opens and bench/pages.py measures: generated transactions, a model
trained on them with `dmo train --html`, evaluated on fresh rows with `dmo evaluate --html`, and monitored over a
stream of weeks that drifts with `dmo monitor --time-col created_at --every week --html`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

KINDS = ("training", "evaluation", "monitoring")
WEEKS = 12
WEEK_SECONDS = 7 * 86_400
FIRST_MONDAY = pd.Timestamp("2026-01-05")
TRAIN = ("--problem", "fpor", "--target", "0.8", "--confidence", "0.9", "--cv", "3")


def rows(n: int, seed: int, *, weeks: int = 0, extra: int = 0) -> pd.DataFrame:
    """Transactions whose label follows `amount`, `age` and `channel`, with EXTRA more features of noise. With
    WEEKS, a `created_at` time over that many weeks from a Monday, `amount` drifting up by a standard deviation
    over them, and a channel the model never saw (`phone`) from the ninth week on."""
    rng = np.random.default_rng(seed)
    seconds = np.sort(rng.uniform(0, max(weeks, 1) * WEEK_SECONDS, n))
    x = rng.normal(size=(n, 4 + extra)).astype(np.float32)
    channel = np.where(rng.uniform(size=n) < 0.5, "web", "store").astype(object)
    if weeks:
        x[:, 0] += seconds / (weeks * WEEK_SECONDS)
        channel[(seconds > 8 * WEEK_SECONDS) & (rng.uniform(size=n) < 0.2)] = "phone"
    logit = 1.6 * x[:, 0] - x[:, 1] + 0.5 * (channel == "web") - 2.2
    names = ["amount", "age", "score", "noise", *(f"f{i:03d}" for i in range(extra))]
    frame = pd.DataFrame(x, columns=names)
    frame["channel"] = channel
    frame["label"] = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    if weeks:
        frame.insert(0, "created_at", (FIRST_MONDAY + pd.to_timedelta(seconds, unit="s")).strftime("%F %T"))
    return frame


def week_names(weeks: int = WEEKS) -> list[str]:
    """The periods `--every week` names the stream's weeks by: each Monday."""
    return [(FIRST_MONDAY + pd.Timedelta(weeks=week)).strftime("%Y-%m-%d") for week in range(weeks)]


def make_pages(
    dmo: Callable[..., Any], root: Path, *, weeks: int = WEEKS, extra: int = 0, train_options: Sequence[str] = TRAIN
) -> dict[str, Path]:
    """The three pages of one model, each written by its command's --html: DMO runs a `dmo` command (the tests'
    run_dmo, bench's subprocess), ROOT takes the data, the model, each command's report and the pages."""
    rows(3000, 0, extra=extra).to_parquet(root / "train.parquet")
    rows(1500, 1, extra=extra).to_parquet(root / "test.parquet")
    rows(weeks * 300, 2, weeks=weeks, extra=extra).to_parquet(root / "stream.parquet")
    model = root / "model.safetensors"
    page = {kind: root / f"{kind}.html" for kind in KINDS}
    report = {kind: root / f"{kind}.json" for kind in KINDS}
    dmo(
        "train",
        root / "train.parquet",
        *train_options,
        "-o",
        model,
        "--report",
        report["training"],
        "--html",
        page["training"],
    )
    dmo("evaluate", model, root / "test.parquet", "--report", report["evaluation"], "--html", page["evaluation"])
    weekly = ("--time-col", "created_at", "--every", "week")
    dmo(
        "monitor",
        model,
        root / "stream.parquet",
        *weekly,
        "--report",
        report["monitoring"],
        "--html",
        page["monitoring"],
    )
    return page

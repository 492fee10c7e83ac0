"""Drift between training data and the data a model is applied to, as `predict` and `evaluate` see it: text
levels the model never saw (each encoded as no level at all) and numeric columns that arrive empty (each
filled with training's median, or left missing for boosted trees to route). Warned about on every run; with
--strict, an error above a tolerated share."""

from __future__ import annotations

from dmocli.prep.features import LevelCounts

DEFAULT_MAX_UNSEEN = 0.01  # --strict's tolerance: the share of rows at unseen levels, per column


def drift_warnings(levels: LevelCounts, n_rows: int, impute: str = "median") -> list[str]:
    """One line per drifted column, with its count, share and an example level. `impute` is the model's
    preprocessing: "keep" (boosted trees) leaves an emptied column missing for the trees to route, where
    "median" fills it."""
    filled = (
        "every row takes the trees' missing-value branches there"
        if impute == "keep"
        else "every row gets training's median there"
    )
    lines = []
    for column, count in levels.unseen.items():
        if count:
            lines.append(
                f"column '{column}': {count} of {n_rows} rows ({count / n_rows:.1%}) have levels not seen in "
                f"training (e.g. {levels.examples.get(column)!r}), scored as no level at all; fix the values "
                "(case, spelling) or retrain with them (--strict makes this an error)"
            )
    for column in _emptied(levels, n_rows):
        lines.append(
            f"column '{column}' is missing (or infinite) in all {n_rows} rows; {filled} (check the column, or "
            "retrain without it)"
        )
    return lines


def drift_problems(levels: LevelCounts, n_rows: int, max_unseen: float) -> list[str]:
    """What --strict refuses: a column with more than `max_unseen` of its rows at unseen levels, or a numeric
    column missing in every row."""
    problems = [
        f"column '{column}' has {count} of {n_rows} rows ({count / n_rows:.1%}) at levels not seen in training "
        f"(e.g. {levels.examples.get(column)!r}), more than --max-unseen {max_unseen:g}"
        for column, count in levels.unseen.items()
        if n_rows and count / n_rows > max_unseen
    ]
    problems += [
        f"column '{column}' is missing (or infinite) in all {n_rows} rows" for column in _emptied(levels, n_rows)
    ]
    if problems:
        problems[-1] += "; fix the data, or drop --strict to score it anyway (nothing was written)"
    return problems


def _emptied(levels: LevelCounts, n_rows: int) -> list[str]:
    return [column for column, count in levels.imputed.items() if n_rows and count == n_rows]

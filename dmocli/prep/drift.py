"""Drift between training data and the data a model is applied to, as `predict` and `evaluate` see it: text
levels the model never saw (each encoded as no level at all) and numeric columns that arrive empty (each
filled with training's median, or left missing for boosted trees to route). Warned about on every run; with
--strict, an error above a tolerated share."""

from __future__ import annotations

from dmocli.errors import DmoError
from dmocli.prep.features import MAX_LISTED_UNSEEN, LevelCounts

DEFAULT_MAX_UNSEEN = 0.01  # --strict's tolerance: the share of rows at unseen levels, per column
NAMED_UNSEEN = 5  # unseen levels a message names per column (the report lists up to MAX_LISTED_UNSEEN)


def drift_warnings(levels: LevelCounts, n_rows: int, impute: str = "median") -> list[str]:
    """One line per drifted column, with its count, share and most frequent unseen levels. `impute` is the
    model's preprocessing: "keep" (boosted trees) leaves an emptied column missing for the trees to route, where
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
                f"training, {_named(levels, column)}; they are scored as no level at all; "
                f"{_unseen_fix(levels, column)} (--strict makes this an error)"
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
        f"column '{column}' has {count} of {n_rows} rows ({count / n_rows:.1%}) at levels not seen in training, "
        f"more than --max-unseen {max_unseen:g}: {_named(levels, column)}"
        for column, count in levels.unseen.items()
        if n_rows and count / n_rows > max_unseen
    ]
    problems += [
        f"column '{column}' is missing (or infinite) in all {n_rows} rows" for column in _emptied(levels, n_rows)
    ]
    if problems:
        folding = " (case/space variants: or retrain with --fold-case)" if any(levels.variants.values()) else ""
        problems[-1] += f"; fix the data{folding}, or drop --strict to score it anyway (nothing was written)"
    return problems


def _emptied(levels: LevelCounts, n_rows: int) -> list[str]:
    return [column for column, count in levels.imputed.items() if n_rows and count == n_rows]


def _unseen_fix(levels: LevelCounts, column: str) -> str:
    """What to do about a column's unseen levels: where some are case/space variants of known ones, --fold-case
    is the fix that keeps the data as it comes."""
    if levels.variants.get(column):
        return "fix the values, retrain with them, or retrain with --fold-case to match levels whatever their case"
    return "fix the values (case, spelling) or retrain with them"


def _named(levels: LevelCounts, column: str) -> str:
    """`e.g. 'VISA' (230 rows, a case/space variant of 'visa'), ...`: a column's NAMED_UNSEEN most frequent unseen
    levels, each with its rows and the known level it differs from only in case or spaces, and how many more."""
    listed = levels.named_unseen(column)
    variants = levels.variants.get(column, {})
    named = [_one_level(value, rows, variants.get(value, [])) for value, rows in listed[:NAMED_UNSEEN]]
    more = len(listed) - NAMED_UNSEEN
    if more > 0:
        at_least = "at least " if len(listed) >= MAX_LISTED_UNSEEN else ""
        named.append(f"and {at_least}{more} more")
    return "e.g. " + ", ".join(named)


def _one_level(value: str, rows: int, known: list[str]) -> str:
    variant = f", a case/space variant of {' or '.join(map(repr, known))}" if known else ""
    return f"{value!r} ({rows} row{'' if rows == 1 else 's'}{variant})"


def check_max_unseen(max_unseen: float) -> None:
    """--max-unseen is a share of rows; refused before any row is read, not after a whole pass."""
    if not 0 <= max_unseen < 1:
        raise DmoError(f"--max-unseen {max_unseen:g} is a share of rows: give a number from 0 to below 1 (e.g. 0.01)")

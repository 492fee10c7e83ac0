"""What each decision is worth: a gain matrix with per-row amounts (`--problem value --gain ...`), and the value of
every cut of a score curve under it.

A team decides in money, not in precision: a missed fraud loses its amount, a refused legitimate payment costs a
fee, an accepted one earns a commission (scikit-learn's fraud example, `tp=50,fp=-5,fn=-amount,tn=0.02*amount`).
Each of the four cells is a number or a number times a column of the table, so what a row brings in each cell is
known per row (`RowGains`), and the value of a cut is a sum over rows. Summed per distinct score (`CurveGains`),
the value of every cut follows from one cumulative sum, so the search over every cut stays exact and O(k).

The held-out curve keeps, per distinct score and class, the sum and the sum of squares of each column the matrix
names (`ColumnSums`): any matrix over those columns can then be evaluated on the stored curve (`dmo threshold
MODEL --problem value --gain ...` with other amounts), with the interval of its value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from dmocli.errors import DmoError

CELLS = ("tp", "fp", "fn", "tn")
VALUE_LEVEL = 0.95  # the level of the value's normal (CLT) interval in the reports
_Z = 1.959963984540054  # the standard normal quantile of (1 + VALUE_LEVEL) / 2
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_COLUMN = re.compile(r"^[A-Za-z_][\w.]*$")
GAIN_EXAMPLE = "'tp=50,fp=-5,fn=-amount,tn=0.02*amount'"


def _number_text(value: float) -> str:
    """The shortest text that reads back as `value` (50, not 50.0)."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True)
class Cell:
    """One cell's gain per row: `coefficient` (times `column`'s value where a column is named). `loss` marks a
    cell written `-column`: the column is an amount lost, which must not be negative."""

    coefficient: float
    column: str | None = None
    loss: bool = False

    @classmethod
    def parse(cls, cell: str, text: str) -> "Cell":
        """`50`, `amount`, `-amount`, `0.02*amount` (or `amount*0.02`); a DmoError naming the cell otherwise."""
        text = text.strip()
        if _NUMBER.match(text):
            return cls(_finite(cell, float(text)))
        if text.startswith("-") and _COLUMN.match(text[1:].strip()):
            return cls(-1.0, text[1:].strip(), loss=True)
        if _COLUMN.match(text):
            return cls(1.0, text)
        parts = [part.strip() for part in text.split("*")]
        if len(parts) == 2:
            numbers = [part for part in parts if _NUMBER.match(part)]
            columns = [part for part in parts if _COLUMN.match(part) and not _NUMBER.match(part)]
            if len(numbers) == 1 and len(columns) == 1:
                return cls(_finite(cell, float(numbers[0])), columns[0])
        raise DmoError(
            f"--gain {cell}={text!r} is not a number, a column, -column or number*column; write it as in {GAIN_EXAMPLE}"
        )

    @property
    def text(self) -> str:
        if self.column is None:
            return _number_text(self.coefficient)
        if self.loss:
            return f"-{self.column}"
        return self.column if self.coefficient == 1.0 else f"{_number_text(self.coefficient)}*{self.column}"


def _finite(cell: str, value: float) -> float:
    if not math.isfinite(value):
        raise DmoError(f"--gain {cell}={value} is not a finite number; give a finite gain")
    return value


@dataclass(frozen=True)
class RowGains:
    """What each row would bring in each cell: float64 arrays of shape (rows,)."""

    tp: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    tn: np.ndarray

    def realized(self, labels: np.ndarray, flagged: np.ndarray) -> np.ndarray:
        """The value each row brings under a decision (`flagged`) given its label."""
        positive = np.asarray(labels) == 1
        flagged = np.asarray(flagged, dtype=bool)
        return np.where(positive, np.where(flagged, self.tp, self.fn), np.where(flagged, self.fp, self.tn))

    def take(self, rows: np.ndarray) -> "RowGains":
        """The gains of `rows` (indices or a mask): one fold's, one split's."""
        return RowGains(self.tp[rows], self.fp[rows], self.fn[rows], self.tn[rows])


@dataclass(frozen=True)
class GainMatrix:
    """The four cells' gains (tp, fp, fn, tn). A cell not given is 0: `fn=-amount` alone weighs only what is
    missed."""

    cells: tuple[Cell, Cell, Cell, Cell]

    @classmethod
    def parse(cls, text: str) -> "GainMatrix":
        """`tp=50,fp=-5,fn=-amount,tn=0.02*amount`; each cell at most once, at least one given."""
        given: dict[str, Cell] = {}
        for item in str(text).split(","):
            if not item.strip():
                continue
            name, equals, expression = item.partition("=")
            name = name.strip().lower()
            if not equals or name not in CELLS:
                raise DmoError(
                    f"--gain {item.strip()!r} is not CELL=GAIN with CELL tp, fp, fn or tn; e.g. {GAIN_EXAMPLE}"
                )
            if name in given:
                raise DmoError(f"--gain gives {name} twice; give each of tp, fp, fn, tn at most once")
            given[name] = Cell.parse(name, expression)
        if not given:
            raise DmoError(f"--gain is empty; give the gain of each cell, e.g. {GAIN_EXAMPLE}")
        return cls(tuple(given.get(name, Cell(0.0)) for name in CELLS))  # type: ignore[arg-type]

    @property
    def text(self) -> str:
        """The canonical spelling, every cell given: what the model file and the report keep."""
        return ",".join(f"{name}={cell.text}" for name, cell in zip(CELLS, self.cells))

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns the cells name, each once, in cell order."""
        return tuple(dict.fromkeys(cell.column for cell in self.cells if cell.column is not None))

    def row_gains(self, columns: Mapping[str, np.ndarray], rows: int) -> RowGains:
        """Each row's gain in each cell from the named columns' values (float64, `rows` of them); an amount that
        is missing or not finite, or negative where a cell counts it as a loss, is one DmoError naming the column,
        how many rows and the fix."""
        for name in self.columns:
            check_amounts(name, columns[name], losses=any(c.loss and c.column == name for c in self.cells))
        arrays = [
            np.full(rows, cell.coefficient) if cell.column is None else cell.coefficient * columns[cell.column]
            for cell in self.cells
        ]
        return RowGains(*(np.asarray(array, dtype=np.float64) for array in arrays))

    def curve_gains(self, sums: "ColumnSums", positives: np.ndarray, negatives: np.ndarray) -> "CurveGains":
        """The cells' sums (and sums of squares) at each distinct score of a curve, from its counts and its columns'
        sums (any order: the arrays follow the counts'). A column the sums lack is a DmoError."""
        missing = [name for name in self.columns if name not in sums.columns]
        if missing:
            kept = ", ".join(sums.columns) or "none"
            raise DmoError(
                f"--gain names column(s) {', '.join(missing)}, and the model's held-out curve keeps the sums of "
                f"{kept} only; write the gain over those columns, or retrain with this --gain"
            )
        counts = {True: np.asarray(positives, np.float64), False: np.asarray(negatives, np.float64)}
        out = []
        for name, cell in zip(CELLS, self.cells):
            positive = name in ("tp", "fn")
            if cell.column is None:
                first, second = cell.coefficient * counts[positive], cell.coefficient**2 * counts[positive]
            else:
                at = sums.columns.index(cell.column)
                first = cell.coefficient * (sums.pos if positive else sums.neg)[at]
                second = cell.coefficient**2 * (sums.pos_sq if positive else sums.neg_sq)[at]
            out.append((first, second))
        return CurveGains(*(first for first, _ in out), *(second for _, second in out))


def check_amounts(name: str, values: np.ndarray, *, losses: bool) -> None:
    """Refuse a gain column with missing or non-finite values, or negative ones where a cell counts it as a loss."""
    values = np.asarray(values, dtype=np.float64)
    bad = int(np.count_nonzero(~np.isfinite(values)))
    if bad:
        raise DmoError(
            f"--gain column {name!r} is missing or not finite in {bad} of {values.size} labeled rows; fill those "
            "amounts (or drop the rows) before training"
        )
    negative = int(np.count_nonzero(values < 0)) if losses else 0
    if negative:
        raise DmoError(
            f"--gain column {name!r} is negative in {negative} of {values.size} labeled rows, and -{name} counts it "
            f"as a loss; make the amounts non-negative, or write the cell as -1*{name} to take them as signed"
        )


@dataclass(frozen=True)
class ColumnSums:
    """Per distinct score (axis 1) and gain column (axis 0): the sums of the column over the positive and the
    negative rows at that score, and of its square. float64; merging bins adds them."""

    columns: tuple[str, ...]
    pos: np.ndarray
    neg: np.ndarray
    pos_sq: np.ndarray
    neg_sq: np.ndarray

    @classmethod
    def of_rows(
        cls, columns: tuple[str, ...], values: np.ndarray, labels: np.ndarray, index: np.ndarray, *, k: int
    ) -> "ColumnSums":
        """The sums of `values` ((rows, columns)) over rows grouped by `index` (each row's distinct score, 0..k-1)."""
        values = np.asarray(values, dtype=np.float64).reshape(len(labels), len(columns))
        positive = np.asarray(labels) == 1
        arrays = []
        for mask in (positive, ~positive):
            for power in (1, 2):
                arrays.append(
                    np.stack([np.bincount(index[mask], values[mask, c] ** power, k) for c in range(len(columns))])
                    if columns
                    else np.zeros((0, k))
                )
        pos, pos_sq, neg, neg_sq = arrays
        return cls(tuple(columns), pos, neg, pos_sq, neg_sq)

    def merged(self, starts: np.ndarray) -> "ColumnSums":
        """The sums of adjacent scores merged into bins starting at `starts` (heldout._merged's bins)."""
        add = lambda array: np.add.reduceat(array, starts, axis=1) if array.size else array[:, : len(starts)]  # noqa: E731
        return ColumnSums(self.columns, add(self.pos), add(self.neg), add(self.pos_sq), add(self.neg_sq))


@dataclass(frozen=True)
class CurveGains:
    """At each distinct score of a curve (in the curve's own order), the sum over its positive rows of their tp and
    fn gains and over its negative rows of their fp and tn gains; `*_sq` the sums of their squares (the value's
    interval)."""

    tp: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    tn: np.ndarray
    tp_sq: np.ndarray
    fp_sq: np.ndarray
    fn_sq: np.ndarray
    tn_sq: np.ndarray

    @classmethod
    def of_rows(cls, gains: RowGains, labels: np.ndarray, index: np.ndarray, k: int) -> "CurveGains":
        """The sums of rows' gains grouped by `index` (each row's distinct score, 0..k-1)."""
        positive = np.asarray(labels) == 1
        masks = {True: positive, False: ~positive}
        indices = {True: index[positive], False: index[~positive]}
        sums = {}
        for name in CELLS:
            of_positives = name in ("tp", "fn")
            row = getattr(gains, name)[masks[of_positives]]
            sums[name] = np.bincount(indices[of_positives], row, k)
            sums[f"{name}_sq"] = np.bincount(indices[of_positives], row * row, k)
        return cls(**sums)


def _descending(curve) -> tuple[CurveGains, int]:
    """A curve's gains from its highest score down, as the search walks it, and its rows; a DmoError when it has
    none (a curve made without --gain)."""
    if hasattr(curve, "score_curve"):  # a HeldOutCurve: its scores ascend
        curve = curve.score_curve()
    if curve.gains is None:
        raise DmoError("--problem value needs the held-out gains, and this curve has none; train with --gain")
    return curve.gains, int(curve.n_pos + curve.n_neg)


def value_at_cuts(curve) -> np.ndarray:
    """The total value at every cut of the curve, in the search's order: index 0 flags nothing, index i flags the i
    highest distinct scores. Flagging a score trades its positives' fn for tp and its negatives' tn for fp."""
    gains, _ = _descending(curve)
    nothing = gains.fn.sum() + gains.tn.sum()
    return nothing + np.concatenate(([0.0], np.cumsum(gains.tp - gains.fn + gains.fp - gains.tn)))


def value_under_rate(curve, rate: float) -> np.ndarray:
    """The expected value PER ROW at every cut (value_at_cuts' order) when the positive rate is `rate`: rate times
    the positives' mean gain plus (1 - rate) times the negatives' (label shift moves the mix, not the class-wise
    gains)."""
    gains, _ = _descending(curve)
    n_pos, n_neg = int(curve.n_pos), int(curve.n_neg)
    positives = gains.fn.sum() + np.concatenate(([0.0], np.cumsum(gains.tp - gains.fn)))
    negatives = gains.tn.sum() + np.concatenate(([0.0], np.cumsum(gains.fp - gains.tn)))
    return rate * positives / max(n_pos, 1) + (1 - rate) * negatives / max(n_neg, 1)


def squares_at_cuts(curve) -> np.ndarray:
    """The sum over rows of their value's square at every cut (value_at_cuts' order): the interval's spread."""
    gains, _ = _descending(curve)
    nothing = gains.fn_sq.sum() + gains.tn_sq.sum()
    return nothing + np.concatenate(([0.0], np.cumsum(gains.tp_sq - gains.fn_sq + gains.fp_sq - gains.tn_sq)))


def value_where(gains: CurveGains, flagged: np.ndarray) -> tuple[float, float]:
    """(the total value, the sum of the rows' squared values) of flagging the distinct scores where `flagged`
    (gains and mask in the same order): any decision rule over a curve's scores, not only a cut of the search."""
    flagged = np.asarray(flagged, dtype=bool)
    total = np.where(flagged, gains.tp + gains.fp, gains.fn + gains.tn).sum()
    squares = np.where(flagged, gains.tp_sq + gains.fp_sq, gains.fn_sq + gains.tn_sq).sum()
    return float(total), float(squares)


@dataclass(frozen=True)
class ValueAt:
    """The value of one decision on the held-out rows: per row and in total, each with its normal (CLT) interval
    at VALUE_LEVEL, and how many rows it flags."""

    per_row: float
    per_row_interval: tuple[float, float]
    total: float
    total_interval: tuple[float, float]
    flagged: int

    @classmethod
    def of(cls, total: float, squares: float, rows: int, flagged: int) -> "ValueAt":
        """From the sum and the sum of squares of the rows' values: mean +- z * sd / sqrt(rows)."""
        mean = total / rows
        variance = max(squares / rows - mean * mean, 0.0) * rows / max(rows - 1, 1)
        half = _Z * math.sqrt(variance / rows)
        return cls(mean, (mean - half, mean + half), total, (rows * (mean - half), rows * (mean + half)), flagged)

    def to_dict(self) -> dict:
        return {
            "per_row": self.per_row,
            "per_row_interval": list(self.per_row_interval),
            "total": self.total,
            "total_interval": list(self.total_interval),
            "flagged": self.flagged,
        }

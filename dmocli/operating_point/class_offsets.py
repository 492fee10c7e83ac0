"""Operating points of a multi-class model: one offset per class added to its logits, the decision the arg-max of
logits + offsets, the offsets searched on held-out logits for a per-class constraint.

Why offsets: a class's recall rises (and its precision usually falls) as its
offset grows, exactly as a binary model's as its threshold falls; the offsets
are the K-class counterpart of the threshold, and with all offsets 0 the rule is
the model's own arg-max.

The problems (`ClassProblem`):

- frop: every constrained class's recall >= its floor, best macro precision;
- fpor: every constrained class's precision >= its floor where reachable, best
  macro recall; the classes left below it are named;
- ofbs: best macro F-beta;
- with `focus` one class's binary problem (its own recall or precision floor, or
  F-beta), the other classes decided by the arg-max among themselves.

The search (`search_offsets`):

- exact per coordinate: with the other offsets fixed, row i goes to class k
  exactly when b_k > t_i = max_{j != k}(z_ij + b_j) - z_ik, and to the arg-max
  of the others otherwise, so the decisions change only at the t_i; every cell
  between two of them is scored incrementally (each row taken by k leaves one
  class, so the key's per-class terms change for that class alone: O(n log n)
  per coordinate, `coordinate_keys`) and the best cell's midpoint is taken;
- global strategy: coordinate ascent, classes in order, sweep after sweep until a
  sweep changes nothing (each move strictly improves the key below, so it stops),
  from several starts: the model's own arg-max (0), the prior-corrected one
  (-log of each class's held-out rate, the balanced decision of a model trained
  unweighted) and SCATTERED fixed-seed starts scattered around it; the best end
  point is kept;
- the key, compared lexicographically: fewest classes below their floor, then
  the smallest total shortfall below the floors, then the objective. So an
  unreachable floor still ends at the best achievable per class.
  tests/operating_point/test_class_offsets.py checks each coordinate step and the end point
  against brute force over every cell of the offsets with 3 classes.

`minimal_offsets` is the floor problems' baseline: from the arg-max, moved only where a floor needs it. Which
of the two dmo keeps is class_offsets_guard.py's do-no-harm rule.

With `confidence` C the floors are on one-sided Clopper-Pearson lower bounds,
family-wise over the m constrained classes by Bonferroni (each class's bound at
1 - (1 - C) / m): recall's of the class's TP out of its rows, precision's of its
TP out of its predicted rows. With `focus` the one class's cut is the binary
search of operating_point/search.py on its margin z_f - max_{j != f} z_j, with
that module's certificate (its fixed-sequence tests for precision).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dmocli.operating_point.bounds import clopper_pearson_interval, clopper_pearson_lower
from dmocli.operating_point.problems import Problem, f_beta, safe_div

ClassProblemKind = Literal["fpor", "frop", "ofbs"]
SCATTERED = 6  # starts scattered around the prior-corrected one (normal, the logits' spread): a local search's
# end point depends on its start, and these found the brute-force optimum on every tiny problem of the test
START_SEED = 0
MAX_SWEEPS = 100  # a safety net: every sweep but the last strictly improves the key, and it ends far sooner
TOLERANCE = 1e-12
SAME = 1e-9  # relative gap below which two breakpoints are one (float rounding of z_j + b_j - z_k)


@dataclass(frozen=True)
class ClassProblem:
    """A multi-class operating point: `floors[k]` is class k's recall (frop) or precision (fpor) floor, None for an
    unconstrained class (every floor None for ofbs); `focus` names the one class of a one-class problem."""

    kind: ClassProblemKind
    floors: tuple[float | None, ...]
    beta: float = 1.0
    focus: int | None = None

    @property
    def constraint_name(self) -> str | None:
        return {"frop": "recall", "fpor": "precision", "ofbs": None}[self.kind]

    @property
    def objective_name(self) -> str:
        return {"frop": "macro precision", "fpor": "macro recall", "ofbs": "macro f_beta"}[self.kind]

    def constrained(self) -> list[int]:
        return [k for k, floor in enumerate(self.floors) if floor is not None]

    def to_dict(self, classes: list[Any]) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "floors": {str(classes[k]): self.floors[k] for k in self.constrained()},
            "beta": self.beta,
            "focus": None if self.focus is None else classes[self.focus],
        }

    @classmethod
    def from_dict(cls, values: Any, classes: list[Any]) -> "ClassProblem":
        """The stored problem (ValueError on anything malformed: a model file is checked on load)."""
        if not isinstance(values, dict) or values.get("kind") not in ("fpor", "frop", "ofbs"):
            raise ValueError("the class problem is malformed (kind must be fpor, frop or ofbs)")
        names = [str(c) for c in classes]
        floors: list[float | None] = [None] * len(classes)
        stored = values.get("floors")
        if not isinstance(stored, dict):
            raise ValueError("the class problem's floors are not a mapping of class to floor")
        for name, floor in stored.items():
            if name not in names or isinstance(floor, bool) or not isinstance(floor, (int, float)):
                raise ValueError(f"the class problem's floor {name!r}: {floor!r} names no class or is no number")
            if not 0.0 < floor < 1.0:
                raise ValueError(f"the class problem's floor {floor!r} is outside (0, 1)")
            floors[names.index(name)] = float(floor)
        focus = values.get("focus")
        if focus is not None and focus not in classes:
            raise ValueError(f"the class problem's focus {focus!r} is not a class")
        beta = values.get("beta", 1.0)
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not (beta > 0 and math.isfinite(beta)):
            raise ValueError(f"the class problem's beta {beta!r} is not a positive number")
        return cls(values["kind"], tuple(floors), float(beta), None if focus is None else classes.index(focus))


@dataclass
class ClassOperatingPoint:
    """The offsets found, and the per-class counts and rates they give on the rows they were searched on."""

    offsets: np.ndarray  # (K,), centred (a common shift decides nothing)
    tp: np.ndarray  # per class: rows of the class predicted as it
    predicted: np.ndarray  # per class: rows predicted as it
    support: np.ndarray  # per class: rows of the class
    feasible: bool | None  # every floor met (None: ofbs, no floor)
    below: list[int]  # the constrained classes left below their floor
    bounds: np.ndarray | None  # with confidence: each constrained class's lower bound (NaN where unconstrained)
    level: float | None  # ... at this one-sided level per class (Bonferroni)
    sweeps: int  # coordinate-ascent sweeps of the kept start (0 with focus)

    @property
    def precision(self) -> np.ndarray:
        return np.asarray(safe_div(self.tp, self.predicted))

    @property
    def recall(self) -> np.ndarray:
        return np.asarray(safe_div(self.tp, self.support))

    def to_dict(self, problem: ClassProblem, classes: list[Any]) -> dict[str, Any]:
        """The report's `operating_point` of a multi-class model: offsets, per-class figures, macro figures."""
        precision, recall = self.precision, self.recall
        per_class = []
        for k, name in enumerate(classes):
            row: dict[str, Any] = {
                "class": name,
                "offset": float(self.offsets[k]),
                "floor": problem.floors[k],
                "support": int(self.support[k]),
                "predicted": int(self.predicted[k]),
                "tp": int(self.tp[k]),
                "precision": float(precision[k]),
                "recall": float(recall[k]),
                "precision_interval": clopper_pearson_interval(int(self.tp[k]), int(self.predicted[k])),
                "recall_interval": clopper_pearson_interval(int(self.tp[k]), int(self.support[k])),
                "meets_floor": None if problem.floors[k] is None else k not in self.below,
            }
            if self.bounds is not None:
                row["bound"] = None if math.isnan(self.bounds[k]) else float(self.bounds[k])
            per_class.append(row)
        return {
            **problem.to_dict(classes),
            "offsets": [float(b) for b in self.offsets],
            "feasible": self.feasible,
            "below_floor": [classes[k] for k in self.below],
            "bound_level": self.level,
            "sweeps": self.sweeps,
            "macro_precision": float(precision.mean()),
            "macro_recall": float(recall.mean()),
            "macro_f_beta": float(np.mean(f_beta(self.tp, self.predicted - self.tp, self.support, problem.beta))),
            "per_class": per_class,
        }


def decide(logits: np.ndarray, offsets: np.ndarray | None) -> np.ndarray:
    """The class of each row: the arg-max of logits + offsets (of the logits alone without offsets), in float64
    as the search scored them."""
    z = np.asarray(logits, dtype=np.float64)
    return (z if offsets is None else z + np.asarray(offsets, dtype=np.float64)).argmax(axis=1)


def counts(predicted: np.ndarray, labels: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per class: (tp, predicted, support)."""
    y = np.asarray(labels, dtype=np.int64)
    tp = np.bincount(y[predicted == y], minlength=n_classes)
    return tp, np.bincount(predicted, minlength=n_classes), np.bincount(y, minlength=n_classes)


def bonferroni_level(confidence: float, constrained: int) -> float:
    """The one-sided level of each of `constrained` per-class bounds that together hold at `confidence`."""
    return 1.0 - (1.0 - confidence) / max(constrained, 1)


class _Scorer:
    """The key of candidate offsets from their per-class counts. A key is a sum over classes of per-class terms
    (below its floor or not, its shortfall, its objective), so a coordinate's candidates are scored from the terms
    of the one class each of its rows leaves (`coordinate_keys`)."""

    def __init__(self, problem: ClassProblem, support: np.ndarray, confidence: float | None, *, objective: bool = True):
        self.problem, self.support, self.objective = problem, support, objective  # objective False: floors only
        self.floors = np.array([np.nan if f is None else f for f in problem.floors])
        self.mask = ~np.isnan(self.floors)
        self.level = None if confidence is None else bonferroni_level(confidence, int(self.mask.sum()))
        self._recall_bounds: np.ndarray | None = None  # every class's table of bound by tp, end to end
        self._table_start = np.r_[0, np.cumsum(support + 1)[:-1]]
        if self.level is not None and problem.kind == "frop":  # recall's bound depends on tp alone: one table each
            self._recall_bounds = np.concatenate(
                [clopper_pearson_lower(np.arange(n + 1), np.full(n + 1, n), self.level) for n in support.tolist()]
            )

    def metric(self, tp: np.ndarray, predicted: np.ndarray, cls: np.ndarray) -> np.ndarray:
        """What must reach the floor of class cls[i] with counts (tp[i], predicted[i]): the rate, or its lower
        bound with a confidence (NaN where unconstrained)."""
        out = np.full(tp.shape, np.nan)
        if self.problem.kind == "ofbs":
            return out
        on = self.mask[cls]
        tp, predicted, cls = tp[on], predicted[on], cls[on]
        if self.problem.kind == "frop":
            if self._recall_bounds is not None:
                out[on] = self._recall_bounds[self._table_start[cls] + tp]
            else:
                out[on] = safe_div(tp, self.support[cls])
        elif self.level is None:
            out[on] = safe_div(tp, predicted)
        else:  # one bound per distinct (tp, predicted) pair: few among many candidates
            pairs, inverse = np.unique(np.stack([tp, predicted]), axis=1, return_inverse=True)
            out[on] = clopper_pearson_lower(pairs[0], pairs[1], self.level)[inverse.ravel()]
        return out

    def terms(
        self, tp: np.ndarray, predicted: np.ndarray, cls: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per (tp[i], predicted[i]) of class cls[i]: below its floor (0/1), its shortfall (0 unless below), its
        objective term (precision for frop, recall for fpor, F-beta for ofbs)."""
        gap = np.where(
            self.mask[cls], np.maximum(self.floors[cls] - np.nan_to_num(self.metric(tp, predicted, cls)), 0), 0
        )
        below = gap > TOLERANCE
        kind = self.problem.kind
        if not self.objective:
            objective = np.zeros(tp.shape)
        elif kind == "frop":
            objective = safe_div(tp, predicted)
        elif kind == "fpor":
            objective = safe_div(tp, self.support[cls])
        else:
            objective = f_beta(tp, predicted - tp, self.support[cls], self.problem.beta)
        return below.astype(np.int64), np.where(below, gap, 0.0), np.asarray(objective, dtype=np.float64)

    def constrained_metric(self, tp: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        """`metric` of every class of each candidate (rows: candidates, columns: classes)."""
        tp, predicted = np.atleast_2d(tp), np.atleast_2d(predicted)
        cls = np.broadcast_to(np.arange(tp.shape[1]), tp.shape)
        return self.metric(tp.ravel(), predicted.ravel(), cls.ravel()).reshape(tp.shape)

    def keys(self, tp: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        """(candidates, 3): -(classes below floor), -(total shortfall), objective; larger is better."""
        tp, predicted = np.atleast_2d(tp), np.atleast_2d(predicted)
        cls = np.broadcast_to(np.arange(tp.shape[1]), tp.shape)
        below, short, objective = (x.reshape(tp.shape) for x in self.terms(tp.ravel(), predicted.ravel(), cls.ravel()))
        return self.assemble(below.sum(axis=1), short.sum(axis=1), objective.sum(axis=1))

    def assemble(self, below: np.ndarray, short: np.ndarray, objective: np.ndarray) -> np.ndarray:
        """The keys from the per-class terms summed over the classes."""
        return np.stack([-below.astype(np.float64), -short, objective / len(self.support)], 1)


def _best(keys: np.ndarray, move: np.ndarray | None = None) -> int:
    """The row of the lexicographically largest key (sums that differ by rounding alone are equal): the rows tied
    at the best of each column in turn, O(rows); of equals the first, or the least `move` where given."""
    rounded = np.round(keys, 9)
    rows = np.arange(len(keys))
    for column in range(keys.shape[1]):
        values = rounded[rows, column]
        rows = rows[values == values.max()]
    return int(rows[0] if move is None else rows[np.argmin(move[rows])])


def _better(a: np.ndarray, b: np.ndarray) -> bool:
    """Key a strictly better than key b (differences within TOLERANCE count as equal)."""
    for x, y in zip(a, b):
        if x > y + TOLERANCE:
            return True
        if x < y - TOLERANCE:
            return False
    return False


def coordinate_keys(
    logits: np.ndarray, labels: np.ndarray, offsets: np.ndarray, *, k: int, scorer: _Scorer
) -> tuple[np.ndarray, np.ndarray]:
    """Every distinct decision of class k's offset with the others fixed: (candidate offsets (G,), their keys
    (G, 3)). Candidate 0 gives class k no row; each next one adds the rows of the next breakpoint t_i (ties
    together); each candidate is the midpoint of its cell (or 1 beyond the ends).

    Why incremental: a row taken by k leaves one class (its arg-max among the others), so each row changes one
    class's counts by one; the key's per-class terms are summed once at candidate 0 and then updated by each
    row's change, O(n log n) per coordinate instead of scoring G x K count matrices."""
    n, n_classes = logits.shape
    others = logits + offsets
    others[:, k] = -np.inf
    alt = others.argmax(axis=1)  # each row's class while it is not k's
    t = others[np.arange(n), alt] - logits[:, k]  # row goes to k exactly when offset_k > t
    order = np.argsort(t, kind="stable")
    ts, left, y_sorted = t[order], alt[order], labels[order]
    # the last row of each group of equal t (equal up to rounding: the same breakpoint reached by two sums)
    ends = np.flatnonzero(np.r_[np.diff(ts) > SAME * np.maximum(1.0, np.abs(ts[1:])), True])
    base_tp, base_pred, _ = counts(alt, labels, n_classes)
    # each sorted row's class counts after it (and the rows of its class before it) went to k
    right = (y_sorted == left).astype(np.int64)
    by = np.argsort(left.astype(np.int16 if n_classes < 2**15 else np.int64), kind="stable")  # radix
    first = np.searchsorted(left[by], left[by], side="left")
    seen = np.cumsum(right[by])
    gone_pred, gone_tp = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    gone_pred[by] = np.arange(1, n + 1) - first
    gone_tp[by] = seen - np.r_[0, seen][first]
    after_pred, after_tp = base_pred[left] - gone_pred, base_tp[left] - gone_tp
    after = scorer.terms(after_tp, after_pred, left)
    before = scorer.terms(after_tp + right, after_pred + 1, left)
    rest = np.arange(n_classes) != k
    base = scorer.terms(base_tp[rest], base_pred[rest], np.flatnonzero(rest))
    own = scorer.terms(np.r_[0, np.cumsum(y_sorted == k)[ends]], np.r_[0, ends + 1], np.full(ends.size + 1, k))
    summed = [b.sum() + np.r_[0, np.cumsum(a - p)[ends]] + o for a, p, b, o in zip(after, before, base, own)]
    cells = np.r_[ts[0] - 1.0, (ts[ends[:-1]] + ts[ends[:-1] + 1]) / 2.0, ts[-1] + 1.0]
    return cells, scorer.assemble(*summed)


def _ascend(
    logits: np.ndarray, labels: np.ndarray, start: np.ndarray, scorer: _Scorer
) -> tuple[np.ndarray, np.ndarray, int]:
    """Coordinate ascent from `start` until a sweep changes nothing: (offsets, key, sweeps)."""
    n_classes = logits.shape[1]
    offsets = start.astype(np.float64).copy()
    tp, pred, _ = counts(decide(logits, offsets), labels, n_classes)
    key = scorer.keys(tp, pred)[0]
    for sweep in range(1, MAX_SWEEPS + 1):
        moved = False
        for k in range(n_classes):
            cells, keys = coordinate_keys(logits, labels, offsets, k=k, scorer=scorer)
            best = _best(keys, None if scorer.objective else np.abs(cells - offsets[k]))  # floors only: least move
            if _better(keys[best], key):
                offsets[k], moved = cells[best], True
                tp, pred, _ = counts(decide(logits, offsets), labels, n_classes)
                key = scorer.keys(tp, pred)[0]  # counted afresh: the incremental sums carry rounding
        if not moved:
            return offsets, key, sweep
    return offsets, key, MAX_SWEEPS


def search_offsets(
    logits: np.ndarray, labels: np.ndarray, problem: ClassProblem, confidence: float | None = None
) -> ClassOperatingPoint:
    """The offsets for `problem` on held-out (logits (n, K), labels in 0..K-1); see the module docstring."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    n_classes = z.shape[1]
    if problem.focus is not None:
        return _focus(z, y, problem, confidence)
    scorer = _Scorer(problem, np.bincount(y, minlength=n_classes), confidence)
    rate = np.bincount(y, minlength=n_classes) / max(y.size, 1)
    prior = -np.log(np.maximum(rate, 1.0 / max(y.size, 1)))
    rng = np.random.default_rng(START_SEED)  # fixed: the same logits give the same offsets
    spread = float(z.std()) or 1.0
    starts = [np.zeros(n_classes), prior, *(prior + rng.normal(scale=spread, size=n_classes) for _ in range(SCATTERED))]
    best: tuple[np.ndarray, np.ndarray, int] | None = None
    for start in starts:
        found = _ascend(z, y, start, scorer)
        if best is None or _better(found[1], best[1]):
            best = found
    assert best is not None
    offsets, _, sweeps = best
    return _point(z, y, offsets - offsets.mean(), problem=problem, scorer=scorer, sweeps=sweeps)


def minimal_offsets(
    logits: np.ndarray, labels: np.ndarray, problem: ClassProblem, confidence: float | None = None
) -> ClassOperatingPoint:
    """Move only where needed: coordinate ascent from the arg-max (offsets 0) on the floors alone (classes below,
    then shortfall; the objective ignored), so a coordinate moves only to lift a class towards its floor, by the
    least offset that does (the first of equal keys), and classes the arg-max already serves keep their margin.
    The arg-max itself where it meets every floor."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    support = np.bincount(y, minlength=z.shape[1])
    floors_only = _Scorer(problem, support, confidence, objective=False)
    offsets, _, sweeps = _ascend(z, y, np.zeros(z.shape[1]), floors_only)
    return _point(
        z, y, offsets - offsets.mean(), problem=problem, scorer=_Scorer(problem, support, confidence), sweeps=sweeps
    )


def point_at(
    logits: np.ndarray,
    labels: np.ndarray,
    offsets: np.ndarray,
    *,
    problem: ClassProblem,
    confidence: float | None = None,
) -> ClassOperatingPoint:
    """The operating point of given offsets on these rows (all zeros: the model's own arg-max), scored as a
    search's end point is."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    scorer = _Scorer(problem, np.bincount(y, minlength=z.shape[1]), confidence)
    return _point(z, y, np.asarray(offsets, dtype=np.float64), problem=problem, scorer=scorer, sweeps=0)


def _point(
    z: np.ndarray, y: np.ndarray, offsets: np.ndarray, *, problem: ClassProblem, scorer: _Scorer, sweeps: int
) -> ClassOperatingPoint:
    tp, predicted, support = counts(decide(z, offsets), y, z.shape[1])
    metric = scorer.constrained_metric(tp, predicted)[0]
    below = [k for k in problem.constrained() if not metric[k] >= problem.floors[k] - TOLERANCE]
    return ClassOperatingPoint(
        offsets=offsets,
        tp=tp,
        predicted=predicted,
        support=support,
        feasible=None if problem.kind == "ofbs" else not below,
        below=below,
        bounds=metric if scorer.level is not None else None,
        level=scorer.level,
        sweeps=sweeps,
    )


def margins(logits: np.ndarray, focus: int) -> np.ndarray:
    """z_f - max_{j != f} z_j: class `focus` wins the arg-max with offset b exactly when its margin exceeds -b."""
    others = np.array(logits, dtype=np.float64)
    others[:, focus] = -np.inf
    return np.asarray(logits, dtype=np.float64)[:, focus] - others.max(axis=1)


def _focus(z: np.ndarray, y: np.ndarray, problem: ClassProblem, confidence: float | None) -> ClassOperatingPoint:
    """One class's binary problem on its margin (operating_point/search.py, exact, with its certificate); its
    offset puts the cut midway between the last margin in and the next one out, the others' offsets 0."""
    from dmocli.operating_point.search import search

    focus = problem.focus
    assert focus is not None
    score = margins(z, focus)
    binary = Problem(problem.kind, problem.floors[focus], problem.beta)
    point = search(score, (y == focus).astype(np.int64), binary, confidence)
    lower = score[score < point.threshold]
    cut = (point.threshold + lower.max()) / 2.0 if lower.size else point.threshold - 1.0
    offsets = np.zeros(z.shape[1])
    offsets[focus] = -cut
    scorer = _Scorer(problem, np.bincount(y, minlength=z.shape[1]), None)
    found = _point(z, y, offsets - offsets.mean(), problem=problem, scorer=scorer, sweeps=0)
    if confidence is not None and point.constraint_bound is not None:
        found.bounds = np.full(z.shape[1], np.nan)
        found.bounds[focus] = point.constraint_bound
        found.level = confidence
    if point.feasible is not None:
        found.feasible = bool(point.feasible)
        found.below = [] if point.feasible else [focus]
    return found

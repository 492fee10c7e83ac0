"""The multi-class offset search (dmocli/operating_point/class_offsets.py) against brute force over every cell of
the offsets on tiny 3-class data, and the --confidence certificate's family-wise coverage by simulation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dmocli.operating_point.class_offsets import (
    ClassProblem,
    _best,
    _better,
    _Scorer,
    coordinate_keys,
    counts,
    decide,
    search_offsets,
)

HALF = 0.5  # tiny data's logits are multiples of this, so every breakpoint of the offsets is one too


def tiny(seed: int, n: int = 14) -> tuple[np.ndarray, np.ndarray]:
    """3-class logits on the HALF grid, loosely informative of the label."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    y[:3] = [0, 1, 2]
    z = rng.integers(-3, 4, (n, 3)).astype(np.float64) * HALF
    z[np.arange(n), y] += HALF * rng.integers(0, 3, n)
    return z, y


def every_cell() -> list[np.ndarray]:
    """One offset vector (b0 = 0: a common shift decides nothing) inside every cell of the arrangement of lines
    b1 = c, b2 = c, b2 - b1 = c (c on the HALF grid, |c| <= 6): each HALF square is cut by one diagonal, and the
    points (1/6, 2/6) and (2/6, 1/6) of a square lie in its two triangles. Points whose b2 - b1 is on the grid
    (on a line, a tie) are skipped."""
    grid = np.arange(-14, 14) * HALF
    points = []
    for b1, b2 in itertools.product(grid, grid):
        for f1, f2 in ((1 / 6, 2 / 6), (2 / 6, 1 / 6)):
            points.append(np.array([0.0, b1 + f1 * 2 * HALF, b2 + f2 * 2 * HALF]))
    return points


PROBLEMS = [
    ClassProblem("frop", (0.7, 0.7, 0.7)),
    ClassProblem("frop", (0.9, None, 0.6)),
    ClassProblem("fpor", (0.6, 0.6, 0.6)),
    ClassProblem("ofbs", (None, None, None)),
    ClassProblem("ofbs", (None, None, None), beta=2.0),
]


def brute_best(z: np.ndarray, y: np.ndarray, problem: ClassProblem, scorer: _Scorer) -> np.ndarray:
    """The best key over every cell: each cell's offsets decide every row (the arg-max of logits + offsets, in
    float64 as `decide`), its per-class counts are tallied here, and all cells are scored in one call."""
    offsets = np.stack(every_cell())  # (cells, 3)
    decided = (np.asarray(z, dtype=np.float64)[None] + offsets[:, None, :]).argmax(axis=2)  # (cells, rows)
    is_class = decided[:, :, None] == np.arange(3)  # (cells, rows, classes)
    pred = is_class.sum(axis=1)
    tp = (is_class & (np.asarray(y)[None, :, None] == np.arange(3))).sum(axis=1)
    keys = scorer.keys(tp, pred)
    return keys[_best(keys)]


@pytest.mark.parametrize("confidence", [None, 0.8])
@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"{p.kind}-{p.floors}-{p.beta}")
def test_each_coordinate_step_is_exact(problem: ClassProblem, confidence: float | None) -> None:
    """For one class's offset with the others fixed, the candidates' keys (summed incrementally, row by row) are
    those the arg-max's own counts give at each candidate, and no offset on a fine 1-D grid gives a key the
    candidates miss."""
    for seed in range(10):
        z, y = tiny(seed)
        scorer = _Scorer(problem, np.bincount(y, minlength=3), confidence)
        offsets = np.array([0.0, 1 / 3, -1 / 6])
        for k in range(3):
            cells, keys = coordinate_keys(z, y, offsets, k=k, scorer=scorer)
            for cell, key in zip(cells, keys):
                b = offsets.copy()
                b[k] = cell
                got_tp, got_pred, _ = counts(decide(z, b), y, 3)
                assert np.allclose(scorer.keys(got_tp, got_pred)[0], key, atol=1e-12)
            best = keys[_best(keys)]
            for value in np.arange(-8, 8, HALF / 3) + 1 / 12:
                b = offsets.copy()
                b[k] = value
                tp, pred, _ = counts(decide(z, b), y, 3)
                assert not _better(scorer.keys(tp, pred)[0], best)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"{p.kind}-{p.floors}-{p.beta}")
def test_search_against_brute_force_over_every_cell(problem: ClassProblem) -> None:
    """The coordinate-ascent end point against the best of every cell of the (b1, b2) plane: never better (the
    brute force is exhaustive), and equal on at least 90% of 30 random tiny problems (a local search may stop
    short; the count is shown)."""
    draws, equal = 30, 0
    for seed in range(draws):
        z, y = tiny(seed)
        scorer = _Scorer(problem, np.bincount(y, minlength=3), None)
        point = search_offsets(z, y, problem)
        tp, pred, _ = counts(decide(z, point.offsets), y, 3)
        found = scorer.keys(tp, pred)[0]
        best = brute_best(z, y, problem, scorer)
        assert not _better(found, best), (seed, found, best)
        equal += not _better(best, found)
        assert (point.tp == tp).all() and (point.predicted == pred).all()
    print(f"{problem}: coordinate ascent equals brute force on {equal}/{draws}")
    assert equal >= 0.9 * draws


def test_unreachable_floor_reports_best_per_class() -> None:
    """A recall floor of 0.99 for every class cannot hold on overlapping classes: infeasible, the classes below
    it named, and the end point is the brute-force minimum of classes below the floor."""
    z, y = tiny(3, n=20)
    problem = ClassProblem("frop", (0.99, 0.99, 0.99))
    point = search_offsets(z, y, problem)
    assert point.feasible is False and point.below
    scorer = _Scorer(problem, np.bincount(y, minlength=3), None)
    assert brute_best(z, y, problem, scorer)[0] == -len(point.below)
    assert point.to_dict(problem, ["a", "b", "c"])["below_floor"] == [["a", "b", "c"][k] for k in point.below]


def test_offsets_meet_reachable_floors_on_separable_data() -> None:
    """Class-imbalanced Gaussian logits where the arg-max misses the rare class's floor: the offsets meet every
    floor on the rows searched, and the offsets are centred."""
    rng = np.random.default_rng(0)
    y = rng.choice(3, size=3000, p=[0.8, 0.15, 0.05])
    z = rng.normal(size=(3000, 3)) + 2.5 * np.eye(3)[y] + np.log([0.8, 0.15, 0.05])
    problem = ClassProblem("frop", (0.8, 0.8, 0.8))
    argmax_recall = counts(decide(z, None), y, 3)[0] / np.bincount(y)
    assert argmax_recall.min() < 0.8
    point = search_offsets(z, y, problem)
    assert point.feasible and (point.recall >= 0.8).all()
    assert abs(point.offsets.sum()) < 1e-9


def test_focus_is_the_binary_search_on_the_margin() -> None:
    """--focus: one class's precision floor; the others keep their arg-max among themselves; the class's own
    counts are the binary search's on its margin."""
    from dmocli.operating_point.class_offsets import margins
    from dmocli.operating_point.problems import Problem
    from dmocli.operating_point.search import search

    rng = np.random.default_rng(1)
    y = rng.choice(4, size=2000, p=[0.4, 0.3, 0.2, 0.1])
    z = rng.normal(size=(2000, 4)) + 1.2 * np.eye(4)[y]
    problem = ClassProblem("fpor", (None, None, None, 0.8), focus=3)
    point = search_offsets(z, y, problem)
    binary = search(margins(z, 3), (y == 3).astype(np.int64), Problem("fpor", 0.8))
    assert point.tp[3] == binary.tp and point.predicted[3] == binary.tp + binary.fp
    assert point.feasible and point.precision[3] >= 0.8
    rest = decide(z, point.offsets) != 3
    assert (decide(z[rest][:, :3], None) == decide(z, point.offsets)[rest]).all()


def test_confidence_coverage_family_wise() -> None:
    """--confidence 0.9 with recall floors for 3 classes: over 300 draws of 600 held-out rows from a known
    distribution, the share of draws where every certified class's true recall (measured on 200,000 fresh rows)
    reaches its floor is at least 0.9 less the simulation's 3-sigma slack."""
    rng = np.random.default_rng(7)
    prior, shift = np.array([0.6, 0.3, 0.1]), 2.5

    def draw(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.choice(3, size=n, p=prior)
        return rng.normal(size=(n, 3)) + shift * np.eye(3)[y], y

    z_big, y_big = draw(200_000)
    problem = ClassProblem("frop", (0.75, 0.75, 0.75))
    draws, covered, answered = 300, 0, 0
    for _ in range(draws):
        z, y = draw(600)
        point = search_offsets(z, y, problem, confidence=0.9)
        if not point.feasible:
            continue
        answered += 1
        true_recall = counts(decide(z_big, point.offsets), y_big, 3)[0] / np.bincount(y_big)
        covered += bool((true_recall >= 0.75).all())
    slack = 3 * np.sqrt(0.9 * 0.1 / max(answered, 1))
    print(f"family-wise coverage {covered}/{answered} answered of {draws} draws")
    assert answered >= 0.8 * draws
    assert covered / answered >= 0.9 - slack

"""The review band: a second, lower cut under a binary model's automatic one, whose rows go to people.

`--review-budget R` beside `--problem fpor --target A` (or frop) splits the scores three ways: rows at or above
the problem's threshold are decided automatically (flagged, with the target met and, with `--confidence`,
certified, as the search certifies it), rows in [lower, threshold) go to review, rows below pass. The lower cut is
the lowest cut of the held-out curve whose band holds at most R of its rows: as many rows as the budget allows go
to review, so as many positives as possible are looked at by someone.

The band's volume needs no labels: it is the share of rows whose score falls between the two cuts, an alert
budget's count for the rows between them. With a confidence the band is certified as an alert budget is
(operating_point/alert_budget.py): the one-sided Clopper-Pearson upper bound of its share at that level, or with
`--new-rows N` the exact prediction bound of the review volume of the next N rows, must be within R. The bands the
lower cut is chosen from are nested (each holds the rows of every narrower one), so taking the widest that passes
is one test of the boundary band whose true share first exceeds R, and its error is at most 1 - C for a given
automatic cut (docs/operating-points.md, "Review band").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dmocli.operating_point.alert_budget import AlertBudget, certified_share
from dmocli.operating_point.bounds import clopper_pearson_interval
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import safe_div

DECISIONS = ("positive", "review", "negative")  # the classes of decision, from the highest scores down
BAND_PROBLEMS = ("fpor", "frop")  # the problems whose automatic cut meets a target a band can sit beside


@dataclass(frozen=True, kw_only=True)
class Band:
    """Two cuts on the logit scale (`lower <= upper`; equal: an empty band) and what the held-out rows show of
    the band between them: its rows, their share, the share's upper bound where a confidence certified it."""

    upper: float  # the automatic cut: logit >= upper is decided positive
    lower: float  # the review cut: lower <= logit < upper goes to review
    budget: float  # the share of rows review may take
    confidence: float | None  # the level the band's share was certified at (None: measured only)
    next_rows: int | None  # ... for the review volume of that many next rows (None: the population's share)
    rows: int  # the held-out rows counted
    band_rows: int  # ... of which in the band
    volume_bound: float | None  # the one-sided upper bound of the band's share at `confidence`
    smallest_rows: int  # the rows of the smallest band there is (one distinct score below the automatic cut)

    @property
    def volume(self) -> float:
        """The band's share of the held-out rows: the review volume expected on rows like them."""
        return self.band_rows / max(self.rows, 1)

    @property
    def empty(self) -> bool:
        return self.band_rows == 0

    def info(self) -> dict[str, Any]:
        """What the model file's `info.review_band` keeps: the budget and how the band met it (the cuts are the
        header's `threshold` and `review_threshold`)."""
        return {
            "budget": self.budget,
            "confidence": self.confidence,
            "next_rows": self.next_rows,
            "volume": self.volume,
            "volume_bound": self.volume_bound,
            "rows": self.rows,
        }


def check_budget(budget: float) -> None:
    """A share of rows strictly between 0 and 1 (the declaration refuses others: this guards the library)."""
    if not 0.0 < budget < 1.0:
        raise ValueError(f"a review budget is a share of rows in (0, 1), not {budget!r}")


def review_band(
    curve: HeldOutCurve, upper: float, budget: float, *, confidence: float | None = None, next_rows: int | None = None
) -> Band:
    """The band under the automatic cut `upper` on `curve`: its lower cut the lowest whose band holds at most
    `budget` of the rows (with `confidence`, certified within it: of the population, or of the `next_rows` next
    rows). An empty band (lower == upper) where even the first score below `upper` holds too many rows."""
    check_budget(budget)
    rows = curve.n_pos + curve.n_neg
    first_auto = curve.first_at(upper)  # ascending scores: indices >= it are decided automatically
    counts = (curve.positives[:first_auto].astype(np.int64) + curve.negatives[:first_auto]).astype(np.int64)
    # band rows when the band starts at each distinct score j below the cut (j = first_auto: empty)
    band = np.concatenate((np.cumsum(counts[::-1])[::-1], [0]))
    next_rows = None if confidence is None else next_rows
    within = AlertBudget(budget).admissible(band, rows, confidence=confidence, next_rows=next_rows)
    within[-1] = True  # the empty band sends no row to review: always within
    lowest = int(np.argmax(within))  # `within` only grows with j (the band shrinks), and the empty band is within
    return Band(
        upper=float(upper),
        lower=_lower_cut(curve, lowest, first_auto, upper),
        budget=float(budget),
        confidence=confidence,
        next_rows=next_rows,
        rows=rows,
        band_rows=int(band[lowest]),
        volume_bound=_bound(int(band[lowest]), rows, confidence, next_rows),
        smallest_rows=int(band[first_auto - 1]) if first_auto > 0 else 0,
    )


def _bound(band_rows: int, rows: int, confidence: float | None, next_rows: int | None) -> float | None:
    """The share the band is certified not to exceed at `confidence` (alert_budget.certified_share; None: none
    asked); 0 for an empty band, which sends no row to review whatever the rows."""
    if confidence is None:
        return None
    return certified_share(band_rows, rows, confidence=confidence, next_rows=next_rows) if band_rows else 0.0


def _lower_cut(curve: HeldOutCurve, start: int, first_auto: int, upper: float) -> float:
    """The review cut that starts the band at distinct score `start` (ascending): in the gap below it, where the
    search places a threshold (ScoreCurve.cut_threshold); `upper` itself for an empty band."""
    if start >= first_auto:
        return float(upper)
    return curve.score_curve().cut_threshold(curve.scores.size - 1 - start)


def why_empty(band: Band) -> str | None:
    """Why no row can go to review within the budget, with what would let one (None: the band holds rows). The
    smallest band there is holds the rows of the one distinct score below the automatic cut."""
    if not band.empty:
        return None
    if band.smallest_rows == 0:
        return "no held-out row scores below the automatic cut, so none is left for review"
    share = band.smallest_rows / max(band.rows, 1)
    head = f"no review band fits --review-budget {band.budget:g}: the smallest (one score below the automatic cut)"
    if band.confidence is None:
        return f"{head} holds {share:.4f} of the held-out rows; give --review-budget {share:.4g} or more"
    budget, rows = AlertBudget(band.budget), band.rows
    asked = {"confidence": band.confidence, "next_rows": band.next_rows}
    bound = budget.smallest_met(band.smallest_rows, rows, **asked)
    text = (
        f"{head} holds {band.smallest_rows:,} of the {rows:,} held-out rows, certified at {band.confidence:g} "
        f"within a share of {bound:.4f}{_of_next(band.next_rows)}; give --review-budget {bound:.4g} or more"
    )
    needed = budget.rows_needed(band.smallest_rows, rows, **asked)
    if needed is not None:
        text += f", or about {needed:,} held-out rows like these would certify a band of that share"
    return text


def _of_next(next_rows: int | None) -> str:
    """Which review volume a certificate is about, as the refusal says it."""
    return "" if next_rows is None else f" on the next {next_rows:,} rows"


def decisions(logits: np.ndarray, upper: float, lower: float) -> np.ndarray:
    """Each row's class of decision as an index into DECISIONS: 0 positive (logit >= upper), 1 review
    (lower <= logit < upper), 2 negative; compared in the logits' own type, as the model decides."""
    logits = np.asarray(logits)
    kind = logits.dtype.type if logits.dtype in (np.float32, np.float64) else np.float64
    out = np.full(logits.shape, 2, dtype=np.int8)
    out[logits >= kind(lower)] = 1
    out[logits >= kind(upper)] = 0
    return out


def band_figures(decided: np.ndarray, labels: np.ndarray | None, *, budget: float) -> dict[str, Any]:
    """Each class of decision's volume (share of rows), and with labels its precision (share of positives among
    its rows) and recall (share of all positives it holds), each with its 95 % Clopper-Pearson interval; the
    review volume against the budget."""
    decided = np.asarray(decided)
    rows = int(decided.size)
    positives = None if labels is None else int(np.count_nonzero(np.asarray(labels) == 1))
    classes = {}
    for index, name in enumerate(DECISIONS):
        held = decided == index
        count = int(np.count_nonzero(held))
        figures: dict[str, Any] = {"rows": count, "volume": float(safe_div(count, rows))}
        if labels is not None:
            hits = int(np.count_nonzero(np.asarray(labels)[held] == 1))
            figures |= {
                "positives": hits,
                "precision": float(safe_div(hits, count)) if count else None,
                "precision_interval": clopper_pearson_interval(hits, count),
                "recall": float(safe_div(hits, positives)) if positives else None,
                "recall_interval": clopper_pearson_interval(hits, positives or 0),
            }
        classes[name] = figures
    review = classes["review"]["volume"]
    return {"rows": rows, "classes": classes, "review_volume": review, "within_budget": review <= budget + 1e-12}


def curve_decisions(curve: HeldOutCurve, upper: float, lower: float) -> tuple[np.ndarray, np.ndarray]:
    """(each held-out row's class of decision, its label): the held-out curve's rows decided by the two cuts."""
    scores, labels = curve.rows()
    return decisions(scores, upper, lower), labels

"""The review band of a trained or re-targeted binary model: where `--review-budget` puts the lower cut, what the
report says of it, and the refusal when no row fits the budget.

`dmo train` and `dmo threshold` share it: both have a held-out curve and the automatic cut just searched on it;
operating_point/review_band.py does the maths, this module the report section and the decision's file entries.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from dmocli.errors import DmoError, UnreachableTarget, option_hint
from dmocli.models.decision import Decision
from dmocli.models.modelfile import DmoModel
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.review_band import (
    BAND_PROBLEMS,
    Band,
    band_figures,
    curve_decisions,
    review_band,
    why_empty,
)

BAND_INFO = "review_band"  # the model file's info entry of the band (its lower cut is the header's)
BAND_RULE = "logit >= threshold: positive; review_threshold <= logit < threshold: review; else negative"


@dataclass(frozen=True, kw_only=True)
class ReviewBandSection:
    """The report's `review_band`: both cuts, the budget and how the band met it, and each class of decision's
    expected volume, precision and recall on the held-out rows (docs/report-schema.md)."""

    band: Band
    split: str  # the held-out rows the band was counted on (the held-out curve's split)
    figures: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        band = self.band
        certified = None if band.confidence is None else bool(band.volume_bound <= band.budget + 1e-12)
        return {
            "review_band": {
                "rule": BAND_RULE,
                "threshold": band.upper,
                "review_threshold": band.lower,
                "budget": band.budget,
                "confidence": band.confidence,
                "next_rows": band.next_rows,
                "split": self.split,
                "rows": band.rows,
                "review_rows": band.band_rows,
                "volume": band.volume,
                "volume_bound": band.volume_bound,
                "certified": certified,
                "classes": self.figures["classes"],
            }
        }


@dataclass(frozen=True, kw_only=True)
class BandOutcome:
    """A band settled on a held-out curve: its report section, and what it adds to the run (a warning where an
    empty band was kept by --allow-infeasible; the refusal where it was not)."""

    band: Band
    section: ReviewBandSection
    warnings: tuple[str, ...] = ()
    refusal: UnreachableTarget | None = None

    def info(self) -> dict[str, Any]:
        """The model file's `info.review_band`."""
        return {BAND_INFO: self.band.info()}


def summary_line(section: dict[str, Any]) -> str:
    """The report's `review_band` as one line: where the band starts, the share it holds against the budget (and
    its certified bound), and what the review rows hold."""
    review = section["classes"]["review"]
    text = (
        f"review band: logit {section['review_threshold']:.6g} up to the threshold, {section['volume']:.4f} of the "
        f"held-out rows (budget {section['budget']:g}"
    )
    if section["volume_bound"] is not None:
        about = "" if section["next_rows"] is None else f" on the next {section['next_rows']:,} rows"
        text += f"; certified <= {section['volume_bound']:.4f}{about} at {section['confidence']:g}"
    precision, recall = review.get("precision"), review.get("recall")
    if precision is not None and recall is not None:
        text += f"); review precision {precision:.4f}, recall {recall:.4f}"
    return text + ("" if precision is not None and recall is not None else ")")


def settle_band(
    curve: HeldOutCurve,
    threshold: float,
    budget: float,
    *,
    confidence: float | None,
    next_rows: int | None,
    allow_infeasible: bool,
) -> BandOutcome:
    """The band under `threshold` on `curve` within `budget` (certified at `confidence`, for the review volume of
    the `next_rows` next rows where the certificate names a sample), its section, and an empty band refused (exit
    3, naming what would fit) unless `allow_infeasible` keeps it with a warning."""
    band = review_band(curve, threshold, budget, confidence=confidence, next_rows=next_rows)
    decided, labels = curve_decisions(curve, band.upper, band.lower)
    section = ReviewBandSection(band=band, split=curve.split, figures=band_figures(decided, labels, budget=budget))
    why = why_empty(band)
    if why is None:
        return BandOutcome(band=band, section=section)
    allow = option_hint("--allow-infeasible", "allow_infeasible=True")
    if allow_infeasible:
        return BandOutcome(band=band, section=section, warnings=(f"{why}; the band is kept empty ({allow})",))
    refusal = UnreachableTarget(f"{why}, or pass {allow} to keep an empty band")
    return BandOutcome(band=band, section=section, refusal=refusal)


def band_problem_refusal(kind: str) -> str | None:
    """Why a model's problem cannot have a review band (None: it can): the band sits under an automatic cut that
    meets a target."""
    if kind in BAND_PROBLEMS:
        return None
    return (
        f"--review-budget sets a review band under an automatic cut that meets a target; the problem here is {kind}: "
        "give --problem fpor --target A (or frop)"
    )


def without_band(decision: Decision) -> Decision:
    """`decision` with no review band: no lower cut, no `info.review_band` (a decision that moved its automatic cut
    without placing a band under the new one)."""
    info = {key: value for key, value in decision.info.items() if key != BAND_INFO}
    return dataclasses.replace(decision, review_threshold=None, info=info)


MOVED_ALONE = "--adapt and --prior move the automatic cut alone"  # why a band is dropped by a new positive rate


def band_dropped(decision: Decision, why: str) -> list[str]:
    """The warning that a model's review band was dropped, and `why` (nothing where it had none)."""
    if decision.review_threshold is None:
        return []
    return [f"the review band is dropped: {why}; give it again with dmo threshold MODEL --review-budget R"]


@dataclass(frozen=True, kw_only=True)
class BandAsked:
    """What a re-fit asks of the band: `--review-budget` (None: the budget the model's band had, if any), and the
    certificate the new threshold carries, which the band's share is certified at too."""

    budget: float | None
    confidence: float | None
    next_rows: int | None
    allow_infeasible: bool


def rebanded(
    model: DmoModel, curve: HeldOutCurve, problem: str, asked: BandAsked
) -> tuple[DmoModel, BandOutcome | None, tuple[str, ...]]:
    """`model` (its threshold just moved on `curve`, its decision still holding the old band, if any) with the band
    under its new threshold: for `--review-budget`, else at the old band's budget; none where neither asks for one.
    A budget given for a problem with no target is refused (exit 2); an old band under one is dropped, with a
    warning."""
    stored = model.info.get(BAND_INFO)
    budget = asked.budget if asked.budget is not None else None if stored is None else stored["budget"]
    plain = model.with_decision(without_band(model.decision))
    if budget is None:
        return plain, None, ()
    why = band_problem_refusal(problem)
    if why is not None:
        if asked.budget is not None:
            raise DmoError(why)
        return plain, None, tuple(band_dropped(model.decision, f"the problem {problem} has no target to sit beside"))
    outcome = settle_band(
        curve,
        model.threshold,
        budget,
        confidence=asked.confidence,
        next_rows=asked.next_rows,
        allow_infeasible=asked.allow_infeasible,
    )
    decision = dataclasses.replace(
        plain.decision, review_threshold=outcome.band.lower, info={**plain.decision.info, **outcome.info()}
    )
    return model.with_decision(decision), outcome, outcome.warnings

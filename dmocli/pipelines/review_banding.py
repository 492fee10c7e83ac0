"""The review band of a trained or re-targeted binary model: where `--review-budget` puts the lower cut, what the
report says of it, and the refusal when no row fits the budget.

`dmo train` and `dmo threshold` share it: both have a held-out curve and the automatic cut just searched on it;
operating_point/review_band.py does the maths, this module the report section and the decision's file entries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dmocli.errors import UnreachableTarget, option_hint
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.review_band import (
    BAND_PROBLEMS,
    Band,
    band_figures,
    curve_decisions,
    review_band,
    why_empty,
)

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
        return {"review_band": self.band.info()}


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

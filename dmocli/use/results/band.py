"""What `dmo evaluate` and `dmo monitor` report of a model's review band (`--review-budget`): the band realized on
labeled rows, per class of decision, and the review volume of a period's rows against the budget, which needs no
label (docs/operating-points.md, "Review band")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dmocli.models.modelfile import DmoModel
from dmocli.operating_point.bounds import clopper_pearson_interval
from dmocli.operating_point.review_band import band_figures, decisions
from dmocli.report import ReportRecord


def _band_of(model: DmoModel) -> dict[str, Any] | None:
    """The model's band as its file keeps it (`info.review_band`), where it has one."""
    if model.review_threshold is None or model.threshold is None:
        return None
    return model.info.get("review_band")


@dataclass(frozen=True, kw_only=True)
class RealizedBand(ReportRecord):
    """evaluate's `review_band`: both cuts, the budget and the share training expected, and on DATA's labeled rows
    each class of decision's rows, volume, precision and recall (with their 95 % intervals)."""

    threshold: float
    review_threshold: float
    budget: float
    expected_volume: float  # the band's share of the held-out rows training counted
    rows: int
    review_volume: float
    within_budget: bool
    classes: dict[str, Any]  # positive, review, negative: rows, volume, positives, precision, recall, intervals

    @classmethod
    def of(cls, model: DmoModel, logits: np.ndarray, labels: np.ndarray) -> RealizedBand | None:
        """The band realized on labeled rows (None: the model has no band)."""
        stored = _band_of(model)
        if stored is None:
            return None
        decided = decisions(logits, model.threshold, model.review_threshold)
        figures = band_figures(decided, labels, budget=stored["budget"])
        return cls(
            threshold=model.threshold,
            review_threshold=model.review_threshold,
            budget=stored["budget"],
            expected_volume=stored["volume"],
            rows=figures["rows"],
            review_volume=figures["review_volume"],
            within_budget=figures["within_budget"],
            classes=figures["classes"],
        )

    def line(self) -> str:
        """The band on DATA as a person reads it: the review volume against the budget, then each class."""
        within = "within" if self.within_budget else "OVER"
        parts = [
            f"review band: {self.review_volume:.4f} of the rows to review ({within} the budget {self.budget:g}; "
            f"training expected {self.expected_volume:.4f})"
        ]
        for name, figures in self.classes.items():
            precision, recall = figures.get("precision"), figures.get("recall")
            shown = "-" if precision is None else f"{precision:.4f}"
            parts.append(
                f"{name}: {figures['volume']:.4f} of rows, precision {shown}, "
                f"recall {'-' if recall is None else f'{recall:.4f}'}"
            )
        return "; ".join(parts)


@dataclass(frozen=True, kw_only=True)
class ReviewVolume(ReportRecord):
    """monitor's `review_volume` of a section: the share of its rows the band sends to review (no label needed),
    its 95 % Clopper-Pearson interval, and the budget; `over_budget` when the interval lies wholly above it (the
    period's rows rule the budget out), `within_budget` when the share itself is within it."""

    budget: float
    expected_volume: float  # the band's share of the held-out rows training counted
    rows: int
    review_rows: int
    volume: float | None  # None: no rows
    volume_interval: list[float] | None
    within_budget: bool | None
    over_budget: bool | None

    @classmethod
    def of(cls, model: DmoModel, logits: np.ndarray) -> ReviewVolume | None:
        """The review volume of a section's logits (None: the model has no band)."""
        stored = _band_of(model)
        if stored is None:
            return None
        rows = int(np.asarray(logits).size)
        review = int(np.count_nonzero(decisions(logits, model.threshold, model.review_threshold) == 1))
        interval = clopper_pearson_interval(review, rows)
        budget = stored["budget"]
        return cls(
            budget=budget,
            expected_volume=stored["volume"],
            rows=rows,
            review_rows=review,
            volume=review / rows if rows else None,
            volume_interval=interval,
            within_budget=None if not rows else review / rows <= budget + 1e-12,
            over_budget=None if interval is None else interval[0] > budget,
        )

    def line(self) -> str:
        """The period's review volume against the budget."""
        if self.volume is None:
            return "review volume: no rows"
        low, high = self.volume_interval
        if self.over_budget:
            verdict = f"OVER the budget {self.budget:g}: the interval lies above it"
        elif self.within_budget:
            verdict = f"within the budget {self.budget:g}"
        else:
            verdict = f"above the budget {self.budget:g}, within chance"
        return (
            f"review volume: {self.volume:.4f} [{low:.4f}, {high:.4f}] of {self.rows:,} rows ({verdict}; training "
            f"expected {self.expected_volume:.4f})"
        )

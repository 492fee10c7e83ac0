"""Alert budgets: at most a share R of rows flagged (`--max-alert-rate R`), or at most N alerts per M rows
(`--max-alerts N --per-rows M`, the share N/M), as a constraint on the cut the exact search picks.

A review team sizes its work in alerts, not in precision: "400 cases a day". The share of rows a cut flags needs
no label, and it only grows as the threshold falls, which makes every certificate here exact and free of any
selection effect (docs/operating-points.md, "Alert budgets"):

- without a confidence, a cut is within the budget when it flags at most floor(R x n) of the n held-out rows;
- with `--confidence C` and no sample size, the population's flagged share: a cut is within when the one-sided
  Clopper-Pearson upper bound of its share, at C, is at most R. The cuts whose true share is over R are those
  below one threshold; the first of them flags at least a Binomial(n, R') count, R' > R, and its bound is at
  most R with probability at most 1 - C, so every cut kept is within the budget with probability C at least;
- with a confidence and a next period of M rows (`--per-rows M`, or `--new-rows M` beside `--max-alert-rate`),
  the count those M rows will flag: the n held-out rows and the M next ones are exchangeable, so given the total
  T flagged among the n + M, the held-out count K is Hypergeometric(n + M, T, n). The next rows exceed the
  budget's y = floor(R x M) alerts only if T >= k + y + 1, where the held-out count is k, and then K <= k has
  probability at most P(K <= k | T = k + y + 1), which must be at most 1 - C. That tail grows with k, so the
  cuts that pass are those flagging at most some k_max held-out rows: the first cut whose next rows exceed the
  budget (which the new rows decide) holds one held-out row more than the rows ranked above the (y+1)-th next
  alert, and those are below k_max + 1 with probability at most 1 - C (the negative-hypergeometric count is
  stochastically above the hypergeometric one the test uses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from dmocli.errors import DmoError
from dmocli.operating_point.bounds import REPORT_LEVEL, clopper_pearson_upper, fewest_passing, least_passing

PER_THOUSAND = 1_000  # the period of a --max-alert-rate budget's expected alerts, where no period was given


def allowed_alerts(share: float, rows: int) -> int:
    """The most alerts `rows` rows may hold within a share: floor(share x rows), 1e-9 absorbing 0.1 x 1000."""
    return min(rows, math.floor(share * rows + 1e-9))


def excess_risk(flagged: int, rows: int, *, next_rows: int, allowed: int) -> float:
    """P(K <= flagged | T = flagged + allowed + 1), K ~ Hypergeometric(rows + next_rows, T, rows): how likely the
    held-out rows show as few as `flagged` alerts when the next `next_rows` rows hold more than `allowed` (module
    docstring). 0 where no pool of rows could hold that many alerts."""
    from scipy.stats import hypergeom

    total = flagged + allowed + 1
    if total > rows + next_rows or allowed >= next_rows:
        return 0.0
    return float(hypergeom.cdf(flagged, rows + next_rows, total, rows))


def most_certified(rows: int, share: float, *, confidence: float, next_rows: int | None) -> int:
    """The most held-out rows of `rows` a cut may flag and still be certified within `share` at `confidence`
    (for the population's share, or the next `next_rows` rows' count); -1 when not even a cut flagging none is."""
    alpha = 1.0 - confidence
    if next_rows is None:
        if share >= 1.0:
            return rows
        passing: Callable[[int], bool] = lambda k: float(clopper_pearson_upper(k, rows, confidence)) <= share  # noqa: E731
    else:
        allowed = allowed_alerts(share, next_rows)
        passing = lambda k: excess_risk(k, rows, next_rows=next_rows, allowed=allowed) <= alpha  # noqa: E731
    if not passing(0):
        return -1
    if passing(rows):
        return rows
    # passing holds up to a count and fails above it: the least failing count, less one
    return least_passing(lambda k: not passing(k), 1, rows) - 1


def certified_share(flagged: int, rows: int, *, confidence: float, next_rows: int | None) -> float:
    """The share a cut flagging `flagged` of `rows` held-out rows is certified not to exceed at `confidence`: the
    Clopper-Pearson upper bound of the population's share, or the fewest alerts y the next `next_rows` rows are
    certified to stay within (excess_risk at y at most 1 - C), over `next_rows`."""
    if next_rows is None:
        return float(clopper_pearson_upper(flagged, rows, confidence))
    return most_alerts_bound(flagged, rows, next_rows=next_rows, level=confidence) / next_rows


def most_alerts_bound(flagged: int, rows: int, *, next_rows: int, level: float) -> int:
    """The fewest alerts y the next `next_rows` rows hold more than with probability at most 1 - `level`, given
    `flagged` of `rows` held-out rows flagged (an exact, distribution-free prediction bound)."""
    alpha = 1.0 - level
    if excess_risk(flagged, rows, next_rows=next_rows, allowed=0) <= alpha:
        return 0
    return least_passing(
        lambda allowed: excess_risk(flagged, rows, next_rows=next_rows, allowed=allowed) <= alpha, 1, next_rows
    )


def alerts_interval(flagged: int, rows: int, *, next_rows: int, level: float = REPORT_LEVEL) -> list[int]:
    """The two-sided prediction interval, at `level`, of the alerts the next `next_rows` rows bring: each side
    most_alerts_bound at (1 + level) / 2, the lower one as the bound of the rows not flagged."""
    side = 1.0 - (1.0 - level) / 2.0
    upper = most_alerts_bound(flagged, rows, next_rows=next_rows, level=side)
    lower = next_rows - most_alerts_bound(rows - flagged, rows, next_rows=next_rows, level=side)
    return [lower, upper]


@dataclass(frozen=True)
class AlertBudget:
    """At most `share` of rows flagged; `alerts` per `per_rows` rows where it was given so (share = N/M).

    The period a certificate is about is `per_rows`, or for a share the `--new-rows` sample (`period`); without
    either, the population's share."""

    share: float
    alerts: int | None = None
    per_rows: int | None = None

    @classmethod
    def asked(cls, rate: float | None, alerts: int | None, per_rows: int | None) -> AlertBudget | None:
        """The budget the options ask for (None: none). The declarations refuse a rate outside (0, 1], a count
        without its period and both kinds at once; what no rule between options can say (N <= M) is refused
        here."""
        if alerts is not None and per_rows is not None:
            if alerts > per_rows:
                raise DmoError(
                    f"--max-alerts {alerts} is more than --per-rows {per_rows}: a period of {per_rows:,} rows holds "
                    f"at most {per_rows:,} alerts; give N <= M"
                )
            return cls(alerts / per_rows, alerts, per_rows)
        return None if rate is None else cls(float(rate))

    @classmethod
    def from_info(cls, info: Any) -> AlertBudget | None:
        """The budget a model file's `info.alert_budget` keeps (None: none); ValueError when malformed."""
        if info is None:
            return None
        share = info.get("max_alert_rate") if isinstance(info, dict) else None
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < share <= 1.0:
            raise ValueError("the model's alert_budget has no max_alert_rate in (0, 1]")
        alerts, per_rows = info.get("max_alerts"), info.get("per_rows")
        for value in (alerts, per_rows):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError("the model's alert_budget has a count that is not a whole number")
        return cls(float(share), alerts, per_rows)

    def info(self) -> dict[str, Any]:
        """What the model file keeps of the budget (`info.alert_budget`) and the report repeats."""
        return {"max_alert_rate": self.share, "max_alerts": self.alerts, "per_rows": self.per_rows}

    def describe(self) -> str:
        """The budget as a user asked for it: `at most 400 alerts per 10,000 rows`, `at most 2% of rows`."""
        if self.alerts is not None and self.per_rows is not None:
            return f"at most {self.alerts:,} alerts per {self.per_rows:,} rows"
        return f"at most {self.share * 100:.4g}% of rows flagged"

    def period(self, new_rows: int | None) -> int | None:
        """The next rows a certificate is about: `--per-rows M`, else the `--new-rows` sample (None: population)."""
        return self.per_rows if self.per_rows is not None else new_rows

    def admissible(
        self, flagged: np.ndarray, rows: int, *, confidence: float | None, next_rows: int | None
    ) -> np.ndarray:
        """Per cut (flagged[i]: the held-out rows cut i flags, of `rows`), whether it keeps within the budget: as
        measured without a confidence, else certified (module docstring)."""
        flagged = np.asarray(flagged)
        if confidence is None:
            return flagged <= allowed_alerts(self.share, rows)
        return flagged <= most_certified(rows, self.share, confidence=confidence, next_rows=next_rows)

    def most_admissible(self, rows: int, *, confidence: float | None, next_rows: int | None) -> int:
        """The most held-out rows an admissible cut may flag (-1: none, not even a cut flagging none)."""
        if confidence is None:
            return allowed_alerts(self.share, rows)
        return most_certified(rows, self.share, confidence=confidence, next_rows=next_rows)

    def smallest_met(self, flagged: int, rows: int, *, confidence: float | None, next_rows: int | None) -> float:
        """The smallest budget (a share) a cut flagging `flagged` of `rows` keeps within: what would be met."""
        if confidence is None:
            return flagged / rows
        return certified_share(flagged, rows, confidence=confidence, next_rows=next_rows)

    def rows_needed(self, flagged: int, rows: int, *, confidence: float, next_rows: int | None) -> int | None:
        """The held-out rows at which a cut flagging the share `flagged / rows` would be certified within the
        budget (the share held); None where no number would do (the share is not below the budget, or the next
        period's own scatter is too wide)."""
        share = flagged / rows
        if not share < self.share:
            return None
        budget = AlertBudget(self.share)

        def passing(count: int) -> bool:
            return budget.most_admissible(count, confidence=confidence, next_rows=next_rows) >= math.floor(
                share * count
            )

        return fewest_passing(passing, 1 << 32)

    def expected_alerts(self, flagged: int, rows: int, *, next_rows: int | None) -> dict[str, Any]:
        """The alerts the next period is expected to bring (its rows: `next_rows`, `per_rows`, else per
        PER_THOUSAND rows): the held-out share times the period, and the exact prediction interval at
        REPORT_LEVEL (alerts_interval)."""
        period = self.period(next_rows) or PER_THOUSAND
        return {
            "period_rows": period,
            "expected_alerts": flagged / rows * period,
            "alerts_interval": alerts_interval(flagged, rows, next_rows=period),
            "budget_alerts": allowed_alerts(self.share, period),
        }


@dataclass(frozen=True, kw_only=True)
class BudgetReport:
    """The train and threshold reports' `alert_budget` section: the budget, the share of the held-out rows the cut
    kept flags, its certified bound (with a confidence) and the alerts the next period is expected to bring."""

    budget: AlertBudget
    flagged: int
    rows: int
    confidence: float | None
    new_rows: int | None  # the --new-rows sample of the search (None: the population)

    def to_dict(self) -> dict[str, Any]:
        period = self.budget.period(self.new_rows)
        certified = None
        if self.confidence is not None:
            certified = certified_share(self.flagged, self.rows, confidence=self.confidence, next_rows=period)
        share = self.flagged / self.rows
        return {
            "alert_budget": {
                **self.budget.info(),
                "rows": self.rows,
                "flagged": self.flagged,
                "flagged_share": share,
                "confidence": self.confidence,
                "certified_rows": period,  # the next rows the certificate is about (None: the population's share)
                "certified_share": certified,
                "within": bool((share if certified is None else certified) <= self.budget.share + 1e-12),
                **self.budget.expected_alerts(self.flagged, self.rows, next_rows=self.new_rows),
            }
        }


def budget_refusal(
    budget: AlertBudget, flagged: int, rows: int, *, confidence: float | None, new_rows: int | None, where: str
) -> str:
    """Why no cut keeps within `budget` on `where`, where the cut nearest to it flags `flagged` of `rows`
    held-out rows, and what would be met: the smallest budget that cut keeps within, and the held-out rows that
    would certify this one at the share it flags."""
    period = budget.period(new_rows)
    about = ""
    if confidence is not None:
        sample = "the population's flagged share" if period is None else f"the next {period:,} rows"
        about = f", certified at {confidence:g} for {sample}"
    smallest = budget.smallest_met(flagged, rows, confidence=confidence, next_rows=period)
    text = (
        f"the alert budget ({budget.describe()}{about}) is not met on {where}: the nearest cut flags {flagged:,} of "
        f"{rows:,} rows ({flagged / rows:.2%}), and the smallest budget it keeps within is {smallest:.3%} of rows"
    )
    needed = None if confidence is None else budget.rows_needed(flagged, rows, confidence=confidence, next_rows=period)
    if needed is not None and needed > rows:
        text += f"; this budget would be certified at that share on about {needed:,} held-out rows"
    return text + "; give a larger budget (--max-alert-rate, or --max-alerts with more --per-rows)"


def summary_line(section: dict[str, Any]) -> str:
    """The report's `alert_budget` section in one line, for the command's summary."""
    budget = AlertBudget.from_info(section)
    text = (
        f"alert budget: {budget.describe()}; the cut flags {section['flagged_share']:.2%} of the {section['rows']:,} "
        "held-out rows"
    )
    if section["certified_share"] is not None:
        rows = section["certified_rows"]
        about = "the population" if rows is None else f"the next {rows:,} rows"
        text += f" (certified <= {section['certified_share']:.2%} for {about} at {section['confidence']:g})"
    low, high = section["alerts_interval"]
    return (
        f"{text}; expected {section['expected_alerts']:,.1f} alerts per {section['period_rows']:,} rows (95% "
        f"interval {low:,}-{high:,}, budget {section['budget_alerts']:,})"
    )


def period_alerts(budget: AlertBudget, flagged: int, rows: int, *, confidence: float) -> dict[str, Any]:
    """What `dmo monitor` reads of a section against the budget: the share of its own rows the threshold flags
    (observed: no label needed), its two-sided Clopper-Pearson interval at `confidence`, the alerts a period
    (`per_rows`, else PER_THOUSAND rows) brings at that share, and whether the budget is exceeded beyond chance:
    the share's one-sided lower bound at `confidence` above the budget's share."""
    from dmocli.operating_point.bounds import clopper_pearson_interval, clopper_pearson_lower

    period = budget.per_rows or PER_THOUSAND
    low, high = clopper_pearson_interval(flagged, rows, confidence) if rows else [0.0, 1.0]
    lower = float(clopper_pearson_lower(flagged, rows, confidence)) if rows else 0.0
    return {
        **budget.info(),
        "rows": rows,
        "flagged": flagged,
        "flagged_share": flagged / rows if rows else 0.0,
        "share_interval": [low, high],
        "period_rows": period,
        "expected_alerts": flagged / rows * period if rows else 0.0,
        "alerts_interval": [low * period, high * period],
        "budget_alerts": allowed_alerts(budget.share, period),
        "exceeded": lower > budget.share + 1e-12,
    }

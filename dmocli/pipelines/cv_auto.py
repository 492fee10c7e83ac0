"""`--cv auto`: cross-fit the threshold on K folds when the held-out positives would be few, hold out one
stratified split when they are many, decided from the label counts before any model is fitted.

Why: cross-fitting fits the model K more times so that every positive row is held out once; the threshold then
rests on all of them. That matters when positives are few, and stops mattering once one held-out split already
holds enough of them that the metric at the threshold is known to within a small margin. Past that count the K
extra fits mostly cost time (at millions of rows, they are the whole cost).

The rule, on the width of the certificate rather than on taste: a rate p measured on n held-out positives has
a one-sided Clopper-Pearson lower bound at level c (recall is counted over the positives; fpor's precision over
the rows predicted positive, recall x positives / precision of them, unknown before training: at a low recall
fewer than the rule counts). `held_out_positives_needed` is the least n at which
p - bound <= TOLERANCE, with p the target of fpor/frop (0.5, the widest, for ofbs) and c the --confidence
level (REPORT_LEVEL, 0.95, without one). One stratified split of fraction SPLIT_FRAC = 1/K holds
round(f x positives) of them: auto holds out that split (as --val-frac f would) when it holds at least the
needed count, and cross-fits K folds otherwise. With --val the held-out positives are --val's: the threshold is
fitted on --val when it holds enough, else --val's rows are pooled into the K folds (as --cv K --val does).
At target 0.8 and 0.95 the count is 1,194 held-out positives, so one split from 5,970 positives on.
docs/training.md#cv-auto gives the table and the measured cost. It is asked for, not the default: just above the
count the five-fold ensemble's model was measurably better than the split's one model, a cost this rule on the
threshold's precision does not see (bench/cv_auto.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from dmocli.operating_point.bounds import REPORT_LEVEL, clopper_pearson_lower, fewest_passing
from dmocli.operating_point.problems import Problem

DEFAULT_FOLDS = 5
SPLIT_FRAC = 1.0 / DEFAULT_FOLDS  # the share each fold holds out: the split's model trains on a fold model's share
TOLERANCE = 0.02  # the largest margin between the rate and its lower bound that one held-out split may leave
WIDEST_RATE = 0.5  # where the binomial bound is widest: ofbs has no target rate to measure at


@functools.lru_cache(maxsize=64)
def held_out_positives_needed(rate: float, confidence: float) -> int:
    """The least n of held-out positives at which a rate of `rate` measured on them has its one-sided
    Clopper-Pearson lower bound at `confidence` within TOLERANCE of it."""

    def close(trials: int) -> bool:  # rate x trials successes, not floored: the margin then shrinks with every trial
        return rate - float(clopper_pearson_lower(rate * trials, trials, confidence)) <= TOLERANCE

    needed = fewest_passing(close, 1 << 40)
    assert needed is not None  # the margin shrinks like 1/sqrt(n) for any rate in (0, 1)
    return needed


@dataclass(frozen=True)
class CvRule:
    """What `--cv auto` decided and the counts it decided on: the report's `cv_rule`."""

    held_out: str  # "split": DATA's positives, of which SPLIT_FRAC would be held out; "val": --val's positives
    positives: int  # labeled positive rows counted: DATA's, or --val's
    held_out_positives: int  # of those, the ones the held-out split holds
    rate: float  # the rate the margin is measured at (the target; 0.5 for ofbs)
    confidence: float  # the level of the bound
    needed: int  # held-out positives that keep the bound within TOLERANCE of the rate
    folds: int  # the folds cross-fitted when the split holds too few

    @property
    def decision(self) -> str:
        """ "split" (one held-out split of DATA), "val" (the threshold on --val) or "folds" (K-fold cross-fitting)."""
        return self.held_out if self.held_out_positives >= self.needed else "folds"

    def report(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "held_out": self.held_out,
            "positives": self.positives,
            "held_out_positives": self.held_out_positives,
            "needed": self.needed,
            "rate": self.rate,
            "confidence": self.confidence,
            "tolerance": TOLERANCE,
            "split_frac": SPLIT_FRAC if self.held_out == "split" else None,
            "folds": self.folds if self.decision == "folds" else 0,
        }


def decide(
    *, positives: int, problem: Problem, confidence: float | None, held_out: str = "split", folds: int = DEFAULT_FOLDS
) -> CvRule:
    """The rule for a binary problem with `positives` labeled positive rows: DATA's (`held_out` "split", of which
    round(SPLIT_FRAC x positives) would be held out, as the stratified split draws them) or --val's ("val")."""
    rate = problem.target if problem.kind in ("fpor", "frop") and problem.target is not None else WIDEST_RATE
    level = REPORT_LEVEL if confidence is None else confidence
    held = int(round(SPLIT_FRAC * positives)) if held_out == "split" else positives
    return CvRule(held_out, positives, held, rate, level, held_out_positives_needed(rate, level), folds)


def rule_line(rule: dict[str, Any]) -> str:
    """The summary's line on what --cv auto decided (the report's `cv_rule`), with the counts it rests on."""
    held, folds = rule["held_out_positives"], rule["decision"] == "folds"
    where = "--val" if rule["held_out"] == "val" else f"a held-out {rule['split_frac']:g} of DATA"
    count = f"{where} {'would hold' if folds and rule['held_out'] == 'split' else 'holds'} {held:,} positives"
    versus = f"{'fewer than' if folds else 'at least'} the {rule['needed']:,} that keep the {rule['confidence']:g} "
    versus += f"lower bound within {rule['tolerance']:g} of {rule['rate']:g}"
    if rule["decision"] == "split":
        decided = f"one held-out split ({rule['split_frac']:g} of DATA), no folds"
    elif rule["decision"] == "val":
        decided = "threshold fitted on --val, no folds"
    else:
        decided = f"{rule['folds']} folds" + (" (--val pooled in)" if rule["held_out"] == "val" else "")
    return f"cv auto: {decided}: {count}, {versus} (docs/training.md#cv-auto)"

"""Cross-fitted operating points (`dmo train --cv K`): an honest score for every training row, so the exact
threshold search counts every positive instead of the few of a validation split.

DATA's labeled rows are dealt into K stratified folds; the solver is fitted K
times, each time without one fold, and that fold's rows are scored by the model
that never saw them. The exact search then runs on these out-of-fold scores,
and the model that is saved comes from one of three `transfer`s
(docs/operating-points.md has the measurements behind the default):

- `ensemble`: no final fit; the K fold models are kept and averaged
  (models/networks.FoldEnsemble: a binary model's probabilities, through one
  Platt map of the out-of-fold logits), and the threshold is searched on the
  mapped out-of-fold scores; boosted trees disagree most at the top, where the
  average of their probabilities falls far below each member's (a cut from the
  top of that curve can lie above every score of the ensemble: such a cut is
  refused as flagging nothing, pointing to `rank`; carrying every gbdt cut by
  rank to the ensemble's in-sample scores measured worse on test, docs/gbdt.md);
- `apply`: a final model is fitted on all rows and the out-of-fold threshold is
  used as it is (scikit-learn's refit-and-apply);
- `rank`: as `apply`, but the out-of-fold scores are carried to the final
  model's scores of the training rows by rank, so its threshold flags the share
  of training rows the out-of-fold cut flagged.

Carried (`rank`), the search, its certificate and the held-out curve the model file
keeps are on the saved model's scale, with the out-of-fold counts
(pipelines/thresholding.settle_threshold).

Folds run one after the other, each within the memory of one fit. Under torchrun each fold's fit is the
distributed fit, and the folds are one process's (pipelines/shared_folds.py).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from dmocli import progress
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.gain import RowGains
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import search, search_curve
from dmocli.pipelines.shared_folds import Placement
from dmocli.prep.dataset import Prepared, stratified_folds
from dmocli.solvers.base import FitContext, FitResult, InMemorySolver, SplitData

if TYPE_CHECKING:
    import torch


@dataclass
class CrossFitted:
    """Out-of-fold logits of the labeled rows ((n,), or (n, K) for a multi-class model), their labels, and each
    row's fold."""

    logits: np.ndarray
    y: np.ndarray
    folds: np.ndarray
    seconds: float
    traces: list[dict[str, Any]]  # each fold's solver trace: where it stopped early (InMemorySolver.refit_params)
    models: list[FitResult] = field(default_factory=list)  # each fold's fit, when kept for an ensemble
    kind: str = "linear"  # the model kind fitted (models/architecture.py)
    mapped_by: tuple[float, float] | None = None  # the probability map these logits are on (`mapped`)

    def ensemble(self, member_map: tuple[float, float] | None = None) -> FitResult:
        """The kept fold models as one fit (their probabilities averaged through `member_map` where there is one,
        else their logits), and the mean of their own thresholds (where every fold's solver learned one), on
        the map's scale, as the ensemble's own."""
        from dmocli.models.networks import FoldEnsemble

        own = [fit.threshold for fit in self.models]
        warnings = list(dict.fromkeys(w for fit in self.models for w in fit.warnings))
        threshold = None if None in own else float(np.mean(own))
        trace: dict[str, Any] = {"ensemble_of_folds": len(self.models), "fold_traces": self.traces}
        if member_map is not None:
            slope, intercept = member_map
            threshold = None if threshold is None else slope * threshold + intercept
            trace["member_map"] = {"slope": slope, "intercept": intercept}
        return FitResult(
            network=FoldEnsemble([fit.network for fit in self.models], member_map),
            trace=trace,
            threshold=threshold,
            warnings=warnings,
        )

    def member_map(self) -> tuple[float, float] | None:
        """The Platt map (slope, intercept) of a binary model's out-of-fold logits, under which the ensemble
        averages its members' probabilities; None for a multi-class model, or when the logits do not rank the
        labels the right way round (a slope <= 0 would reverse or flatten them)."""
        from dmocli.operating_point.calibration import fit_platt

        fit = fit_platt(self.logits, self.y, "cv") if self.logits.ndim == 1 else None
        return None if fit is None or fit.slope <= 0 else (fit.slope, fit.intercept)

    def mapped(self, member_map: tuple[float, float]) -> "CrossFitted":
        """These out-of-fold logits on the map's scale: one member's answer there is its own mapped logit, so the
        threshold searched on them is the ensemble's."""
        slope, intercept = member_map
        logits = (slope * self.logits.astype(np.float64) + intercept).astype(np.float32)
        return dataclasses.replace(self, logits=logits, mapped_by=member_map)

    def carries_by_rank(self, transfer: str) -> bool:
        """Whether the out-of-fold scores are carried to the saved model's own scores of the training rows by rank
        before the search: `rank` only. A gbdt `ensemble` averages its members' probabilities, a scale compressed
        at the top, but carrying its cut by rank to its own (in-sample) scores of the training rows measured
        worse on test on every problem (bench/gbdt_small.py, 207 paired runs: objective -0.030 +- 0.013, OFBS
        -0.026 +- 0.011; docs/gbdt.md), so it keeps the out-of-fold scale, and a cut above every score it gives
        its training rows is refused as flagging nothing (thresholding.flags_none_of_its_rows)."""
        return transfer == "rank"


def cross_fit(
    solver: InMemorySolver,
    data: Prepared,
    *,
    k: int,
    ctx: FitContext,
    to_tensors: Callable[[Prepared], SplitData],
    device: torch.device,
    pooled_val: int = 0,
    keep_models: bool = False,
) -> CrossFitted:
    """K fits, each scoring the fold it did not see; the folds' models are fitted as the final one is (no
    validation split), so the out-of-fold scores stand for the final model's scores on new rows. `keep_models`
    keeps the K fits (for `ensemble`; otherwise each is dropped once it has scored its fold). Under torchrun
    (`ctx.group`) `data` is this process's rows, the last `pooled_val` rows over all processes being --val's, and
    what is returned is every process's, in one process's order."""
    import torch

    from dmocli.models.networks import logits_of

    started = time.perf_counter()
    placement = None if ctx.group is None else Placement.of(data.n, pooled_val, ctx.group)
    y = data.y if placement is None else placement.gathered(data.y)
    every_fold = stratified_folds(y, k, seed=ctx.seed, class_names=ctx.class_names, val_pooled=pooled_val > 0)
    folds = every_fold if placement is None else placement.own_folds(every_fold, k)
    outputs = ctx.architecture.n_outputs  # one logit for a binary model, one per class for a multi-class one
    logits = np.empty(data.n if outputs == 1 else (data.n, outputs), dtype=np.float32)
    traces: list[dict[str, Any]] = []
    kept: list[FitResult] = []
    with progress.task("cross-fitting", total=k, unit="folds") as bar:
        for fold in range(k):
            held = folds == fold
            result = solver.fit(to_tensors(data.take(np.flatnonzero(~held))), None, ctx)
            scores = logits_of(result.network.eval(), torch.as_tensor(data.X[held], device=device))
            logits[held] = scores.float().cpu().numpy()
            traces.append(result.trace)
            if keep_models:
                kept.append(result)
            del result
            bar.advance(1)
    if placement is not None:
        logits = placement.gathered(logits)
    return CrossFitted(logits, y, every_fold, time.perf_counter() - started, traces, kept, ctx.architecture.kind)


def cv_report(
    crossed: CrossFitted,
    problem: Problem,
    confidence: float | None,
    new_rows: int | None = None,
    *,
    gains: RowGains | None = None,
) -> dict[str, Any]:
    """The report's `cv` section: the folds, each fold's own exact operating point on its out-of-fold scores (the
    spread one validation split of that size would have shown), and the range of their thresholds. `gains`: the
    out-of-fold rows' gains, which --problem value's search weighs."""
    per_fold = _fold_points(crossed, problem, confidence, new_rows, gains=gains)
    thresholds = [fold["threshold"] for fold in per_fold]
    return {
        "folds": int(crossed.folds.max()) + 1,
        "per_fold": per_fold,
        "threshold_spread": [min(thresholds), max(thresholds)] if thresholds else None,
        "fit_seconds": crossed.seconds,
    }


def _fold_points(
    crossed: CrossFitted,
    problem: Problem,
    confidence: float | None,
    new_rows: int | None,
    *,
    gains: RowGains | None = None,
) -> list[dict[str, Any]]:
    out = []
    for fold in range(int(crossed.folds.max()) + 1):
        held = crossed.folds == fold
        if not crossed.y[held].any():
            continue
        if gains is not None:  # --problem value: the fold's own rows' gains
            curve = ScoreCurve.from_scores(crossed.logits[held], crossed.y[held], gains=gains.take(held))
            point = search_curve(curve, problem, confidence, new_rows)
        else:
            point = search(crossed.logits[held], crossed.y[held], problem, confidence, new_rows=new_rows)
        out.append(
            {
                "fold": fold,
                "n": int(held.sum()),
                "n_pos": int(crossed.y[held].sum()),
                "threshold": point.threshold,
                "precision": point.precision,
                "recall": point.recall,
                "f_beta": point.f_beta,
                "feasible": point.feasible,
            }
        )
    return out

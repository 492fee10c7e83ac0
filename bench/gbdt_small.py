"""Boosted trees when positives are few: dmo's `--model gbdt` against XGBoost and HistGradientBoosting used directly.

Every binary set of ../shared/data (train + val + test pooled) and one generated set (`generated`: 20 features,
a non-linear label, about 5 % positives) is subsampled to 20, 50, 100 and 300 positives (negatives kept at the
set's ratio, capped at --neg-cap; a size above the set's positives is skipped), then split, stratified, into 80 %
DATA and 20 % test, --resplits times per size (a new subsample each time). On each, for FPOR 0.8, FROP 0.8 and
OFBS (objective: test recall, precision, F1; counted 0 where the test split misses the target or the run is
refused because the target is out of reach on the held-out scores):

- `dmo_gbdt`: `dmo train --model gbdt` with today's defaults (5-fold cross-fitting, fold models averaged);
- `dmo_gbdt_prev`: the same with `--param stop-min-positives=0`: early stopping on the held-out tenth whatever
  its positives, the behaviour before the rule (commit 737d19d);
- `dmo_gbdt_wbins` (not run unless named in --methods): today's defaults with the histogram bins sketched on the
  class-weighted rows, as before 2026-11-27 (solvers/boosting.matrix now bins the unweighted rows);
- `dmo_gbdt_logitmean` (not run unless named): today's defaults, but the fold ensemble answers the mean of its
  members' mapped logits (slope * logit + intercept, the Platt map of the out-of-fold logits) instead of the logit
  of their mean probability: the same out-of-fold curve and threshold, the ensemble's test scores on the curve's
  scale where members disagree (probability averaging pulls disagreeing rows toward the middle);
- `xgb_fixed_oof`: xgboost.XGBClassifier(300 rounds, eta 0.05, depth 6, scale_pos_weight = neg/pos), the exact
  threshold searched (dmocli.operating_point.search) on its own 5-fold out-of-fold margins, then refit on DATA;
- `hgb_oof`: HistGradientBoostingClassifier(class_weight="balanced"), the same out-of-fold threshold;
- `dmo_linear`: `dmo train` (linear wce, defaults);
- `dmo_auto` (not run unless named in --methods): `dmo train --model auto` (linear and gbdt on the same folds, the
  better out-of-fold objective kept), trained once per problem, since the choice depends on the objective; its
  rows name the kind kept (`chosen`). Every row has `oof_objective`, the objective at the threshold on the held-out
  curve it was searched on: out-of-fold minus test objective is each method's optimism, and dmo_auto's beside
  dmo_gbdt's and dmo_linear's is what choosing on that curve adds to it;
- `xgb_refold` (not run unless named in --methods): `xgb_fixed_oof` again with other folds (another fold seed):
  the same model, so its difference from `xgb_fixed_oof` is what the fold assignment alone moves the objective,
  the noise floor of every paired difference here (it is a control, never the "best method" of a set);
- `dmo_gbdt_rep` (not run unless named; it also gives `dmo_gbdt`): today's dmo gbdt, its cross-fitting repeated
  over 5 fold assignments (the first --seed's, as today; the others' seeds drawn from (seed, repeat)); the saved
  model is today's, and the threshold is searched on the first 3 or 5 assignments' out-of-fold curves pooled
  (`rep3_pool`, `rep5_pool`: each row 3 or 5 times) or on each row's mean out-of-fold logit (`rep3_mean`,
  `rep5_mean`), on the model's scale (the first assignment's Platt map, as the fold ensemble's);
  `dmo_gbdt_rep_apply`: the same with `--cv-transfer apply` (`dmo_gbdt_apply`, `apply_rep3_pool`, ...);
- `--variant NAME:KEY=VALUE,...`: more dmo gbdt runs with these `--param`s (how the rule was chosen);
  `cv-transfer=apply` among them sets `--cv-transfer` instead.

Each method trains once per (set, size, resplit); the threshold of each problem is searched on the held-out curve
the model keeps (dmo: the out-of-fold scores, as `dmo threshold MODEL` re-targets), so the three problems share
one fit. Paired differences (dmo_gbdt minus each method) have standard errors over resplits (each resplit's
three problems averaged first, so the SE counts independent draws).

    python bench/gbdt_small.py --resplits 3          # the short run
    python bench/gbdt_small.py --first-resplit 10 --sizes 20 50 --methods dmo_gbdt xgb_fixed_oof xgb_refold
    nice -n 19 python bench/gbdt_small.py --first-resplit 40 --resplits 5 --methods dmo_gbdt_rep xgb_fixed_oof
    nice -n 10 python bench/gbdt_small.py            # 10 resplits; writes bench/results/gbdt_small.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BINARY_SETS, DEFAULT_DATA, print_table, write_results  # noqa: E402
from targets_on_new_data import PROBLEMS, outcome, pooled, resplit, test_metrics  # noqa: E402

SIZES = (20, 50, 100, 300)
BASE_METHODS = ("dmo_gbdt", "dmo_gbdt_prev", "xgb_fixed_oof", "hgb_oof", "dmo_linear")
CONTROLS = ("xgb_refold",)  # same model as a method above, other folds: the noise floor, never "the best"
REPEATS = 5  # `dmo_gbdt_rep`: fold assignments cross-fitted per draw (the first is today's)
REPEAT_VARIANTS = ("rep3_pool", "rep3_mean", "rep5_pool", "rep5_mean")
REFOLD_SEED = 7919  # added to the resplit's seed for xgb_refold's folds
DMO_PARAMS = {"dmo_gbdt": {}, "dmo_gbdt_prev": {"stop-min-positives": "0"}}
GENERATED = "generated"


def generated_pool(seed: int = 0, rows: int = 60_000) -> pa.Table:
    """20 features, a label from interactions and a threshold on a non-linear score (about 5 % positives): a set
    where trees can beat a linear model, with positives enough to subsample any size."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, 20)).astype(np.float32)
    score = X[:, 0] * X[:, 1] + np.abs(X[:, 2]) + 0.5 * X[:, 3] + np.where(X[:, 4] > 0.5, 1.0, 0.0)
    y = (score + 0.8 * rng.standard_normal(rows) > 2.6).astype(np.int64)
    return pa.table({**{f"x{j}": X[:, j] for j in range(20)}, "label": y})


def subsample(table: pa.Table, positives: int, seed: int, neg_cap: int) -> pa.Table | None:
    """`positives` positive rows and negatives at the set's ratio (at most `neg_cap`), drawn without replacement;
    None where the set has fewer positives."""
    y = table.column("label").to_numpy()
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    if positives > pos.size:
        return None
    n_neg = min(int(round(positives * neg.size / pos.size)), neg_cap, neg.size)
    rng = np.random.default_rng(1_000_003 * positives + seed)
    rows = np.sort(np.concatenate([rng.choice(pos, positives, replace=False), rng.choice(neg, n_neg, replace=False)]))
    return table.take(pa.array(rows))


REFUSED = {"refused": True, "test_feasible": None, "test_objective": None, "oof_objective": None, "score": 0.0}


def scored(problem: str, target: float | None, cv_logits, cv_y, test_logits, y_test) -> dict[str, Any]:
    """The exact threshold of `problem` on the held-out curve, applied to the test logits; refused when the target
    is out of reach there. `score` is the objective counted 0 where refused or missed on test."""
    from dmocli import Problem, search_threshold

    point = search_threshold(cv_logits, cv_y, Problem(problem, target))
    if point.feasible is False:
        return dict(REFUSED)
    result = outcome(problem, target, test_metrics(test_logits >= point.threshold, y_test))
    return {
        **result,
        "oof_objective": float(point.objective),
        "score": 0.0 if result["test_feasible"] is False else result["test_objective"],
    }


def dmo_auto(data: pa.Table, test: pa.Table, seed: int, problem: str, target: float | None) -> dict[str, Any]:
    """`dmo_auto` for one problem (the kind kept depends on its objective): `dmo train --model auto`'s held-out
    curve, test logits and the kind kept; a refusal (no candidate reaches the target out of fold) keeps only the
    kind that came closest."""
    from dmocli import TrainOptions, UnreachableTarget, train

    opts = TrainOptions(problem=problem, target=target, solver="wce", model="auto", seed=seed, device="cpu")
    started = time.perf_counter()
    try:
        trained, report = train(data, opts)
    except UnreachableTarget as refusal:
        assert refusal.report is not None
        return {"chosen": refusal.report["model_selection"]["chosen"], "seconds": time.perf_counter() - started}
    return {
        "chosen": report["model_selection"]["chosen"],
        "cv": trained.heldout.rows(),
        "test": trained.logits(test)[0],
        "seconds": time.perf_counter() - started,
    }


def weighted_bins(on: bool) -> None:
    """For `dmo_gbdt_wbins`: the trees' training matrix built with its class weights in the quantile sketch (the
    behaviour before 2026-11-27), or today's matrix back."""
    from dmocli.solvers import boosting

    today = boosting.__dict__.setdefault("_today_matrix", boosting.matrix)
    if not on:
        boosting.matrix = today
        return
    xgb = boosting.import_xgboost()

    def matrix(X, y, *, weight, margin, types, ref=None):  # type: ignore[no-untyped-def]
        if ref is not None or weight is None or (types and "c" in types):
            return today(X, y, weight=weight, margin=margin, types=types, ref=ref)
        return xgb.QuantileDMatrix(X, label=y, weight=weight, base_margin=margin, missing=np.nan)

    boosting.matrix = matrix


def logit_mean(on: bool) -> None:
    """For `dmo_gbdt_logitmean`: the fold ensemble's forward as the mean of its members' mapped logits, or
    today's forward back."""
    import torch

    from dmocli.models.networks import FoldEnsemble

    today = FoldEnsemble.__dict__.get("_today_forward", FoldEnsemble.forward)
    FoldEnsemble._today_forward = today
    if not on:
        FoldEnsemble.forward = today
        return

    def forward(self, features):  # type: ignore[no-untyped-def]
        if self.member_map is None:
            return today(self, features)
        logits = torch.stack([member(features) for member in self.members])
        slope, intercept = self.member_map.to(device=logits.device, dtype=logits.dtype)
        return slope * logits.mean(dim=0) + intercept

    FoldEnsemble.forward = forward


def dmo_method(data: pa.Table, test: pa.Table, seed: int, model: str, params: dict[str, str]) -> dict[str, Any]:
    """One `dmo train` (defaults: --cv 5, fold ensemble); the curve its threshold was searched on, test logits."""
    from dmocli import TrainOptions, train

    opts = TrainOptions(problem="ofbs", solver="wce", model=model, seed=seed, device="cpu")
    opts.params = {key: value for key, value in params.items() if key != "cv-transfer"}
    opts.cv_transfer = params.get("cv-transfer", opts.cv_transfer)
    started = time.perf_counter()
    trained, report = train(data, opts)
    cv_logits, cv_y = trained.heldout.rows()
    test_logits, _ = trained.logits(test)
    trace = report["solver_trace"]
    rules = [fit.get("rounds_rule", {}).get("rule") for fit in trace.get("fold_traces", [trace])]
    rounds = [fit.get("rounds") for fit in trace.get("fold_traces", [trace])]
    extra = {"rules": rules, "rounds": rounds} if model == "gbdt" else {}
    member_map = trace.get("member_map")
    extra["member_map"] = None if member_map is None else (member_map["slope"], member_map["intercept"])
    return {"cv": (cv_logits, cv_y), "test": test_logits, "seconds": time.perf_counter() - started, **extra}


def repeat_seed(seed: int, repeat: int) -> int:
    """The fold seed of repeat `repeat` (0: --seed itself, today's folds)."""
    return seed if repeat == 0 else int(np.random.SeedSequence((seed, repeat)).generate_state(1)[0])


def dmo_repeated(data: pa.Table, test: pa.Table, seed: int, transfer: str = "ensemble") -> dict[str, dict[str, Any]]:
    """`dmo train --model gbdt` with today's defaults, whose cross-fitting is run REPEATS times (fold seeds from
    repeat_seed): the saved model is today's (the first repeat's fold ensemble at its Platt map), and the threshold
    is searched on today's out-of-fold curve (`dmo_gbdt`), on the R repeats' curves pooled (each row R times,
    `repR_pool`) or on each row's mean of its R out-of-fold logits (`repR_mean`), all on the model's scale. With
    `transfer` apply (`dmo_gbdt_rep_apply`), the same with `--cv-transfer apply` (a refit on DATA; the names then
    start `apply_`): the saved model is not the first repeat's fits, so its curve has no head start there."""
    import dataclasses

    from dmocli.pipelines import in_memory

    original = in_memory.cross_fit
    crossed: list[Any] = []

    def repeated(solver, part, *, ctx, **kwargs):  # type: ignore[no-untyped-def]
        crossed.append(original(solver, part, ctx=ctx, **kwargs))
        for repeat in range(1, REPEATS):
            again = dataclasses.replace(ctx, seed=repeat_seed(ctx.seed, repeat))
            crossed.append(original(solver, part, ctx=again, **{**kwargs, "keep_models": False}))
        return crossed[0]

    in_memory.cross_fit = repeated
    try:
        fitted = dmo_method(data, test, seed, "gbdt", {} if transfer == "ensemble" else {"cv-transfer": transfer})
    finally:
        in_memory.cross_fit = original
    member_map = fitted.pop("member_map")
    slope, intercept = member_map if member_map is not None else (1.0, 0.0)
    mapped = [slope * c.logits.astype(np.float64) + intercept for c in crossed]
    y = crossed[0].y
    today = np.sort(fitted["cv"][0].astype(np.float64))  # the curve dmo searched: today's repeat, mapped
    assert np.allclose(today, np.sort(mapped[0]), atol=1e-4), "the first repeat is not today's curve"
    prefix = "" if transfer == "ensemble" else f"{transfer}_"
    out = {"dmo_gbdt" if transfer == "ensemble" else f"dmo_gbdt_{transfer}": fitted}
    for repeats in (3, 5):
        curves = np.stack(mapped[:repeats])
        out[f"{prefix}rep{repeats}_pool"] = {**fitted, "cv": (curves.ravel(), np.tile(y, repeats))}
        out[f"{prefix}rep{repeats}_mean"] = {**fitted, "cv": (curves.mean(axis=0), y)}
    return out


def library_method(data: pa.Table, test: pa.Table, seed: int, method: str) -> dict[str, Any]:
    """XGBoost (fixed schedule, scale_pos_weight) or HistGradientBoosting (balanced) with 5-fold out-of-fold
    margins for the threshold and a refit on all of DATA for test; `xgb_refold` is XGBoost with other folds."""
    import pandas as pd
    import xgboost as xgb
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import StratifiedKFold

    frame, test_frame = data.to_pandas(), test.to_pandas()
    y = frame.pop("label").to_numpy()
    test_frame.pop("label")
    both = pd.get_dummies(pd.concat([frame, test_frame]), dtype=np.float32)  # text columns one-hot, as dmo does
    X, X_test = both.iloc[: len(frame)].to_numpy(np.float32), both.iloc[len(frame) :].to_numpy(np.float32)

    def model_for(labels: np.ndarray) -> Any:
        if method in ("xgb_fixed_oof", "xgb_refold"):
            spw = float((labels == 0).sum() / max((labels == 1).sum(), 1))
            return xgb.XGBClassifier(
                n_estimators=300,
                learning_rate=0.05,
                max_depth=6,
                scale_pos_weight=spw,
                tree_method="hist",
                random_state=seed,
                n_jobs=1,
            )
        return HistGradientBoostingClassifier(class_weight="balanced", random_state=seed)

    def margins(model: Any, rows: np.ndarray) -> np.ndarray:
        xgboost = method in ("xgb_fixed_oof", "xgb_refold")
        return model.predict(rows, output_margin=True) if xgboost else model.decision_function(rows)

    started = time.perf_counter()
    oof = np.empty(len(y), dtype=np.float64)
    fold_seed = seed + (REFOLD_SEED if method == "xgb_refold" else 0)
    for fit_rows, held in StratifiedKFold(5, shuffle=True, random_state=fold_seed).split(X, y):
        model = model_for(y[fit_rows]).fit(X[fit_rows], y[fit_rows])
        oof[held] = margins(model, X[held])
    final = model_for(y).fit(X, y)
    return {"cv": (oof, y), "test": margins(final, X_test), "seconds": time.perf_counter() - started}


def one_draw(task: tuple[str, str, int, int, int, list[str], dict[str, dict[str, str]]]) -> list[dict[str, Any]]:
    """Every method on one (set, size, resplit): one fit each, three problems."""
    data_dir, name, size, seed, neg_cap, methods, variants = task
    table = generated_pool() if name == GENERATED else pooled(Path(data_dir), name)
    sub = subsample(table, size, seed, neg_cap)
    if sub is None:
        return []
    data, test = resplit(sub, seed)
    y_test = test.column("label").to_numpy()
    rows = auto_rows(data, test, y_test, name=name, size=size, seed=seed) if "dmo_auto" in methods else []
    fits: dict[str, dict[str, Any]] = {}
    for method in methods:
        if method in fits or (method == "dmo_gbdt" and "dmo_gbdt_rep" in methods):  # from dmo_gbdt_rep's run
            continue
        if method == "dmo_auto":  # trained per problem, above
            continue
        if method in ("xgb_fixed_oof", "hgb_oof", *CONTROLS):
            fits[method] = library_method(data, test, seed, method)
        elif method in ("dmo_gbdt_rep", "dmo_gbdt_rep_apply"):
            weighted_bins(False)
            fits.update(dmo_repeated(data, test, seed, "ensemble" if method == "dmo_gbdt_rep" else "apply"))
        else:
            params = variants.get(method, DMO_PARAMS.get(method, {}))
            weighted_bins(method == "dmo_gbdt_wbins")
            logit_mean(method == "dmo_gbdt_logitmean")
            fits[method] = dmo_method(data, test, seed, "linear" if method == "dmo_linear" else "gbdt", params)
    for method, fitted in fits.items():
        for problem, target in PROBLEMS:
            rows.append(
                {
                    "set": name,
                    "size": size,
                    "seed": seed,
                    "method": method,
                    "problem": problem,
                    "seconds": fitted["seconds"],
                    **{key: fitted[key] for key in ("rules", "rounds") if key in fitted},
                    **scored(problem, target, *fitted["cv"], fitted["test"], y_test),
                }
            )
    return rows


def auto_rows(
    data: pa.Table, test: pa.Table, y_test: np.ndarray, *, name: str, size: int, seed: int
) -> list[dict[str, Any]]:
    """dmo_auto's rows of one draw: one per problem, with the kind kept beside the out-of-fold and test objectives."""
    rows = []
    for problem, target in PROBLEMS:
        fitted = dmo_auto(data, test, seed, problem, target)
        scores = scored(problem, target, *fitted["cv"], fitted["test"], y_test) if "cv" in fitted else REFUSED
        rows.append(
            {
                "set": name,
                "size": size,
                "seed": seed,
                "method": "dmo_auto",
                "problem": problem,
                "seconds": fitted["seconds"],
                "chosen": fitted["chosen"],
                **scores,
            }
        )
    return rows


def _one_thread() -> None:
    os.environ["OMP_NUM_THREADS"] = "1"  # before xgboost and torch load: one core per worker process
    import torch

    torch.set_num_threads(1)


def units(runs: list[dict[str, Any]], method: str, keep: Any) -> dict[tuple, float]:
    """(set, size, seed) -> the method's score averaged over the three problems, for the runs `keep` accepts."""
    per: dict[tuple, list[float]] = {}
    for r in runs:
        if r["method"] == method and keep(r):
            per.setdefault((r["set"], r["size"], r["seed"]), []).append(r["score"])
    return {key: float(np.mean(scores)) for key, scores in per.items()}


def mean_se(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    se = float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else None
    return float(np.mean(values)), se


def method_table(runs: list[dict[str, Any]], methods: list[str], group: str) -> list[dict[str, Any]]:
    """Per `group` value (size or set) and method: mean score (0 where refused or missed), its SE over draws, the
    refused share and the test feasibility of the constrained problems (a refusal counts as not feasible)."""
    table = []
    for value in sorted({r[group] for r in runs}, key=str):
        for method in methods:
            these = [r for r in runs if r[group] == value and r["method"] == method]
            if not these:
                continue
            mean, se = mean_se(list(units(runs, method, lambda r, v=value: r[group] == v).values()))
            constrained = [r for r in these if r["problem"] != "ofbs"]
            table.append(
                {
                    group: value,
                    "method": method,
                    "draws": len(these) // len(PROBLEMS),
                    "mean_score": mean,
                    "se": se,
                    "refused": float(np.mean([r["refused"] for r in these])),
                    "feasible": float(np.mean([r["test_feasible"] is True for r in constrained])),
                }
            )
    return table


def paired(runs: list[dict[str, Any]], method: str, others: list[str], group: str | None) -> list[dict[str, Any]]:
    """`method` minus each other method on the same draws, per `group` value (or pooled): mean and SE."""
    values = [None] if group is None else sorted({r[group] for r in runs}, key=str)
    table = []
    for value in values:
        keep = (lambda r: True) if value is None else (lambda r, v=value: r[group] == v)
        mine = units(runs, method, keep)
        for other in others:
            theirs = units(runs, other, keep)
            diffs = [mine[key] - theirs[key] for key in mine if key in theirs]
            mean, se = mean_se(diffs)
            table.append({group or "pooled": value or "all", "baseline": other, "draws": len(diffs),
                          "difference": mean, "se": se})  # fmt: skip
    return table


def optimism(runs: list[dict[str, Any]], methods: list[str]) -> list[dict[str, Any]]:
    """Per method: out-of-fold minus test objective on the problems it did not refuse, averaged per draw first (the
    SE counts independent draws), and the kinds dmo_auto kept. A selection on the out-of-fold curve shows here
    as dmo_auto's gap above the larger of dmo_gbdt's and dmo_linear's."""
    table = []
    for method in methods:
        per: dict[tuple, list[float]] = {}
        for r in runs:
            if r["method"] == method and r.get("oof_objective") is not None:
                gap = r["oof_objective"] - r["test_objective"]
                per.setdefault((r["set"], r["size"], r["seed"]), []).append(gap)
        mean, se = mean_se([float(np.mean(gaps)) for gaps in per.values()])
        chosen = [r["chosen"] for r in runs if r["method"] == method and "chosen" in r]
        kept = ", ".join(f"{kind} {chosen.count(kind)}" for kind in sorted(set(chosen))) or None
        table.append({"method": method, "draws": len(per), "oof_minus_test": mean, "se": se, "chosen": kept})
    return table


def within_best(runs: list[dict[str, Any]], method: str, methods: list[str]) -> list[dict[str, Any]]:
    """Per set: the best method by mean score and whether `method` is within one SE (paired) of it."""
    table = []
    for name in sorted({r["set"] for r in runs}):
        keep = lambda r, n=name: r["set"] == n  # noqa: E731
        candidates = [m for m in methods if m not in CONTROLS and units(runs, m, keep)]
        means = {m: np.mean(list(units(runs, m, keep).values())) for m in candidates}
        best = max(means, key=means.get)
        mine, theirs = units(runs, method, keep), units(runs, best, keep)
        diff, se = mean_se([mine[key] - theirs[key] for key in mine if key in theirs])
        ok = best == method or (diff is not None and se is not None and diff >= -se)
        table.append({"set": name, "best": best, "best_score": float(means[best]), "difference": diff, "se": se,
                      "within_one_se": ok})  # fmt: skip
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--resplits", type=int, default=10)
    parser.add_argument("--first-resplit", type=int, default=0, help="resplit seeds from here (fresh draws)")
    parser.add_argument("--sets", nargs="*", default=[*BINARY_SETS, GENERATED])
    parser.add_argument("--sizes", nargs="*", type=int, default=list(SIZES))
    parser.add_argument("--neg-cap", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--methods", nargs="*", default=list(BASE_METHODS))
    parser.add_argument("--variant", action="append", default=[], help="NAME:KEY=VALUE,... more dmo gbdt runs")
    parser.add_argument("--name", default="gbdt_small", help="results file bench/results/NAME.json")
    args = parser.parse_args()
    variants = {}
    for spec in args.variant:
        name, _, pairs = spec.partition(":")
        variants[name] = dict(item.split("=", 1) for item in pairs.split(",") if item)
    run_methods = [*args.methods, *variants]
    methods = run_methods
    if "dmo_gbdt_rep" in methods:  # one run gives today's dmo_gbdt and the repeated thresholds
        methods = ["dmo_gbdt", *(m for m in methods if m not in ("dmo_gbdt", "dmo_gbdt_rep")), *REPEAT_VARIANTS]
    if "dmo_gbdt_rep_apply" in methods:  # the same with --cv-transfer apply
        apply = ["dmo_gbdt_apply", *(f"apply_{name}" for name in REPEAT_VARIANTS)]
        methods = [*(m for m in methods if m != "dmo_gbdt_rep_apply"), *apply]
    tasks = [
        (args.data, name, size, seed, args.neg_cap, run_methods, variants)
        for size in args.sizes
        for name in args.sets
        for seed in range(args.first_resplit, args.first_resplit + args.resplits)
    ]
    runs: list[dict[str, Any]] = []
    with ProcessPoolExecutor(args.workers, initializer=_one_thread) as pool:
        for done, rows in enumerate(pool.map(one_draw, tasks), 1):
            runs.extend(rows)
            print(f"{done}/{len(tasks)} draws", file=sys.stderr, flush=True)
    by_size = method_table(runs, methods, "size")
    by_set = method_table(runs, methods, "set")
    reference = "dmo_gbdt"
    others = [m for m in methods if m != reference]
    pairs_by_size = paired(runs, reference, others, "size")
    pairs_pooled = paired(runs, reference, others, None)
    best = within_best(runs, reference, methods)
    rules = {}
    for r in runs:
        if r["method"] == reference and r["problem"] == "ofbs":
            for rule in r.get("rules", []):
                rules.setdefault(r["size"], {}).setdefault(rule, 0)
                rules[r["size"]][rule] += 1
    print("by size: mean objective (0 where refused or missed on test), SE over draws, feasibility (FPOR, FROP)")
    print_table(by_size, ["size", "method", "draws", "mean_score", "se", "refused", "feasible"])
    print("\nby set (all sizes)")
    print_table(by_set, ["set", "method", "draws", "mean_score", "se", "refused", "feasible"])
    print(f"\npaired: {reference} minus baseline, per size")
    print_table(pairs_by_size, ["size", "baseline", "draws", "difference", "se"])
    print(f"\npaired: {reference} minus baseline, pooled")
    print_table(pairs_pooled, ["pooled", "baseline", "draws", "difference", "se"])
    print(f"\n{reference} against the best method of each set (paired SE)")
    print_table(best, ["set", "best", "best_score", "difference", "se", "within_one_se"])
    gaps = optimism(runs, methods)
    print("\noptimism: out-of-fold minus test objective (problems not refused), SE over draws")
    print_table(gaps, ["method", "draws", "oof_minus_test", "se", "chosen"])
    print(f"\n{reference}'s fold fits by rule, per size: {rules}")
    path = write_results(
        args.name,
        {
            "resplits": args.resplits,
            "first_resplit": args.first_resplit,
            "sets": args.sets,
            "sizes": args.sizes,
            "neg_cap": args.neg_cap,
            "variants": variants,
            "by_size": by_size,
            "by_set": by_set,
            "paired_by_size": pairs_by_size,
            "paired_pooled": pairs_pooled,
            "within_best": best,
            "optimism": gaps,
            "rules_by_size": {str(k): v for k, v in rules.items()},
            "runs": runs,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()

"""Gradient-boosted trees for `--model gbdt`: XGBoost's histogram trees, trained on the split's numpy features.

The solvers keep their own meaning (`wce` is the class-weighted logistic
loss, `ero` the exact penalty); this module holds what both need from the
tree library: the `--param`s of the trees, their translation into XGBoost's
parameters, the data matrices (missing values stay missing: trees route
them), and the class-weighted fit with early stopping that is `wce` for
trees and `ero`'s warm start.

Early stopping watches the held-out average precision (binary) or the
weighted log-loss (multiclass) of the validation split when one is given,
else of a stratified share (`stop-frac`) of the training rows held out for
it, as scikit-learn's HistGradientBoostingClassifier does; the trees stop at
the best round. That round is only as good as the held-out rows: with fewer
than `stop-min-positives` rows of the rarest class among them (a held-out
tenth of 100 positives holds 10) the best round is noise, so nothing is held
out and the trees take a fixed, conservative schedule (`fixed-rounds` at
`fixed-eta`, each tree on a `fixed-subsample` of the rows and a
`fixed-colsample` of the features) on every training row instead
(bench/gbdt_small.py chose it; docs/gbdt.md has the figures). The trace's
`rounds_rule` says which rule ran and the positives counted.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dmocli import progress
from dmocli.errors import DmoError
from dmocli.models.stored_network import import_xgboost
from dmocli.options import refuse
from dmocli.prep.dataset import stopping_split
from dmocli.solvers.base import FitContext, FitResult, SolverParams, SplitData

if TYPE_CHECKING:
    import xgboost

SEED_MODULUS = 2**31  # XGBoost's seed is a 32-bit signed int
XGB_INT_MAX = 2**31 - 1  # XGBoost reads its integer parameters (max_depth, max_leaves, max_bin) as 32-bit ints
STOP_MIN_POSITIVES = 20  # held-out positives below which early stopping is noise (bench/gbdt_small.py)
# The fixed schedule draws this share of rows and of features per tree (stochastic gradient boosting): with no
# held-out rows to stop on, the randomness is its regularization (bench/gbdt_small.py, docs/gbdt.md).
FIXED_SHARE = 0.8


@dataclass
class TreeParams(SolverParams):
    """The trees' `--param` keys, shared by every solver that trains `--model gbdt`."""

    rounds: int = field(
        default=1000, metadata={"min": 1, "help": "gbdt: most boosting rounds (early stopping usually ends sooner)"}
    )
    eta: float = field(default=0.1, metadata={"positive": True, "max": 1.0, "help": "gbdt: learning rate per tree"})
    max_depth: int = field(
        default=6, metadata={"min": 0, "max": XGB_INT_MAX, "help": "gbdt: deepest tree (0: no limit; see max-leaves)"}
    )
    max_leaves: int = field(
        default=0, metadata={"min": 0, "max": XGB_INT_MAX, "help": "gbdt: most leaves per tree (0: no limit)"}
    )
    early_stopping: int = field(
        default=50,
        metadata={"min": 0, "help": "gbdt: stop after this many rounds without a better held-out loss (0: never)"},
    )
    stop_frac: float = field(
        default=0.1,
        metadata={
            "min": 0.0,
            "below": 1.0,
            "help": "gbdt (and wce's adam) without --val: stratified share of the training rows held out for "
            "early stopping (0: none; trees keep every round, adam stops on the training loss)",
        },
    )
    subsample: float = field(
        default=1.0, metadata={"positive": True, "max": 1.0, "help": "gbdt: share of rows drawn per tree"}
    )
    colsample: float = field(
        default=1.0, metadata={"positive": True, "max": 1.0, "help": "gbdt: share of features drawn per tree"}
    )
    min_child_weight: float = field(
        default=1.0, metadata={"min": 0.0, "help": "gbdt: least summed (weighted) curvature in a leaf"}
    )
    reg_lambda: float = field(default=1.0, metadata={"min": 0.0, "help": "gbdt: L2 penalty on leaf values"})
    max_bin: int = field(
        default=256, metadata={"min": 2, "max": XGB_INT_MAX, "help": "gbdt: histogram bins per feature"}
    )
    stop_min_positives: int = field(
        default=STOP_MIN_POSITIVES,
        metadata={
            "min": 0,
            "help": "gbdt: least rows of the rarest class in the held-out rows for early stopping on them; with "
            "fewer, nothing is held out and the trees take the fixed schedule: fixed-rounds at fixed-eta, "
            "fixed-subsample and fixed-colsample (0: always stop early)",
        },
    )
    fixed_rounds: int = field(
        default=300, metadata={"min": 1, "help": "gbdt: boosting rounds when too few positives to stop early"}
    )
    fixed_eta: float = field(
        default=0.05,
        metadata={"positive": True, "max": 1.0, "help": "gbdt: learning rate when too few positives to stop early"},
    )
    fixed_subsample: float = field(
        default=FIXED_SHARE,
        metadata={
            "positive": True,
            "max": 1.0,
            "help": "gbdt: share of rows drawn per tree when too few positives to stop early",
        },
    )
    fixed_colsample: float = field(
        default=FIXED_SHARE,
        metadata={
            "positive": True,
            "max": 1.0,
            "help": "gbdt: share of features drawn per tree when too few positives to stop early",
        },
    )
    stop_metric: str = field(
        default="auto",
        metadata={
            "choices": ("auto", "aucpr", "logloss"),
            "help": "gbdt: what early stopping watches on the held-out rows: aucpr (the ranking the exact threshold "
            "cuts), logloss (the training loss, class-weighted as trained) or auto (aucpr for a binary problem, "
            "logloss for multiclass, whose decision is the argmax)",
        },
    )


TREE_KEYS = tuple(f.name for f in dataclasses.fields(TreeParams))


def check_model_params(
    params: SolverParams, model: str, torch_only: tuple[str, ...], shared: tuple[str, ...] = ()
) -> None:
    """A parameter of the other model family would be silently ignored: refuse it (all of them in one message).
    Only values that differ from the default are seen here, which is what a user changing one means. `shared`:
    tree parameters the solver also applies to the torch models."""
    defaults = type(params)()
    changed = [f.name for f in dataclasses.fields(params) if getattr(params, f.name) != getattr(defaults, f.name)]
    problems = []
    trees = [key for key in changed if key in TREE_KEYS and key not in shared]
    if trees and model != "gbdt":
        problems.append(f"--param {_as_typed(trees)} applies to --model gbdt, not to --model {model}: drop it")
    torch_keys = [key for key in changed if key in torch_only]
    if torch_keys and model == "gbdt":
        problems.append(f"--param {_as_typed(torch_keys)} applies to the torch models (linear, mlp), not to gbdt")
    refuse(problems)


def _as_typed(keys: list[str]) -> str:
    """Parameter names as a user types them after --param."""
    return ", ".join(key.replace("_", "-") for key in keys)


def library_params(p: TreeParams, ctx: FitContext, n_classes: int) -> dict[str, Any]:
    """XGBoost's parameters for these `--param`s, this device and seed."""
    binary = n_classes <= 2
    return {
        "objective": "binary:logistic" if binary else "multi:softprob",
        **({} if binary else {"num_class": n_classes}),
        "eval_metric": stop_metric(p, n_classes),
        "tree_method": "hist",
        "device": "cuda" if ctx.device is not None and ctx.device.type == "cuda" else "cpu",
        "eta": p.eta,
        "max_depth": p.max_depth,
        "max_leaves": p.max_leaves,
        "grow_policy": "lossguide" if p.max_depth == 0 else "depthwise",
        "subsample": p.subsample,
        "colsample_bytree": p.colsample,
        "min_child_weight": p.min_child_weight,
        "lambda": p.reg_lambda,
        "max_bin": p.max_bin,
        "seed": ctx.seed % SEED_MODULUS,
    }


def stop_metric(p: TreeParams, n_classes: int) -> str:
    """XGBoost's name of the early-stopping metric (the last one it evaluates decides)."""
    if n_classes > 2:
        return "mlogloss" if p.stop_metric in ("auto", "logloss") else "auc"
    return "logloss" if p.stop_metric == "logloss" else "aucpr"


def monitor_weighted(p: TreeParams, n_classes: int) -> bool:
    """Whether the held-out rows carry the class weights: for a loss, as trained; a ranking (AUC) needs none."""
    return not stop_metric(p, n_classes).startswith("auc")


def numpy_split(split: SplitData) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(X (n, d) float32, y (n,) int64, offsets (n, K) or None) of a split, on the host."""
    offsets = split.extra.get("offsets")
    return (
        np.ascontiguousarray(split.X.detach().cpu().numpy()),
        split.y.detach().cpu().numpy(),
        None if offsets is None else offsets.detach().cpu().numpy().astype(np.float64),
    )


def base_margin(offsets: np.ndarray | None, n_classes: int) -> np.ndarray | None:
    """A `dmo subsample` file's log acceptance offsets as XGBoost's base margin: added to the trees' output in
    training only, as the torch solvers add them to their logits (docs/algorithms.md#lus)."""
    if offsets is None:
        return None
    return offsets[:, 1] - offsets[:, 0] if n_classes <= 2 else offsets


def class_weights(y: np.ndarray, n_classes: int) -> np.ndarray:
    """w = n / (K n_k) per row: each class weighs the same in the loss (wce's weights)."""
    counts = np.bincount(y, minlength=n_classes).astype(np.float64)
    return (len(y) / (n_classes * np.maximum(counts, 1)))[y].astype(np.float32)


def matrix(
    X: np.ndarray,
    y: np.ndarray,
    *,
    weight: np.ndarray | None,
    margin: np.ndarray | None,
    types: list[str] | None,
    ref: xgboost.DMatrix | None = None,
) -> xgboost.DMatrix:
    """A QuantileDMatrix (histogram bins built once from X, NaN as missing); `ref` shares training's bins; `types`
    marks the categorical columns (a level's index), which the trees split on by level sets.

    The weights are set after the bins are built: the bins follow the rows, not the class weights. Sketched with
    the balanced weights, half of a feature's cut points went to the few positives' values (with 100 positives
    nearly one cut per positive) and the negatives' range was left coarse; the weights belong to the loss, and
    XGBoost's own scale_pos_weight bins so too. bench/gbdt_small.py measured it (docs/gbdt.md)."""
    xgb = import_xgboost()
    categorical = {"feature_types": types, "enable_categorical": True} if types and "c" in types else {}
    dmatrix = xgb.QuantileDMatrix(X, label=y, base_margin=margin, ref=ref, missing=np.nan, **categorical)
    if weight is not None:
        dmatrix.set_weight(weight)
    return dmatrix


@dataclass
class Held:
    """The rows trees are fitted on and the rows that judge them (early stopping, ERO's iterate selection)."""

    X: np.ndarray
    y: np.ndarray
    offsets: np.ndarray | None
    monitor: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None  # (X, y, offsets) of the judging rows
    monitor_name: str | None
    rule: dict[str, Any] = field(default_factory=dict)  # the trace's rounds_rule: which schedule, positives counted

    @property
    def fixed(self) -> bool:
        """Whether too few held-out positives sent the trees to the fixed schedule."""
        return self.rule.get("rule") == "fixed"


def held_out(train: SplitData, val: SplitData | None, p: TreeParams, ctx: FitContext) -> Held:
    """The validation split judges when given; else a stratified `stop-frac` of the training rows, when every class
    can spare rows for it; else nothing does (every round is kept). With fewer than `stop-min-positives` rows of
    the rarest class among the judging rows, their best round is noise: nothing is held out (every training row
    is fitted) and the trees take the fixed schedule."""
    X, y, offsets = numpy_split(train)
    if len(np.unique(y)) < 2:
        raise DmoError("gbdt training needs rows of at least two classes")
    if not p.early_stopping or (p.stop_frac <= 0 and (val is None or val.n == 0)):
        why = "early-stopping=0" if not p.early_stopping else "stop-frac=0 and no --val"
        return Held(X, y, offsets, None, None, {"rule": "all rounds", "why": why})
    if val is not None and val.n > 0:
        held = Held(X, y, offsets, numpy_split(val), "val")
    else:
        split = stopping_split(y, p.stop_frac, seed=ctx.seed, class_names=ctx.class_names, fewest=4)
        if split is None:
            held = Held(X, y, offsets, None, None)
        else:
            kept, out = split
            part = lambda rows: None if offsets is None else offsets[rows]  # noqa: E731
            held = Held(X[kept], y[kept], part(kept), (X[out], y[out], part(out)), f"{p.stop_frac:g} of train")
    counted = 0 if held.monitor is None else int(np.bincount(held.monitor[1]).min())
    rule = {"held_out": held.monitor_name, "held_out_positives": counted, "stop_min_positives": p.stop_min_positives}
    if p.stop_min_positives and counted < p.stop_min_positives:
        why = f"{counted} positives held out < stop-min-positives {p.stop_min_positives}"
        return Held(X, y, offsets, None, None, {"rule": "fixed", "why": why, **rule})
    if held.monitor is None:  # stop-min-positives=0: as before the rule, a class too small to hold out keeps all
        return dataclasses.replace(held, rule={"rule": "all rounds", "why": "too few rows to hold out", **rule})
    why = f"{counted} positives held out >= stop-min-positives {p.stop_min_positives}"
    return dataclasses.replace(held, rule={"rule": "early stopping", "why": why, **rule})


def boost_weighted(
    held: Held, ctx: FitContext, balanced: bool = True
) -> tuple[xgboost.Booster, xgboost.DMatrix, dict[str, Any]]:
    """Class-weighted logistic (softmax) loss by boosting, early-stopped on the held-out rows (or the fixed schedule,
    where held_out found too few positives to stop on); returns the booster cut at its best round, the training
    matrix and the trace."""
    xgb = import_xgboost()
    p: TreeParams = ctx.params
    if held.fixed:  # too few held-out positives: the conservative schedule, no early stopping
        p = dataclasses.replace(
            p,
            rounds=p.fixed_rounds,
            eta=p.fixed_eta,
            subsample=p.fixed_subsample,
            colsample=p.fixed_colsample,
            early_stopping=0,
        )
    started = time.perf_counter()
    n_classes = max(2, ctx.architecture.n_outputs)
    weight = lambda labels: class_weights(labels, n_classes) if balanced else None  # noqa: E731
    dtrain = matrix(
        held.X, held.y, weight=weight(held.y), margin=base_margin(held.offsets, n_classes), types=ctx.feature_types
    )
    evals = []
    if held.monitor is not None:
        X_mon, y_mon, off_mon = held.monitor
        evals = [
            (
                matrix(
                    X_mon,
                    y_mon,
                    weight=weight(y_mon) if monitor_weighted(p, n_classes) else None,
                    margin=base_margin(off_mon, n_classes),
                    types=ctx.feature_types,
                    ref=dtrain,
                ),
                "monitor",
            )
        ]
    stopping = p.early_stopping if evals and p.early_stopping else None
    history: dict[str, Any] = {}
    params = library_params(p, ctx, n_classes)
    with progress.task("gbdt", total=p.rounds, unit="rounds") as bar:
        booster = xgb.train(
            params,
            dtrain,
            num_boost_round=p.rounds,
            evals=evals,
            early_stopping_rounds=stopping,
            evals_result=history,
            verbose_eval=False,
            callbacks=[_progress_callback(bar, xgb)],
        )
    rounds = booster.best_iteration + 1 if stopping else booster.num_boosted_rounds()
    losses = next(iter(history["monitor"].values())) if evals else None
    trace = {
        "rounds": rounds,
        "rounds_run": booster.num_boosted_rounds(),
        "monitored_split": held.monitor_name,
        "monitored_loss": float(losses[rounds - 1]) if losses else None,
        "eta": p.eta,
        "subsample": p.subsample,
        "colsample": p.colsample,
        "rounds_rule": held.rule,
        "device": params["device"],
        "seconds": time.perf_counter() - started,
    }
    return booster[:rounds], dtrain, trace


def _progress_callback(bar: progress.Task, xgb: Any) -> Any:
    """A training callback that advances `bar` by one round and shows the held-out score (defined on use: xgboost
    is an optional import)."""

    class Shown(xgb.callback.TrainingCallback):  # type: ignore[misc, name-defined]
        def after_iteration(self, model: Any, epoch: int, evals_log: dict[str, Any]) -> bool:
            scores = {name: values[-1] for split in evals_log.values() for name, values in split.items()}
            bar.advance(1, **scores)
            return False

    return Shown()


def fit_weighted(train: SplitData, val: SplitData | None, ctx: FitContext, balanced: bool = True) -> FitResult:
    """`wce` for trees: the class-weighted fit of boost_weighted, as a model the pipelines score."""
    from dmocli.models.trees import BoostedTrees  # torch: only to train (`dmo check`, `dmo solvers` start without it)

    booster, _, trace = boost_weighted(held_out(train, val, ctx.params, ctx), ctx, balanced)
    network = BoostedTrees.from_booster(booster, ctx.architecture.n_outputs)
    return FitResult(network=network, threshold=0.0 if ctx.architecture.n_outputs == 1 else None, trace=trace)


def _schedule(fit: dict[str, Any]) -> str:
    """A fixed-schedule fit's rounds, learning rate and the shares of rows and features each tree drew."""
    shares = {"rows": fit.get("subsample", 1.0), "features": fit.get("colsample", 1.0)}
    drawn = ", ".join(f"{share:g} of {what}" for what, share in shares.items() if share < 1.0)
    return f"{fit['rounds']} rounds at eta {fit['eta']:g}" + (f", {drawn} per tree" if drawn else "")


def rule_line(trace: dict[str, Any]) -> str | None:
    """The summary's line on the trees' rounds rule, from a fit's trace (a fold ensemble's: its folds'; ERO's:
    its warm start's), or None for a trace without one (not trees): which rule, in how many fits, and the
    held-out positives that decided, e.g. `trees: fixed schedule (300 rounds at eta 0.05, 0.8 of rows, 0.8 of
    features per tree) in 5 of 5 fits: 3-4 positives held out, fewer than stop-min-positives 20`."""
    fits = [fit.get("warm_start", fit) for fit in trace.get("fold_traces") or [trace]]
    rules = [fit.get("rounds_rule") for fit in fits]
    if not fits or not all(rules):
        return None
    named = [rule["rule"] for rule in rules]
    shown = {"fixed": "fixed schedule", "early stopping": "early stopping", "all rounds": "every round kept"}
    parts = []
    for name in dict.fromkeys(named):
        fit = fits[named.index(name)]
        schedule = f" ({_schedule(fit)})" if name == "fixed" else ""
        share = f" in {named.count(name)} of {len(named)} fits" if len(named) > 1 else ""
        parts.append(f"{shown.get(name, name)}{schedule}{share}")
    counted = [rule["held_out_positives"] for rule in rules if "held_out_positives" in rule]
    if not counted:
        return f"trees: {'; '.join(parts)}: {rules[0]['why']}"
    low, high = min(counted), max(counted)
    span = str(low) if low == high else f"{low}-{high}"
    limit = rules[0]["stop_min_positives"]
    side = "fewer than" if high < limit else "at least" if low >= limit else "against"
    reason = f"{span} positives held out, {side} stop-min-positives {limit}" if limit else f"{span} positives held out"
    return f"trees: {'; '.join(parts)}: {reason}"

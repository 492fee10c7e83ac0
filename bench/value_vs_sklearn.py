"""Value per row (issue 48): scikit-learn's TunedThresholdClassifierCV with its fraud example's per-row business
scorer against dmo's exact value search, on the SAME base model's scores; and `dmo train --problem value` end to end.

The gain matrix is scikit-learn's "Post-tuning the decision threshold for cost-sensitive learning" fraud example:
a refused fraud gains 50, an accepted fraud loses its amount, a refused legitimate transaction costs a fee of 5,
an accepted one earns a commission of 2 % of its amount: dmo's `--gain 'tp=50,fp=-5,fn=-amount,tn=0.02*amount'`.
scikit-learn gets the amounts as metadata (`enable_metadata_routing`, `set_score_request(amount=True)`), as the
example routes them.

Per set and resplit (the set's train/val/test pooled and re-split, stratified: 80 % dev, 20 % test, seed = the
resplit):

- sklearn: TunedThresholdClassifierCV(StandardScaler + LogisticRegression, scoring=the business scorer,
  thresholds=100, cv=5): 5 fold fits, the scorer on a grid of 100 thresholds of each fold's scores, averaged, the
  best kept, the model refit on all of dev.
- dmo exact: the same 5 folds (StratifiedKFold(5), scikit-learn's own cv=5), the same pipeline's out-of-fold
  decision scores, dmo's exact value search over every distinct out-of-fold score (operating_point/search.py's
  value objective), the same pipeline refit on all of dev. The two differ only in how the threshold is chosen.
- dmo train: `dmo train DEV --problem value --gain ... --cv 5 --model linear` (dmo's own linear model and
  cross-fitting), its realized value on the test split read from `dmo evaluate`'s `value` section.
- references on the refit model: the default cut (probability 0.5) and "flag nothing".

Realized value per row on the test split, its mean over resplits with a 95 % t interval of the mean, the paired
difference dmo exact - sklearn with its interval and the resplits dmo wins, ties or loses; the value each chosen
threshold brings on the out-of-fold scores it was chosen on (the exact search's is the largest there is, by
construction); and the time to fit the threshold (sklearn: its whole fit; dmo exact: the same fold fits, refit and
search; the search alone).

Data: generated transactions (log-normal amounts, ~1.5 % fraud, amounts larger for fraud) and the shared binary
sets (bench/_common.py BINARY_SETS) given generated log-normal amounts, independent of the label, as an added
feature column `amount`.

`dmo train` runs on the first --train-resplits (10) resplits of each set, the rest on all --resplits (30): a
training with --cv 5 takes seconds where the comparison takes a fraction of one, and the run is kept under about
20 minutes on 2 cores.

Usage: python bench/value_vs_sklearn.py [--resplits 30] [--train-resplits 10] [--sets generated page_blocks0 ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sklearn
from _common import BINARY_SETS, DEFAULT_DATA, print_table, write_results
from scipy import stats
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import make_scorer
from sklearn.model_selection import StratifiedKFold, TunedThresholdClassifierCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import dmocli
from dmocli.operating_point.curve import ScoreCurve
from dmocli.operating_point.gain import GainMatrix
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import search_curve

GAIN = "tp=50,fp=-5,fn=-amount,tn=0.02*amount"
FOLDS = 5
GRID = 100  # TunedThresholdClassifierCV's default, as the example uses it


def business_metric(y_true: np.ndarray, y_pred: np.ndarray, amount: np.ndarray) -> float:
    """scikit-learn's fraud example's business metric, as it writes it: the total gain of the decisions."""
    mask_true_positive = (y_true == 1) & (y_pred == 1)
    mask_true_negative = (y_true == 0) & (y_pred == 0)
    mask_false_positive = (y_true == 0) & (y_pred == 1)
    mask_false_negative = (y_true == 1) & (y_pred == 0)
    fraudulent_refuse = mask_true_positive.sum() * 50
    fraudulent_accept = -amount[mask_false_negative].sum()
    legitimate_refuse = mask_false_positive.sum() * -5
    legitimate_accept = (amount[mask_true_negative] * 0.02).sum()
    return fraudulent_refuse + fraudulent_accept + legitimate_refuse + legitimate_accept


def generated_transactions(rows: int = 20_000, seed: int = 0) -> pd.DataFrame:
    """Transactions: 8 numeric features, ~1.5 % fraud shifting four of them, log-normal amounts (median about 33,
    a fraud's about 2.7 times larger)."""
    rng = np.random.default_rng(seed)
    fraud = (rng.random(rows) < 0.015).astype(np.int64)
    features = rng.standard_normal((rows, 8))
    features[:, :4] += 0.9 * fraud[:, None]
    amount = np.exp(rng.normal(3.5 + 1.0 * fraud, 1.0))
    frame = pd.DataFrame(features, columns=[f"x{j}" for j in range(8)])
    return frame.assign(amount=amount, label=fraud)


def shared_set(name: str, data: Path, seed: int) -> pd.DataFrame:
    """A shared set's three splits pooled, given a log-normal `amount` column independent of the label."""
    frame = pd.concat([pd.read_parquet(data / name / f"{part}.parquet") for part in ("train", "val", "test")])
    frame = frame.reset_index(drop=True)
    rng = np.random.default_rng(seed)
    return frame.assign(amount=np.exp(rng.normal(3.5, 1.0, len(frame))))


def design(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X, y, amount) for scikit-learn: text columns one-hot, the amount as log(amount) beside the features."""
    features = frame.drop(columns=["label", "amount"])
    features = pd.get_dummies(features, dtype=float).assign(log_amount=np.log(frame["amount"]))
    return features.to_numpy(np.float64), frame["label"].to_numpy(np.int64), frame["amount"].to_numpy(np.float64)


def base_model() -> Any:
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))


def sklearn_tuned(X: np.ndarray, y: np.ndarray, amount: np.ndarray) -> tuple[Any, float]:
    """TunedThresholdClassifierCV fitted as the example fits it; its fit time."""
    scorer = make_scorer(business_metric).set_score_request(amount=True)
    tuned = TunedThresholdClassifierCV(base_model(), scoring=scorer, thresholds=GRID, cv=FOLDS)
    started = time.perf_counter()
    tuned.fit(X, y, amount=amount)
    return tuned, time.perf_counter() - started


def dmo_exact(X: np.ndarray, y: np.ndarray, amount: np.ndarray) -> tuple[Any, np.ndarray, float, float, float]:
    """The same pipeline's out-of-fold decision scores on scikit-learn's own folds, dmo's exact value search on
    them, the pipeline refit on all rows: (refit model, the out-of-fold scores, threshold on the decision score,
    total and search seconds)."""
    started = time.perf_counter()
    scores = np.empty(len(y))
    for fit_rows, held_rows in StratifiedKFold(FOLDS).split(X, y):
        scores[held_rows] = base_model().fit(X[fit_rows], y[fit_rows]).decision_function(X[held_rows])
    refit = base_model().fit(X, y)
    searched = time.perf_counter()
    gains = GainMatrix.parse(GAIN).row_gains({"amount": amount}, len(y))
    point = search_curve(ScoreCurve.from_scores(scores.astype(np.float32), y, gains=gains), Problem("value"))
    done = time.perf_counter()
    return refit, scores.astype(np.float32), float(point.threshold), done - started, done - searched


def per_row(y: np.ndarray, flagged: np.ndarray, amount: np.ndarray) -> float:
    return float(business_metric(y, flagged.astype(np.int64), amount) / len(y))


def one_resplit(frame: pd.DataFrame, seed: int, *, train_dmo: bool, work: Path) -> dict[str, float]:
    """Every method's realized value per row on one resplit's test split, and its time to fit the threshold."""
    dev, test = train_test_split(frame, test_size=0.2, stratify=frame["label"], random_state=seed)
    X, y, amount = design(dev)
    X_test, y_test, amount_test = design(test)
    tuned, sk_seconds = sklearn_tuned(X, y, amount)
    refit, oof, threshold, dmo_seconds, search_seconds = dmo_exact(X, y, amount)
    decision = refit.decision_function(X_test)
    oof_probability = 1.0 / (1.0 + np.exp(-oof.astype(np.float64)))  # LogisticRegression's predict_proba
    out = {
        "sklearn": per_row(y_test, tuned.predict(X_test), amount_test),
        "dmo_exact": per_row(y_test, decision.astype(np.float32) >= np.float32(threshold), amount_test),
        "default_cut": per_row(y_test, decision >= 0.0, amount_test),
        "flag_nothing": per_row(y_test, np.zeros_like(y_test), amount_test),
        # the value each threshold brings on the out-of-fold scores it was chosen on (dev), exact's the largest
        "dmo_exact_oof": per_row(y, oof >= np.float32(threshold), amount),
        "sklearn_oof": per_row(y, oof_probability >= tuned.best_threshold_, amount),
        "sklearn_seconds": sk_seconds,
        "dmo_exact_seconds": dmo_seconds,
        "dmo_search_seconds": search_seconds,
    }
    if train_dmo:
        out.update(dmo_train(dev, test, seed, work))
    return out


def dmo_train(dev: pd.DataFrame, test: pd.DataFrame, seed: int, work: Path) -> dict[str, float]:
    """`dmo train --problem value --cv 5 --model linear` on dev, its realized value on test from `dmo evaluate`."""
    dev.to_parquet(work / "dev.parquet", index=False)
    test.to_parquet(work / "test.parquet", index=False)
    opts = dmocli.TrainOptions(problem="value", gain=GAIN, cv=FOLDS, model="linear", seed=seed)
    started = time.perf_counter()
    dmocli.train(work / "dev.parquet", opts, output=work / "model.st")
    seconds = time.perf_counter() - started
    report = dmocli.evaluate(work / "model.st", work / "test.parquet")
    return {"dmo_train": report["value"]["at_threshold"]["per_row"], "dmo_train_seconds": seconds}


def mean_interval(values: np.ndarray) -> list[float]:
    """The mean's two-sided 95 % t interval over resplits."""
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return [float(values.mean() - half), float(values.mean() + half)]


METHODS = ("dmo_exact", "sklearn", "dmo_train", "default_cut", "flag_nothing")


def summary(name: str, rows: list[dict[str, float]]) -> dict[str, Any]:
    """A set's figures over its resplits: each method's mean value per row and interval, the paired difference."""
    table = pd.DataFrame(rows)
    out: dict[str, Any] = {"set": name, "resplits": len(rows)}
    for method in (m for m in METHODS if m in table):
        values = table[method].dropna().to_numpy()  # dmo train: its resplits only
        out[method] = float(values.mean())
        out[f"{method}_interval"] = mean_interval(values)
        out[f"{method}_resplits"] = int(values.size)
    difference = (table["dmo_exact"] - table["sklearn"]).to_numpy()
    out["exact_minus_sklearn"] = float(difference.mean())
    out["exact_minus_sklearn_interval"] = mean_interval(difference)
    if "dmo_train" in table:  # paired on the resplits dmo train ran on
        trained = table.dropna(subset=["dmo_train"])
        out["train_minus_sklearn"] = float((trained["dmo_train"] - trained["sklearn"]).mean())
        out["train_minus_sklearn_interval"] = mean_interval((trained["dmo_train"] - trained["sklearn"]).to_numpy())
    tolerance = 1e-9 * max(1.0, float(np.abs(table["sklearn"]).max()))
    out["wins"] = int((difference > tolerance).sum())
    out["ties"] = int((np.abs(difference) <= tolerance).sum())
    out["losses"] = int((difference < -tolerance).sum())
    for oof in ("dmo_exact_oof", "sklearn_oof"):
        out[oof] = float(table[oof].mean())
    for seconds in ("sklearn_seconds", "dmo_exact_seconds", "dmo_search_seconds", "dmo_train_seconds"):
        if seconds in table:
            out[seconds] = float(table[seconds].dropna().median())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resplits", type=int, default=30)
    parser.add_argument("--sets", nargs="*", default=["generated", *BINARY_SETS])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--train-resplits", type=int, default=10, help="`dmo train --problem value` on the first N resplits (0: none)"
    )
    args = parser.parse_args()
    sklearn.set_config(enable_metadata_routing=True)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sets:
            frame = (
                generated_transactions()
                if name == "generated"
                else shared_set(name, args.data, zlib.crc32(name.encode()))
            )
            started = time.perf_counter()
            rows = [
                one_resplit(frame, seed, train_dmo=seed < args.train_resplits, work=Path(tmp))
                for seed in range(args.resplits)
            ]
            results.append({**summary(name, rows), "rows": len(frame), "positives": int(frame["label"].sum())})
            results[-1]["set_seconds"] = time.perf_counter() - started
            results[-1]["per_resplit"] = rows
            print(f"{name}: {results[-1]['set_seconds']:.0f} s", flush=True)
    columns = ["set", "rows", "resplits", "dmo_exact", "sklearn", "dmo_train", "default_cut", "flag_nothing"]
    columns += ["exact_minus_sklearn", "wins", "ties", "losses", "dmo_exact_oof", "sklearn_oof", "train_minus_sklearn"]
    columns += ["sklearn_seconds", "dmo_exact_seconds"]
    columns += ["dmo_search_seconds", "dmo_train_seconds"]
    print_table(results, columns)
    path = write_results(
        "value_vs_sklearn",
        {
            "gain": GAIN,
            "folds": FOLDS,
            "grid": GRID,
            "resplits": args.resplits,
            "train_resplits": args.train_resplits,
            "results": results,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

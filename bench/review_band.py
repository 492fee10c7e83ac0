"""The review band with known truth (issue 48): the automatic decisions' precision on fresh rows against their
certified floor, and the review volume on fresh rows against the budget.

Two parts, each over many draws:

- `train` (the user's path, >= 200 draws): a table of 4 Gaussian features whose labels follow a known logistic
  (about 24 % positives), `dmocli.train(problem fpor, target A, confidence C, review_budget R)`, linear wce with
  dmo's default 5-fold cross-fitting; then 20,000 fresh rows of the same distribution: the automatic decisions'
  precision there against A (the certified floor: "precision >= A with probability C"), and the band's share of
  them against R. Each draw also records how often training was refused (exit 3: the target or the band not
  certified) and the review band's recall (the positives it sends to review).
- `scores` (the certificate itself, >= 1,000 draws a setting): held-out scores from a binormal model (negatives
  N(0, 1), positives N(mu, 1), positive rate pi), the same exact search and band, and the truth computed exactly:
  the automatic cut's population precision and the band's population share, from the normal CDF; with a sample
  size M (`--new-rows M`), M fresh rows drawn and their review volume judged against floor(R x M). The band is also
  chosen without a confidence, to show what the certificate is for.

A certificate at C promises a miss in at most 1 - C of the answered draws.

    python bench/review_band.py --draws 200 --score-draws 1000     # writes bench/results/review_band.json
    python bench/review_band.py --quick                            # 10 + 50 draws
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd
import pyarrow as pa
from _common import print_table, write_results
from scipy.stats import norm

from dmocli import TrainOptions, train
from dmocli.errors import DmoError
from dmocli.operating_point.alert_budget import allowed_alerts
from dmocli.operating_point.heldout import HeldOutCurve
from dmocli.operating_point.problems import Problem
from dmocli.operating_point.review_band import decisions, review_band
from dmocli.operating_point.search import search_curve

WEIGHTS, BIAS = np.array([1.5, 1.0, -0.5, 0.0]), -1.8  # the known logistic: P(y=1 | x) = sigmoid(w.x + b)
FRESH = 20_000
# (name, held-out rows n, positive rate pi, shift mu, target A, confidence C, budget R, next rows M or None)
SCORE_SETTINGS = [
    ("a: n 2,000, A 0.8, R 0.10", 2000, 0.2, 2.0, 0.8, 0.95, 0.10, None),
    ("b: n 500, A 0.7, R 0.05", 500, 0.2, 2.0, 0.7, 0.90, 0.05, None),
    ("c: n 5,000, A 0.9, R 0.02", 5000, 0.1, 2.5, 0.9, 0.95, 0.02, None),
    ("d: n 2,000, A 0.8, R 0.10, next 1,000", 2000, 0.2, 2.0, 0.8, 0.95, 0.10, 1000),
    ("e: n 1,000, A 0.7, R 0.05, next 500", 1000, 0.2, 2.0, 0.7, 0.90, 0.05, 500),
]


def table(rows: int, rng: np.random.Generator) -> pd.DataFrame:
    x = rng.normal(size=(rows, WEIGHTS.size))
    labels = (rng.random(rows) < 1.0 / (1.0 + np.exp(-(x @ WEIGHTS + BIAS)))).astype(np.int64)
    return pd.DataFrame({**{f"x{i}": x[:, i] for i in range(WEIGHTS.size)}, "label": labels})


def train_draw(seed: int, *, rows: int, target: float, confidence: float, budget: float) -> dict[str, Any]:
    """One `train` draw: the model's band judged on FRESH rows of the same distribution."""
    rng = np.random.default_rng(seed)
    options = TrainOptions(problem="fpor", target=target, confidence=confidence, review_budget=budget, seed=seed)
    try:
        model, report = train(table(rows, rng), options)
    except DmoError as exc:
        return {"answered": False, "exit": getattr(exc, "exit_code", None)}
    fresh = table(FRESH, rng)
    logits, _ = model.logits(pa.Table.from_pandas(fresh.drop(columns="label"), preserve_index=False))
    labels = fresh["label"].to_numpy()
    decided = decisions(logits, model.threshold, model.review_threshold)
    auto, review = decided == 0, decided == 1
    return {
        "answered": True,
        "precision": float(labels[auto].mean()) if auto.any() else None,
        "held_out_precision": report["review_band"]["classes"]["positive"]["precision"],
        "volume": float(review.mean()),
        "held_out_volume": report["review_band"]["volume"],
        "volume_bound": report["review_band"]["volume_bound"],
        "review_recall": float(labels[review].sum() / max(labels.sum(), 1)),
        "auto_recall": float(labels[auto].sum() / max(labels.sum(), 1)),
    }


def train_part(draws: int, *, rows: int, target: float, confidence: float, budget: float) -> dict[str, Any]:
    started = time.perf_counter()
    results = [
        train_draw(seed, rows=rows, target=target, confidence=confidence, budget=budget) for seed in range(draws)
    ]
    answered = [r for r in results if r["answered"]]
    precision_misses = sum(r["precision"] is not None and r["precision"] < target for r in answered)
    volume_misses = sum(r["volume"] > budget for r in answered)
    return {
        "rows": rows,
        "fresh_rows": FRESH,
        "target": target,
        "confidence": confidence,
        "budget": budget,
        "draws": draws,
        "answered": len(answered),
        "refused": _refusals(results),
        "precision_below_floor": precision_misses,
        "precision_below_floor_share": precision_misses / max(len(answered), 1),
        "volume_over_budget": volume_misses,
        "volume_over_budget_share": volume_misses / max(len(answered), 1),
        "mean_fresh_precision": float(np.mean([r["precision"] for r in answered if r["precision"] is not None])),
        "min_fresh_precision": float(np.min([r["precision"] for r in answered if r["precision"] is not None])),
        "mean_fresh_volume": float(np.mean([r["volume"] for r in answered])),
        "max_fresh_volume": float(np.max([r["volume"] for r in answered])),
        "mean_held_out_volume": float(np.mean([r["held_out_volume"] for r in answered])),
        "mean_review_recall": float(np.mean([r["review_recall"] for r in answered])),
        "mean_auto_recall": float(np.mean([r["auto_recall"] for r in answered])),
        "seconds": time.perf_counter() - started,
        "draw_results": results,
    }


def _refusals(results: list[dict[str, Any]]) -> dict[str, int]:
    """How many draws training refused, by exit code (3: the target or the band not certified)."""
    codes = [str(r.get("exit")) for r in results if not r["answered"]]
    return {code: codes.count(code) for code in sorted(set(codes))}


def flagged_share(cut: float, rate: float, shift: float) -> float:
    """The population's share of rows at or above `cut`, and (second) the positives' share of them."""
    return rate * norm.sf(cut - shift) + (1 - rate) * norm.sf(cut)


def true_precision(cut: float, rate: float, shift: float) -> float:
    flagged = flagged_share(cut, rate, shift)
    return rate * norm.sf(cut - shift) / flagged if flagged > 0 else float("nan")


def score_setting(setting: tuple, draws: int, seed: int) -> dict[str, Any]:
    """One score setting over `draws` draws: the certified band (and the plain one) judged on the known truth."""
    name, n, rate, shift, target, confidence, budget, next_rows = setting
    rng = np.random.default_rng(seed)
    counts = {"answered": 0, "precision_miss": 0, "share_miss": 0, "next_miss": 0, "plain_share_miss": 0}
    shares, plain_shares, volumes = [], [], []
    for _ in range(draws):
        labels = (rng.random(n) < rate).astype(np.int64)
        scores = (rng.normal(size=n) + shift * labels).astype(np.float32)
        curve = HeldOutCurve.from_scores(scores, labels)
        point = search_curve(curve.score_curve(), Problem("fpor", target), confidence, next_rows)
        if not point.feasible:
            continue
        band = review_band(curve, point.threshold, budget, confidence=confidence, next_rows=next_rows)
        if band.empty:
            continue
        counts["answered"] += 1
        upper, lower = np.float32(point.threshold), np.float32(band.lower)
        counts["precision_miss"] += bool(true_precision(float(upper), rate, shift) < target)
        share = flagged_share(float(lower), rate, shift) - flagged_share(float(upper), rate, shift)
        shares.append(share)
        counts["share_miss"] += bool(share > budget)
        plain = review_band(curve, point.threshold, budget)
        plain_share = flagged_share(float(np.float32(plain.lower)), rate, shift) - flagged_share(
            float(upper), rate, shift
        )
        plain_shares.append(plain_share)
        counts["plain_share_miss"] += bool(plain_share > budget)
        if next_rows is not None:
            fresh_labels = (rng.random(next_rows) < rate).astype(np.int64)
            fresh = (rng.normal(size=next_rows) + shift * fresh_labels).astype(np.float32)
            in_band = int(np.count_nonzero(decisions(fresh, float(upper), float(lower)) == 1))
            volumes.append(in_band / next_rows)
            counts["next_miss"] += bool(in_band > allowed_alerts(budget, next_rows))
    answered = max(counts["answered"], 1)
    return {
        "setting": name,
        "rows": n,
        "rate": rate,
        "shift": shift,
        "target": target,
        "confidence": confidence,
        "budget": budget,
        "next_rows": next_rows,
        "draws": draws,
        **counts,
        "precision_miss_share": counts["precision_miss"] / answered,
        "share_miss_share": counts["share_miss"] / answered,
        "plain_share_miss_share": counts["plain_share_miss"] / answered,
        "next_miss_share": counts["next_miss"] / answered if next_rows is not None else None,
        "mean_true_share": float(np.mean(shares)) if shares else None,
        "mean_plain_true_share": float(np.mean(plain_shares)) if plain_shares else None,
        "mean_next_volume": float(np.mean(volumes)) if volumes else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200, help="train draws")
    parser.add_argument("--score-draws", type=int, default=1000, help="draws per score setting")
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    draws, score_draws = (10, 50) if args.quick else (args.draws, args.score_draws)
    trained = train_part(draws, rows=args.rows, target=0.7, confidence=0.9, budget=0.1)
    print(f"train: {trained['answered']} of {draws} draws answered, {args.rows:,} rows each, judged on {FRESH:,}")
    print_table(
        [{k: v for k, v in trained.items() if k != "draw_results"}],
        ["target", "confidence", "budget", "answered", "precision_below_floor_share", "min_fresh_precision",
         "mean_fresh_precision", "volume_over_budget_share", "mean_fresh_volume", "max_fresh_volume",
         "mean_review_recall"],
    )  # fmt: skip
    scored = [score_setting(setting, score_draws, seed=i) for i, setting in enumerate(SCORE_SETTINGS)]
    print(f"\nscores: {score_draws} draws a setting, truth from the binormal model")
    print_table(
        scored,
        ["setting", "answered", "precision_miss_share", "share_miss_share", "plain_share_miss_share",
         "next_miss_share", "mean_true_share", "mean_plain_true_share"],
    )  # fmt: skip
    name = "review_band_quick" if args.quick else "review_band"
    path = write_results(name, {"train": trained, "scores": scored})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()

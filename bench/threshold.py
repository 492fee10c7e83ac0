"""Exact threshold search speed and accuracy.

1. 10,000,000 scores (5% positives): dmo's exact search per problem vs
   sklearn.metrics.precision_recall_curve on the same scores (which returns the
   curve only; the operating point still has to be picked from it).
2. 200,000 x 50 data: best-F1 threshold of TunedThresholdClassifierCV (default
   grid) vs dmo's exact search on the same logistic-regression scores: F1 gap
   and wall times.

Usage: python bench/threshold.py [--n 10000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import print_table, write_results
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, precision_recall_curve
from sklearn.model_selection import TunedThresholdClassifierCV

from dmocli.operating_point.problems import Problem
from dmocli.operating_point.search import search


def best_of(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def large_scale(n: int, repeats: int) -> list[dict]:
    rng = np.random.default_rng(0)
    y = (rng.random(n) < 0.05).astype(np.int8)
    scores = (rng.normal(size=n) + 1.5 * y).astype(np.float32)
    sk_seconds, _ = best_of(lambda: precision_recall_curve(y, scores), repeats)
    rows = [{"method": "sklearn precision_recall_curve (curve only)", "seconds": sk_seconds, "speedup": 1.0}]
    for problem in (Problem("fpor", 0.8), Problem("frop", 0.8), Problem("ofbs")):
        seconds, point = best_of(lambda: search(scores, y, problem), repeats)
        rows.append(
            {
                "method": f"dmo exact search {problem.kind}",
                "seconds": seconds,
                "speedup": sk_seconds / seconds,
                "objective": point.objective,
            }
        )
    return rows


def tuned_vs_exact(n: int = 200_000, d: int = 50) -> dict:
    rng = np.random.default_rng(1)
    w = rng.normal(size=d) / np.sqrt(d)
    X = rng.normal(size=(n, d)).astype(np.float32)
    logits = X @ w * 3 - 3.5
    y = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(np.int64)
    base = LogisticRegression(max_iter=200)
    t = time.perf_counter()
    tuned = TunedThresholdClassifierCV(base, scoring="f1", refit=True, cv=5, random_state=0).fit(X, y)
    tuned_seconds = time.perf_counter() - t
    # Same scores for both: the refitted estimator's probabilities on the training data.
    proba = tuned.estimator_.predict_proba(X)[:, 1].astype(np.float32)
    f1_grid = f1_score(y, proba >= tuned.best_threshold_)
    t = time.perf_counter()
    point = search(proba, y, Problem("ofbs"))
    exact_seconds = time.perf_counter() - t
    return {
        "rows": n,
        "features": d,
        "positives": int(y.sum()),
        "tuned_threshold": float(tuned.best_threshold_),
        "tuned_f1": float(f1_grid),
        "tuned_seconds (5-fold CV fits + grid)": tuned_seconds,
        "exact_threshold": point.threshold,
        "exact_f1": point.f_beta,
        "exact_seconds": exact_seconds,
        "f1_gap": point.f_beta - f1_grid,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = large_scale(args.n, args.repeats)
    print(f"Exact search on {args.n:,} float32 scores (5% positives), best of {args.repeats}:")
    print_table(rows, ["method", "seconds", "speedup", "objective"])
    tuned = tuned_vs_exact()
    print("\nBest-F1 threshold on 200,000 x 50 (same logistic-regression scores):")
    for k, v in tuned.items():
        print(f"  {k}: {v:.6g}" if isinstance(v, float) else f"  {k}: {v}")
    path = write_results("threshold", {"n": args.n, "large_scale": rows, "tuned_vs_exact": tuned})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()

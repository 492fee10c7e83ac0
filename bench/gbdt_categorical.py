"""One-hot categorical columns (what dmo does for every model family) against XGBoost's native categorical
splits, on generated data: which should `--model gbdt` use?

A label whose log-odds are a per-level effect of one categorical column (5, 30 or 200 levels, effects drawn
N(0, 1.5^2)) plus a smooth effect of four numeric columns; 20,000 training rows (25 % held out for early
stopping on average precision), 20,000 test rows, 3 seeds. Both encodings get the same trees (depth 6, eta 0.1,
class weights, at most 1000 rounds, early stopping after 50).

    python bench/gbdt_categorical.py            # writes bench/results/gbdt_categorical.json
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402


def make(n: int, levels: int, effects: np.ndarray, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    X = rng.normal(size=(n, 4))
    level = rng.integers(0, levels, n)
    logit = effects[level] + np.sin(X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] - 2.5
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(4)]).assign(level=[f"L{v}" for v in level])
    return frame, y


def fit(train: pd.DataFrame, y: np.ndarray, test: pd.DataFrame, y_test: np.ndarray, native: bool, seed: int):
    import xgboost as xgb
    from sklearn.metrics import average_precision_score

    if native:
        cats = pd.CategoricalDtype(sorted(train["level"].unique()))
        train, test = (f.assign(level=f["level"].astype(cats)) for f in (train, test))
    else:
        both = pd.get_dummies(pd.concat([train, test]), columns=["level"], dtype=np.float32)
        train, test = both.iloc[: len(train)], both.iloc[len(train) :]
    cut = int(0.75 * len(train))
    weight = np.where(y == 1, len(y) / (2 * y.sum()), len(y) / (2 * (len(y) - y.sum())))
    dtrain = xgb.DMatrix(train.iloc[:cut], y[:cut], weight=weight[:cut], enable_categorical=native)
    dval = xgb.DMatrix(train.iloc[cut:], y[cut:], enable_categorical=native)
    params = {"objective": "binary:logistic", "eval_metric": "aucpr", "tree_method": "hist", "max_depth": 6,
              "eta": 0.1, "seed": seed, "nthread": 1}  # fmt: skip
    started = time.perf_counter()
    booster = xgb.train(params, dtrain, 1000, evals=[(dval, "val")], early_stopping_rounds=50, verbose_eval=False)
    seconds = time.perf_counter() - started
    scores = booster.predict(
        xgb.DMatrix(test, enable_categorical=native), iteration_range=(0, booster.best_iteration + 1)
    )
    return average_precision_score(y_test, scores), seconds, booster.best_iteration + 1


def main() -> None:
    rows = []
    for levels in (5, 30, 200):
        for native in (False, True):
            results = []
            for seed in range(3):
                rng = np.random.default_rng(seed)
                effects = rng.normal(0, 1.5, levels)
                train, y = make(20_000, levels, effects, rng)
                test, y_test = make(20_000, levels, effects, rng)
                results.append(fit(train, y, test, y_test, native, seed))
            ap, seconds, rounds = (float(np.mean(v)) for v in zip(*results))
            rows.append({"levels": levels, "encoding": "native" if native else "one-hot", "seeds": 3,
                         "test_average_precision": ap, "fit_seconds": seconds, "rounds": rounds})  # fmt: skip
    print_table(rows, ["levels", "encoding", "seeds", "test_average_precision", "fit_seconds", "rounds"])
    print(f"\nwrote {write_results('gbdt_categorical', {'rows': rows})}")


if __name__ == "__main__":
    main()

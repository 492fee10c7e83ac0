"""Multi-class probabilities: which map from logits to P(class | x), and what `dmo train` gives before and after.

A. The choice. A model is trained on DATA with a validation file (`--val`); every candidate map is fitted by
   maximum likelihood on the validation logits and judged on a large test set: log loss, multi-class Brier score,
   ECE of the predicted class's probability, and the worst relative gap between a class's mean probability and its
   test rate. Candidates: softmax (none), temperature (logits / T), bias (logits + b), temperature + bias (the
   one dmo fits), vector scaling (a_k logit_k + b_k) and matrix scaling (W logits + b).
B. The product. `dmo train` as a user runs it (default: 5-fold out-of-fold logits) on DATA + VAL pooled; on the
   test set, the raw softmax against the calibrated probabilities.

Data: Gaussian mixtures with known priors (x | y=k ~ N(mu_k, s_k^2 I)), linear (shared covariance) or not
(class-dependent scales), and the multi-class sets of ../shared/data (letter, optdigits: balanced classes).

    python bench/multiclass_calibration.py --seeds 3      # writes bench/results/multiclass_calibration.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, print_table, write_results  # noqa: E402

from dmocli import TrainOptions, train  # noqa: E402
from dmocli.operating_point.multiclass_calibration import fit_temperature_bias, multiclass_calibration_figures, softmax  # noqa: E402

CASES = {  # name: (priors, per-class scale of the noise, separation)
    "gauss3 .85/.10/.05": ((0.85, 0.10, 0.05), (1.0, 1.0, 1.0), 0.5),
    "gauss4 .80/.12/.05/.03": ((0.80, 0.12, 0.05, 0.03), (1.0, 1.0, 1.0, 1.0), 0.6),
    "gauss3 hetero .85/.10/.05": ((0.85, 0.10, 0.05), (1.0, 1.6, 0.6), 0.5),
}
SHARED_SETS = ("letter", "optdigits")
D = 10


def gaussian_table(n: int, priors: tuple[float, ...], scales: tuple[float, ...], sep: float, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    y = rng.choice(len(priors), size=n, p=np.asarray(priors))
    means = np.linspace(sep, -sep, len(priors))[:, None] * np.ones((1, D))
    means[:, 0] += np.arange(len(priors)) * sep  # the classes apart along a second direction too
    X = rng.normal(size=(n, D)) * np.asarray(scales)[y, None] + means[y]
    return pa.table({**{f"x{i}": X[:, i].astype(np.float32) for i in range(D)}, "label": y})


def fit_affine(z: np.ndarray, y: np.ndarray, per_class_scale: bool, scale: bool, bias: bool) -> Callable:
    """softmax(a * z + b) with a one number, one per class or 1, b per class or 0, fitted by maximum likelihood."""
    n, k = z.shape
    onehot = np.eye(k)[y]
    n_scale = (k if per_class_scale else 1) if scale else 0

    def unpack(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a = p[:n_scale] if n_scale else np.ones(1)
        b = p[n_scale:] if bias else np.zeros(k)
        return a, b

    def loss(p: np.ndarray) -> tuple[float, np.ndarray]:
        a, b = unpack(p)
        q = softmax(a * z + b)
        nll = -np.mean(np.log(np.clip(q[np.arange(n), y], 1e-300, None)))
        r = (q - onehot) / n
        grads = []
        if n_scale:
            grads.append((r * z).sum(axis=0) if per_class_scale else [np.sum(r * z)])
        if bias:
            grads.append(r.sum(axis=0))
        return nll, np.concatenate(grads)

    start = np.concatenate([np.ones(n_scale), np.zeros(k if bias else 0)])
    a, b = unpack(minimize(loss, start, jac=True, method="L-BFGS-B").x)
    return lambda logits: softmax(a * logits + b)


def fit_matrix(z: np.ndarray, y: np.ndarray) -> Callable:
    from sklearn.linear_model import LogisticRegression

    fit = LogisticRegression(C=1e4, max_iter=2000).fit(z, y)
    return lambda logits: fit.predict_proba(logits)


def candidates(z: np.ndarray, y: np.ndarray) -> dict[str, Callable]:
    product = fit_temperature_bias(z, y, "val")
    return {
        "softmax": softmax,
        "temperature": fit_affine(z, y, False, True, False),
        "bias": fit_affine(z, y, False, False, True),
        "temperature+bias": product.probabilities,
        "vector": fit_affine(z, y, True, True, True),
        "matrix": fit_matrix(z, y),
    }


def judge(proba: np.ndarray, z: np.ndarray, y: np.ndarray) -> dict[str, float]:
    figures = multiclass_calibration_figures(proba, y, z.argmax(axis=1))
    rate, mean = np.asarray(figures["class_rate"]), np.asarray(figures["mean_probability"])
    return {
        "log_loss": float(-np.mean(np.log(np.clip(proba[np.arange(y.size), y], 1e-15, None)))),
        "brier": figures["brier"],
        "ece": figures["ece"],
        "worst_rate_gap": float(np.max(np.abs(mean / rate - 1.0))),
        "mean_probability": mean.round(4).tolist(),
        "class_rate": rate.round(4).tolist(),
    }


def logits_and_labels(model: Any, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    z, _ = model.logits(table)
    return z.astype(np.float64), model.labels.encode(table.column("label"))


def one_set(name: str, data: pa.Table, val: pa.Table, test: pa.Table, model_kind: str, seed: int) -> list[dict]:
    rows = []
    opts = dict(problem="multiclass", model=model_kind, seed=seed, device="cpu")
    model, _ = train(data, TrainOptions(**opts, val=_written(val, f"val-{seed}")))
    z_val, y_val = logits_and_labels(model, val)
    z_test, y_test = logits_and_labels(model, test)
    for method, mapping in candidates(z_val, y_val).items():
        rows.append(
            {
                "part": "A",
                "set": name,
                "model": model_kind,
                "seed": seed,
                "method": method,
                **judge(mapping(z_test), z_test, y_test),
            }
        )
    pooled = pa.concat_tables([data, val])
    started = time.perf_counter()
    model, report = train(pooled, TrainOptions(**opts))  # dmo train's default: --cv 5
    seconds = time.perf_counter() - started
    z_test, y_test = logits_and_labels(model, test)
    for method, proba in (("raw softmax", softmax(z_test)), ("dmo (cv5)", model.class_probabilities(z_test))):
        rows.append(
            {
                "part": "B",
                "set": name,
                "model": model_kind,
                "seed": seed,
                "method": method,
                "train_seconds": seconds,
                **judge(proba, z_test, y_test),
            }
        )
    return rows


_TMP = Path("/tmp/dmo-bench-mcal")


def _written(table: pa.Table, name: str) -> Path:
    _TMP.mkdir(exist_ok=True)
    path = _TMP / f"{name}.parquet"
    pq.write_table(table, path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=["linear", "mlp"])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--no-shared", action="store_true", help="generated data only")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    rows: list[dict] = []
    for model_kind in args.models:
        for name, (priors, scales, sep) in CASES.items():
            for seed in range(args.seeds):
                data = gaussian_table(3000, priors, scales, sep, 100 * seed)
                val = gaussian_table(1500, priors, scales, sep, 100 * seed + 1)
                test = gaussian_table(50_000, priors, scales, sep, 100 * seed + 2)
                rows += one_set(name, data, val, test, model_kind, seed)
                print(f"{model_kind} {name} seed {seed} done", file=sys.stderr)
        for name in () if args.no_shared else SHARED_SETS:
            data, val, test = (pq.read_table(args.data / name / f"{s}.parquet") for s in ("train", "val", "test"))
            rows += one_set(name, data, val, test, model_kind, 0)
            print(f"{model_kind} {name} done", file=sys.stderr)
    summary = _summary(rows)
    print_table(summary, ["part", "set", "model", "method", "runs", "log_loss", "brier", "ece", "worst_rate_gap"])
    print(
        write_results(
            "multiclass_calibration", {"args": vars(args) | {"data": str(args.data)}, "rows": rows, "summary": summary}
        )
    )


def _summary(rows: list[dict]) -> list[dict]:
    """Means over seeds, per part, set, model and method."""
    keys = sorted(dict.fromkeys((r["part"], r["set"], r["model"], r["method"]) for r in rows), key=lambda k: k[0])
    out = []
    for part, name, model, method in keys:
        group = [r for r in rows if (r["part"], r["set"], r["model"], r["method"]) == (part, name, model, method)]
        figures = {m: float(np.mean([r[m] for r in group])) for m in ("log_loss", "brier", "ece", "worst_rate_gap")}
        out.append(
            {
                "part": part,
                "set": name,
                "model": model,
                "method": method,
                "runs": len(group),
                **figures,
                "mean_probability": group[0]["mean_probability"],
                "class_rate": group[0]["class_rate"],
            }
        )
    return out


if __name__ == "__main__":
    main()

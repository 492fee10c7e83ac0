"""wce's linear model: L-BFGS (the default: the exact optimum) against Adam mini-batches (`--param optimizer=adam`).

    python bench/wce_optimizers.py [--data-dir ../shared/data] [--rows 2000000] [--cols 50]

Two parts, one run, the same machine:
1. a synthetic set of `rows` x `cols` float32 rows (a linear label, ~20 % positives, 100,000 more rows as
   validation): fit seconds, whole-train seconds, the class-weighted training loss reached, and the FPOR 0.8
   operating point on the validation rows;
2. the binary benchmark sets, FPOR 0.8 / FROP 0.8 / OFBS with the threshold adjusted on the validation split
   (`dmo train --val`, the default use): the training loss and the test objective per optimizer, and how often
   L-BFGS's test objective is better, equal or worse (feasible before infeasible, then the objective).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BINARY_SETS, DEFAULT_DATA, print_table, write_results  # noqa: E402

from dmocli import TrainOptions, train  # noqa: E402
from dmocli.data import reading, sinks  # noqa: E402
from dmocli.models.modelfile import load_model  # noqa: E402
from dmocli.use.evaluate import evaluate  # noqa: E402

OPTIMIZERS = ("adam", "lbfgs")
PROBLEMS = (("fpor", 0.8), ("frop", 0.8), ("ofbs", None))


def weighted_loss(model_path: Path, data) -> float:
    """The class-balanced log loss the fit minimizes (without its small L2 term), on the training rows."""
    model = load_model(model_path)
    table = data if isinstance(data, pa.Table) else reading.read_table(data)
    logits, _ = model.logits(table)
    y = model.labels.encode(table.column(model.labels.column)).astype(np.float64)
    z = logits.reshape(-1).astype(np.float64)
    per_row = np.logaddexp(0.0, z) - y * z
    pos = y.mean()
    weights = np.where(y == 1, 0.5 / pos, 0.5 / (1 - pos))
    return float((weights * per_row).mean())


def _rank(split: dict, problem: str) -> tuple[float, float]:
    if problem == "ofbs":
        return (1.0, split["f_beta"])
    objective, constraint = ("recall", "precision") if problem == "fpor" else ("precision", "recall")
    return (1.0, split[objective]) if split["feasible"] else (0.0, split[constraint])


def synthetic(rows: int, cols: int, workdir: Path) -> list[dict]:
    rng = np.random.default_rng(0)
    w = rng.normal(size=cols)

    def table(n: int) -> pa.Table:
        X = rng.standard_normal((n, cols), dtype=np.float32)
        y = (X @ w + 3.0 * rng.standard_normal(n) > 6.0).astype(np.int64)
        return pa.table(
            [pa.array(X[:, j]) for j in range(cols)] + [pa.array(y)], names=[f"x{j}" for j in range(cols)] + ["label"]
        )

    train_table, val_path = table(rows), workdir / "val.parquet"
    sinks.write_parquet(val_path, table(100_000))
    out = []
    for optimizer in OPTIMIZERS:
        path = workdir / f"synthetic-{optimizer}.safetensors"
        started = time.perf_counter()
        _, report = train(
            train_table,
            TrainOptions(problem="fpor", target=0.8, val=val_path, device="cpu", params={"optimizer": optimizer}),
            output=path,
        )
        val = report["splits"]["val"]
        out.append(
            {
                "part": f"synthetic {rows}x{cols}",
                "optimizer": optimizer,
                "fit_s": report["fit_seconds"],
                "train_s": time.perf_counter() - started,
                "train_loss": weighted_loss(path, train_table),
                "val_precision": val["precision"],
                "val_recall": val["recall"],
            }
        )
    return out


def benchmark_sets(data_dir: Path, workdir: Path) -> tuple[list[dict], dict]:
    rows, tally = [], {"better": 0, "equal": 0, "worse": 0}
    for name in BINARY_SETS:
        folder = data_dir / name
        for problem, target in PROBLEMS:
            cells = {}
            for optimizer in OPTIMIZERS:
                path = workdir / f"{name}-{problem}-{optimizer}.safetensors"
                _, report = train(
                    folder / "train.parquet",
                    TrainOptions(
                        problem=problem,
                        target=target,
                        val=folder / "val.parquet",
                        device="cpu",
                        allow_infeasible=True,
                        params={"optimizer": optimizer},
                    ),
                    output=path,
                )
                test = evaluate(path, folder / "test.parquet")["splits"]["data"]
                cells[optimizer] = (report, test)
                rows.append(
                    {
                        "set": name,
                        "problem": problem,
                        "optimizer": optimizer,
                        "fit_s": report["fit_seconds"],
                        "train_loss": weighted_loss(path, folder / "train.parquet"),
                        "test_objective": _rank(test, problem)[1],
                        "test_feasible": test.get("feasible"),
                    }
                )
            new, old = _rank(cells["lbfgs"][1], problem), _rank(cells["adam"][1], problem)
            tally["better" if new > old else "equal" if new == old else "worse"] += 1
    return rows, tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--cols", type=int, default=50)
    parser.add_argument("--skip-sets", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        big = synthetic(args.rows, args.cols, workdir)
        print_table(big, ["part", "optimizer", "fit_s", "train_s", "train_loss", "val_precision", "val_recall"])
        sets, tally = ([], {}) if args.skip_sets else benchmark_sets(args.data_dir, workdir)
    if sets:
        print_table(sets, ["set", "problem", "optimizer", "fit_s", "train_loss", "test_objective", "test_feasible"])
        lower = sum(a["train_loss"] < b["train_loss"] + 1e-12 for a, b in zip(sets[1::2], sets[0::2]))
        print(f"L-BFGS test objective vs Adam (TA on val): {tally}; lower training loss in {lower} of {len(sets) // 2}")
    path = write_results("wce_optimizers", {"synthetic": big, "sets": sets, "test_vs_adam": tally})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

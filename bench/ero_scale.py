"""ERO in mini-batch mode at scale: seconds per epoch and peak memory on synthetic rows.

Generates ROWS x FEATURES float32 rows with POS positives (Gaussian
features, positives shifted along a random unit direction, so FROP 0.8 is
reachable but not trivial) plus a validation split of a tenth the size,
writes both as parquet, and runs `dmocli.train` with `--solver ero`
(`--param mode=minibatch`) as a user would. Reported per run: the warm
start's seconds, every outer iteration's seconds and subproblem epochs (so
seconds per epoch of the penalty phase, the exact full pass and the
selection included), the end-to-end fit seconds, train/val precision and
recall before threshold adjustment, peak GPU memory on CUDA (torch's
allocator: `max_memory_allocated` and `max_memory_reserved`) and peak RSS.
Each model runs in a fresh process, so its peak RSS is its own (loading the
parquet file included, generating it excluded).

    python bench/ero_scale.py --rows 2000000 --features 128 --device cuda
    python bench/ero_scale.py --rows 200000 --device cpu --param outer=1   # a CPU reference point

Prints a table and writes bench/results/ero_scale.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from _common import print_table, write_results

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dmocli import TrainOptions, train  # noqa: E402


def synthetic(rows: int, features: int, pos: float, shift: float, seed: int) -> pa.Table:
    """Standard normal features; positives moved by `shift` along one random unit direction."""
    rng = np.random.default_rng(seed)
    direction = np.random.default_rng(12345).normal(size=features)
    direction /= np.linalg.norm(direction)
    y = (rng.random(rows) < pos).astype(np.int8)
    X = rng.standard_normal((rows, features), dtype=np.float32)
    X += (shift * y[:, None] * direction[None, :]).astype(np.float32)
    columns = {f"x{j}": X[:, j] for j in range(features)}
    columns["label"] = y
    return pa.table(columns)


def run(args: argparse.Namespace, model: str, data_dir: Path) -> dict:
    params = {"mode": "minibatch", **dict(kv.split("=", 1) for kv in args.param)}
    opts = TrainOptions(
        problem="frop",
        target=0.8,
        solver="ero",
        model=model,
        width=args.width,
        depth=args.depth,
        val=data_dir / "val.parquet",
        device=args.device,
        seed=args.seed,
        params=params,
        allow_infeasible=True,
        adjust=False,
    )
    cuda = torch.cuda.is_available() and args.device != "cpu"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    _, report = train(data_dir / "train.parquet", opts, output=data_dir / f"{model}.safetensors")
    wall = time.perf_counter() - started
    trace = report["solver_trace"]
    history = trace["history"]
    epochs = [h["steps"] * trace["batch_size"] / args.rows for h in history]
    outer_seconds = [h["seconds"] for h in history]
    row = {
        "rows": args.rows,
        "features": args.features,
        "model": model,
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if cuda else "cpu",
        "mode": trace["mode"],
        "batch_size": trace["batch_size"],
        "warm_start": trace["warm_start_steps"],
        "warm_start_unit": "epochs" if trace["settings"]["warm_start"] == "wce" else "steps",
        "warm_start_seconds": trace["warm_start_seconds"],
        "outer_iterations": len(history),
        "penalty_epochs": sum(epochs),
        "penalty_seconds": sum(outer_seconds),
        "seconds_per_penalty_epoch": sum(outer_seconds) / max(sum(epochs), 1e-9),
        "fit_seconds": report["fit_seconds"],
        "wall_seconds": wall,
        "train_before_ta": trace["train_before_ta"],
        "val_before_ta": report["splits"]["val"],
        "outer": [{"seconds": s, "epochs": e} for s, e in zip(outer_seconds, epochs)],
        "params": params,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }
    if cuda:
        row["peak_gpu_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        row["peak_gpu_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--pos", type=float, default=0.01)
    parser.add_argument("--shift", type=float, default=3.0, help="distance of the positives' mean along the direction")
    parser.add_argument("--models", default="mlp,linear")
    parser.add_argument("--width", type=int, default=100)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="extra ERO --param")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--one-model-on", type=Path, default=None, help=argparse.SUPPRESS)  # child process: one run
    args = parser.parse_args()
    if args.one_model_on is not None:
        print(json.dumps(run(args, args.models, args.one_model_on)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        started = time.perf_counter()
        pq.write_table(synthetic(args.rows, args.features, args.pos, args.shift, args.seed), data_dir / "train.parquet")
        pq.write_table(
            synthetic(max(args.rows // 10, 1000), args.features, args.pos, args.shift, args.seed + 1),
            data_dir / "val.parquet",
        )
        print(f"data written in {time.perf_counter() - started:.1f} s", flush=True)
        child = [
            f"--rows={args.rows}",
            f"--features={args.features}",
            f"--width={args.width}",
            f"--depth={args.depth}",
            f"--device={args.device}",
            f"--seed={args.seed}",
            *(f"--param={kv}" for kv in args.param),
        ]
        for model in args.models.split(","):
            out = subprocess.run(
                [sys.executable, __file__, *child, f"--models={model}", f"--one-model-on={data_dir}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "outer"}), flush=True)
    columns = [
        "model",
        "device_name",
        "batch_size",
        "warm_start",
        "warm_start_unit",
        "warm_start_seconds",
        "outer_iterations",
        "penalty_epochs",
        "seconds_per_penalty_epoch",
        "fit_seconds",
        "peak_gpu_allocated_gib",
        "peak_gpu_reserved_gib",
        "peak_rss_gib",
    ]
    print_table(rows, columns)
    payload = {"rows": rows}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(payload, indent=2) + "\n")
        print(f"wrote {args.out}")
    else:
        print(f"wrote {write_results('ero_scale', payload)}")


if __name__ == "__main__":
    main()

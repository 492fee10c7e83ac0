"""Benchmark of the streaming solvers (fofo, ofo, lr): throughput, online F1, and flat memory.

    python bench/fofo.py [--data-dir ../shared/data] [--tmp /tmp] [--rows 2000000] [--width 50]

Prints tables and writes bench/results/fofo.json. Sections:
1. throughput on one parquet file of ROWS x WIDTH float32 (5% positives): `dmo train --solver fofo`
   (end to end, and its two passes), a plain pyarrow read of the same file (the I/O ceiling), and
   Vowpal Wabbit (logistic loss, one pass from text and from its cache) when `vowpalwabbit` is installed;
   plus the threshold recurrence alone, vectorized vs a per-row Python loop;
2. online F1 after one pass for fofo, ofo, lr on synthetic logistic streams (1%, 5%, 20% positives,
   3 seeds) and on the binary sets of --data-dir (rows shuffled; tiny sets also with several passes);
   with --paper-tuning also 2c: the same sets under the paper's protocol (lr tuned per method on val);
3. peak RSS of `dmo train --solver fofo` on 1M vs 8M rows of the same width (median of 3 runs each).
Generated files go under --tmp and are removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from _common import BINARY_SETS, DEFAULT_DATA, print_table, write_results

from dmocli import TrainOptions, train
from dmocli.data import reading
from dmocli.solvers.online.thresholds import FofoThreshold
from dmocli.use.evaluate import evaluate

DMO = [str(Path(sys.executable).with_name("dmo"))]
SOLVERS = ("fofo", "ofo", "lr")
REPEATS = 3  # end-to-end commands (dmo train, VW from cache) are timed this many times; the median is reported
LAUNCHER = (
    "import os, subprocess, sys; p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL); "
    "_, status, usage = os.wait4(p.pid, 0); print(usage.ru_maxrss); sys.exit(os.waitstatus_to_exitcode(status))"
)


# ---- data ----------------------------------------------------------------------------------------------
def write_logistic_parquet(path: Path, rows: int, width: int, pos: float, seed: int, chunk: int = 250_000) -> None:
    """float32 features N(0, I), labels from a logistic model with ~`pos` positives; written in chunks."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=width) * 2.5 / np.sqrt(width)
    bias = _bias_for_rate(rng.normal(size=(50_000, width)) @ w, pos)
    schema = pa.schema([(f"x{i}", pa.float32()) for i in range(width)] + [("label", pa.int64())])
    with pq.ParquetWriter(path, schema, use_dictionary=False) as writer:  # random floats do not dictionary-encode
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            X = rng.normal(size=(n, width)).astype(np.float32)
            y = (rng.random(n) < 1 / (1 + np.exp(-(X @ w + bias)))).astype(np.int64)
            writer.write_table(pa.table([*(X[:, i] for i in range(width)), y], schema=schema), row_group_size=65536)


def _bias_for_rate(z: np.ndarray, pos: float) -> float:
    lo, hi = -30.0, 10.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if (1 / (1 + np.exp(-(z + mid)))).mean() > pos else (mid, hi)
    return (lo + hi) / 2


def logistic_arrays(rows: int, width: int, pos: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = rng.normal(size=width) * 2.5 / np.sqrt(width)
    X = rng.normal(size=(rows, width)).astype(np.float32)
    z = X @ w
    eta = 1 / (1 + np.exp(-(z + _bias_for_rate(z[:50_000], pos))))
    return X, (rng.random(rows) < eta).astype(np.int64)


# ---- 1. throughput -------------------------------------------------------------------------------------
def timed(command: list[str]) -> tuple[float, str]:
    """Wall seconds of a subprocess (start-up included) and its stderr."""
    started = time.perf_counter()
    proc = subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return time.perf_counter() - started, proc.stderr


def throughput(tmp: Path, rows: int, width: int) -> dict:
    data = tmp / "fofo_bench.parquet"
    write_logistic_parquet(data, rows, width, 0.05, seed=0)
    out: dict = {"rows": rows, "width": width, "file_mb": round(data.stat().st_size / 2**20, 1)}

    sum(b.num_rows for b in reading.iter_batches(data))  # warm the page cache so both reads below start equal
    started = time.perf_counter()
    n = sum(b.num_rows for b in pads.dataset(str(data)).to_batches(batch_size=65536))
    out["pyarrow_dataset_read_rows_s"] = n / (time.perf_counter() - started)
    started = time.perf_counter()
    n = sum(b.num_rows for b in reading.iter_batches(data))
    out["dmocli_io_read_rows_s"] = n / (time.perf_counter() - started)

    report_path = tmp / "fofo_bench_report.json"
    walls = []
    for _ in range(REPEATS):  # the median of a few runs: one run of a ~2 s command is at the mercy of the OS
        wall, _ = timed(
            [
                *DMO,
                "train",
                str(data),
                "--solver",
                "fofo",
                "-o",
                str(tmp / "fofo_bench.safetensors"),
                "--report",
                str(report_path),
            ]
        )
        walls.append(wall)
    wall = statistics.median(walls)
    report = json.loads(report_path.read_text())  # the last run's; its rows/s figures vary less than the wall
    out["dmo_train_wall_s"] = wall
    out["dmo_train_wall_s_runs"] = walls
    out["dmo_train_end_to_end_rows_s"] = rows / wall
    out["dmo_train_two_passes_rows_s"] = rows / (report["prepass_seconds"] + report["fit_seconds"])
    out["dmo_train_prepass_rows_s"] = rows / report["prepass_seconds"]
    out["dmo_train_learning_pass_rows_s"] = report["online"]["rows_per_second"]
    out["dmo_online_f1"] = report["online"]["f_beta"]
    out["dmo_prepass_statistics"] = f"{report['prepass']['statistics']} ({report['prepass']['statistics_rows']:,} rows)"
    exact_report = tmp / "fofo_bench_exact.json"
    wall, _ = timed(
        [
            *DMO,
            "train",
            str(data),
            "--solver",
            "fofo",
            "--param",
            "stats-rows=0",
            "-o",
            str(tmp / "fofo_bench_exact.safetensors"),
            "--report",
            str(exact_report),
        ]
    )
    exact = json.loads(exact_report.read_text())
    out["dmo_train_exact_prepass_end_to_end_rows_s"] = rows / wall
    out["dmo_train_exact_prepass_rows_s"] = rows / exact["prepass_seconds"]
    out.update(vowpal_wabbit(data, tmp))
    if "vw_from_cache_rows_s" in out:
        out["ratio_learning_pass_vs_vw_cache"] = out["dmo_train_learning_pass_rows_s"] / out["vw_from_cache_rows_s"]
        out["ratio_two_passes_vs_vw_cache"] = out["dmo_train_two_passes_rows_s"] / out["vw_from_cache_rows_s"]
        out["ratio_end_to_end_vs_vw_cache"] = out["dmo_train_end_to_end_rows_s"] / out["vw_from_cache_rows_s"]
    out.update(threshold_recurrence())
    data.unlink()
    return out


def vowpal_wabbit(data: Path, tmp: Path) -> dict:
    try:
        import vowpalwabbit  # noqa: F401
    except ImportError:
        return {"vw": "not installed (pip install vowpalwabbit)"}
    text, cache = tmp / "fofo_bench.vw", tmp / "fofo_bench.vw.cache"
    rows = 0
    with open(text, "wb") as handle:  # "label |f 0:v0 1:v1 ..." built by arrow compute, not per row in Python
        for batch in reading.iter_batches(data):
            label = pc.if_else(pc.equal(batch.column("label"), 1), "1 |f", "-1 |f")
            features = [
                pc.binary_join_element_wise(f"{i}:", pc.cast(batch.column(name), pa.string()), "")
                for i, name in enumerate(batch.schema.names)
                if name != "label"
            ]
            lines = pc.binary_join_element_wise(label, *features, " ")
            handle.write(("\n".join(lines.to_pylist()) + "\n").encode())
            rows += batch.num_rows
    # VW defaults (adaptive, normalized, invariant SGD; 18 bits), logistic loss, one pass. The second run is
    # given the same -d and finds the cache, which it then reads instead of the text.
    vw = [
        sys.executable,
        "-m",
        "vowpalwabbit",
        "--loss_function",
        "logistic",
        "-d",
        str(text),
        "--cache_file",
        str(cache),
    ]
    if cache.exists():
        cache.unlink()
    from_text, log_text = timed(vw)  # parses the text and writes the cache
    cache_runs = [timed(vw) for _ in range(REPEATS)]
    from_cache, log_cache = statistics.median(t for t, _ in cache_runs), cache_runs[-1][1]
    for log in (log_text, log_cache):
        seen = int(log.split("number of examples = ")[1].split()[0])
        assert seen == rows, f"VW processed {seen} examples, expected {rows}:\n{log[-2000:]}"
    assert "ignoring text input in favor of cache input" in log_cache
    out = {
        "vw_version": vowpalwabbit.__version__,
        "vw_text_mb": round(text.stat().st_size / 2**20, 1),
        "vw_from_text_rows_s": rows / from_text,
        "vw_from_cache_rows_s": rows / from_cache,
        "vw_from_cache_wall_s_runs": [t for t, _ in cache_runs],
    }
    text.unlink()
    cache.unlink()
    return out


def threshold_recurrence(rows: int = 1_000_000) -> dict:
    """FOFO's threshold learner alone on given posteriors: vectorized vs a per-row Python loop."""
    rng = np.random.default_rng(0)
    eta = rng.beta(0.5, 9.5, rows)
    y = (rng.random(rows) < eta).astype(np.int64)
    learner = FofoThreshold(1.0, rows)
    started = time.perf_counter()
    for i in range(0, rows, 65536):
        learner.process(eta[i : i + 65536], y[i : i + 65536])
    vectorized = rows / (time.perf_counter() - started)
    loop_rows = 200_000
    started = time.perf_counter()
    theta, avg, pos, gamma = 0.0, 0.0, 0, 0.5 / math.sqrt(10 * loop_rows / 7)
    for t, (e, label) in enumerate(zip(eta[:loop_rows].tolist(), y[:loop_rows].tolist()), start=1):
        pos += label
        theta = min(max(theta - gamma * (-max(e - theta, 0.0) + pos / t * theta), 0.0), 0.5)
        avg += (theta - avg) / (t + 1)
    loop = loop_rows / (time.perf_counter() - started)
    return {"threshold_vectorized_rows_s": vectorized, "threshold_python_loop_rows_s": loop}


# ---- 2. online F1 --------------------------------------------------------------------------------------
def synthetic_online_f1(rows: int, width: int) -> list[dict]:
    import torch

    from dmocli.models.networks import Architecture
    from dmocli.operating_point.problems import Problem
    from dmocli.solvers import get_solver
    from dmocli.solvers.base import FitContext, Stream

    results = []
    for pos in (0.01, 0.05, 0.20):
        for seed in range(3):
            X, y = logistic_arrays(rows, width, pos, seed)
            row = {"set": f"synthetic {pos:.0%}", "seed": seed, "rows": rows}
            for name in SOLVERS:
                solver = get_solver(name)
                ctx = FitContext(
                    Problem("ofbs"),
                    Architecture("linear", width, 1),
                    torch.device("cpu"),
                    seed,
                    solver.parse_params({}),
                )
                batches = lambda: ((X[i : i + 65536], y[i : i + 65536]) for i in range(0, rows, 65536))  # noqa: E731
                fit = solver.fit_stream(Stream(batches, rows, width), ctx)
                row[name] = fit.online["f_beta"]
            results.append(row)
    return results


def shared_sets_online_f1(data_dir: Path, tmp: Path) -> list[dict]:
    results = []
    for name in BINARY_SETS:
        train_table = pq.read_table(data_dir / name / "train.parquet")
        n = train_table.num_rows
        passes = max(1, min(20, math.ceil(50_000 / n)))
        for seed in range(3):
            order = np.random.default_rng(seed).permutation(n)
            shuffled = tmp / f"fofo_{name}_{seed}.parquet"
            pq.write_table(train_table.take(order), shuffled)
            row = {"set": name, "seed": seed, "rows": n, "passes": passes}
            for solver in SOLVERS:
                for epochs in sorted({1, passes}):
                    model = tmp / f"fofo_{name}_{solver}.safetensors"
                    report = train(shuffled, TrainOptions(solver=solver, epochs=epochs), output=model)[1]
                    test_f1 = evaluate(model, data_dir / name / "test.parquet")["splits"]["data"]["f1"]
                    key = solver if epochs == 1 else f"{solver}_multi"  # the `passes` column says how many
                    row[key] = report["online"]["f_beta"] if epochs == 1 else report["online"]["passes"][-1]["f_beta"]
                    row[f"{key}_test"] = test_f1
                    model.unlink()
            shuffled.unlink()
            results.append(row)
    return results


def shared_sets_tuned_online_f1(data_dir: Path, tmp: Path) -> list[dict]:
    """The paper's protocol (section 6): each method's posterior step `lr` is chosen from 2^-4..2^4 by the
    final online F on a shuffled validation stream (here val.parquet), then the method runs one pass over
    the shuffled training stream with it. Shows whether the untuned default lr decides fofo vs ofo."""
    results = []
    for name in BINARY_SETS:
        tables = {split: pq.read_table(data_dir / name / f"{split}.parquet") for split in ("train", "val")}
        for seed in range(3):
            streams = {}
            for split, table in tables.items():
                streams[split] = tmp / f"fofo_tuned_{name}_{split}_{seed}.parquet"
                pq.write_table(table.take(np.random.default_rng(seed).permutation(table.num_rows)), streams[split])
            row = {"set": name, "seed": seed, "rows": tables["train"].num_rows}
            model = tmp / f"fofo_tuned_{name}.safetensors"
            for solver in SOLVERS:

                def online_f(split: str, lr: float) -> float:
                    opts = TrainOptions(solver=solver, params={"lr": repr(lr)})
                    return train(streams[split], opts, output=model)[1]["online"]["f_beta"]

                best_lr = max(LR_GRID, key=lambda lr: online_f("val", lr))  # first of equals: the smallest lr
                row[solver] = online_f("train", best_lr)
                row[f"{solver}_lr"] = best_lr
            model.unlink()
            for path in streams.values():
                path.unlink()
            results.append(row)
    return results


LR_GRID = [2.0**k for k in range(-4, 5)]


# ---- 3. memory -----------------------------------------------------------------------------------------
def peak_rss(tmp: Path, rows_list: tuple[int, ...], width: int) -> tuple[dict, dict]:
    """Median peak RSS (MB) of REPEATS runs per size, and every run's: the peak of a run depends on how
    the reader and learner threads happen to interleave (a few MB either way)."""
    median, runs = {}, {}
    for rows in rows_list:
        data = tmp / f"fofo_rss_{rows}.parquet"
        write_logistic_parquet(data, rows, width, 0.05, seed=1)
        runs[rows] = []
        for _ in range(REPEATS):
            proc = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    LAUNCHER,
                    *DMO,
                    "train",
                    str(data),
                    "--solver",
                    "fofo",
                    "-o",
                    str(tmp / "fofo_rss.safetensors"),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            runs[rows].append(int(proc.stdout.split()[-1]) / 1024)
        median[rows] = statistics.median(runs[rows])
        data.unlink()
    return median, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--width", type=int, default=50)
    parser.add_argument("--synthetic-rows", type=int, default=200_000)
    parser.add_argument("--rss-rows", type=int, nargs=2, default=(1_000_000, 8_000_000))
    parser.add_argument("--rss-width", type=int, default=20)
    parser.add_argument("--skip", nargs="*", default=[], choices=["throughput", "f1", "shared", "rss"])
    parser.add_argument(
        "--paper-tuning",
        action="store_true",
        help="also run 2c: the shared sets with lr tuned per method on val.parquet (paper's protocol)",
    )
    parser.add_argument("--results-name", default="fofo", help="bench/results/NAME.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fofo_bench_", dir=args.tmp))
    results: dict = {"cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()}
    try:
        if "throughput" not in args.skip:
            results["throughput"] = throughput(work, args.rows, args.width)
            print("\n## 1. throughput (rows/s)")
            for key, value in results["throughput"].items():
                shown = (
                    f"{value:>14,.0f}"
                    if isinstance(value, float) and value > 10
                    else (f"{value:>14.3f}" if isinstance(value, float) else value)
                )
                print(f"{key:44s} {shown}")
        if "f1" not in args.skip:
            results["synthetic_online_f1"] = synthetic_online_f1(args.synthetic_rows, 20)
            print("\n## 2a. online F1 after one pass, synthetic logistic streams")
            print_table(results["synthetic_online_f1"], ["set", "seed", "rows", *SOLVERS])
        if "shared" not in args.skip and not args.data_dir.is_dir():
            print(f"\n## 2b. skipped: no benchmark data at {args.data_dir} (give --data-dir)")
        elif "shared" not in args.skip:
            results["shared_online_f1"] = shared_sets_online_f1(args.data_dir, work)
            keys = ["set", "seed", "rows", "passes"]
            for s in SOLVERS:
                keys += [s, f"{s}_test"]
            keys += [f"{s}_multi{t}" for t in ("", "_test") for s in SOLVERS]
            print("\n## 2b. online F1 (shuffled benchmark sets); _test: F1 of the final model on test.parquet;")
            print("## _multi: last pass of `passes` passes (online F of a later pass re-predicts rows already learned)")
            print_table(results["shared_online_f1"], list(dict.fromkeys(keys)))
        if args.paper_tuning and args.data_dir.is_dir():
            results["shared_tuned_online_f1"] = rows = shared_sets_tuned_online_f1(args.data_dir, work)
            print("\n## 2c. online F1, one pass, lr tuned per method on val.parquet (paper's protocol)")
            print_table(rows, ["set", "seed", "rows", *[k for s in SOLVERS for k in (s, f"{s}_lr")]])
            wins = sum(r["fofo"] >= r["ofo"] for r in rows)
            print(f"fofo >= ofo in {wins}/{len(rows)}")
        if "rss" not in args.skip:
            rss, rss_runs = peak_rss(work, tuple(args.rss_rows), args.rss_width)
            small, large = (rss[r] for r in args.rss_rows)
            results["peak_rss_mb"] = {
                "width": args.rss_width,
                **{str(k): v for k, v in rss.items()},
                "runs": {str(k): v for k, v in rss_runs.items()},
                "ratio": large / small,
            }
            print(f"\n## 3. peak RSS of dmo train --solver fofo (width {args.rss_width}; median of {REPEATS} runs)")
            for rows, mb in rss.items():
                print(f"{rows:>10,} rows: {mb:8.1f} MB   runs: {', '.join(f'{v:.1f}' for v in rss_runs[rows])}")
            print(f"ratio {large / small:.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["load_average_at_end"] = os.getloadavg()
    print(f"\nwrote {write_results(args.results_name, json.loads(json.dumps(results, default=float)))}")


if __name__ == "__main__":
    main()

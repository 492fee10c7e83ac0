"""LUS benchmark: variance ratios, accuracy versus fraction of data used, subsample-pass throughput.

    python bench/lus.py [--data-dir ../shared/data] [--reps 50] [--rows 10000000] [--skip-throughput] [--skip-dask]

1. Paper Fig. 2(a) analogue on the section 6.1 simulation (3 Gaussian classes, P = 0.1/0.8/0.1, d = 20,
   n = 50,000, pilot on an independent 5,000): mean over the 42 identifiable coefficients of
   Var(estimate) / Var(full-data MLE) across repetitions, for LUS and for uniform and case-control
   sampling at LUS's realized size, and at that size plus the pilot (the paper's fair budget), where LUS
   is also fitted with the pilot's rows (offset 0), as dmo fits it.
2. Test accuracy versus fraction of the training rows used (pilot included) on the simulation and on
   letter (26 classes), with the pilot at 10% (the paper) and smaller shares of the rows, and the
   smallest fraction at which each method is within a tolerance of the full-data accuracy. LUS is
   measured as the tool fits it (`lus`: accepted rows plus the pilot's rows at offset 0) and as the
   paper does (`lus_no_pilot`: accepted rows only). On letter the final model is linear (pilot linear)
   and, as in the paper's MNIST experiment, a richer model than the pilot: an MLP (pilot linear).
3. `dmo subsample` on 10,000,000 x 50 rows (5 classes, parquet under /tmp): rows/s of the acceptance pass
   next to a plain pyarrow read of the same files, peak RSS, and the Dask engine on 2 local workers;
   then peak RSS on rows/10 versus rows with the same pilot size (memory must not grow with rows).
Every fit is the solver's own L-BFGS maximum likelihood fit (dmocli.solvers.subsampling.lus.fit_offset_logistic).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dmocli.data import reading  # noqa: E402
from dmocli.models.networks import Architecture, logits_of  # noqa: E402
from dmocli.prep.columns import plan_columns  # noqa: E402
from dmocli.prep.dataset import prepare  # noqa: E402
from dmocli.prep.features import Preprocessor  # noqa: E402
from dmocli.prep.labels import infer_label_spec  # noqa: E402
from dmocli.solvers.subsampling.acceptance import acceptance, case_control_rates  # noqa: E402
from dmocli.solvers.subsampling.lus import LogisticParams, fit_offset_logistic, softmax_proba  # noqa: E402

GAMMAS = (2.0, 5.0, 10.0, 20.0)
FIT = LogisticParams(l2=0.0)


def simulate(n: int, rng: np.random.Generator, d: int = 20, sep: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """Section 6.1: x | y=k ~ N(mu_k, I) with means +sep, 0, -sep and P = 0.1/0.8/0.1 (same as tests/conftest.py)."""
    y = rng.choice(3, size=n, p=[0.1, 0.8, 0.1])
    X = rng.normal(size=(n, d)) + np.linspace(sep, -sep, 3)[y][:, None]
    return torch.tensor(X, dtype=torch.float32), torch.tensor(y)


def fit(
    X: torch.Tensor,
    y: torch.Tensor,
    K: int,
    offsets: np.ndarray | None = None,
    params: LogisticParams = FIT,
    model: str = "linear",
):
    off = None if offsets is None else torch.tensor(offsets, dtype=torch.float32)
    network, _ = fit_offset_logistic(X, y, off, arch=Architecture(model, X.shape[1], K), seed=0, params=params)
    return network


def contrasts(network) -> np.ndarray:
    """The 42 identifiable numbers: classes 1 and 3 relative to the majority class 2."""
    W = torch.cat([network[0].weight, network[0].bias[:, None]], 1).detach().double().numpy()
    return np.delete(W - W[1], 1, axis=0).ravel()


def accuracy(network, X: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """Test accuracy and log loss."""
    logits = logits_of(network, X)
    log_loss = float(torch.nn.functional.cross_entropy(logits.double(), y))
    return float((logits.argmax(1) == y).float().mean()), log_loss


def draw(rng: np.random.Generator, rates: np.ndarray) -> np.ndarray:
    return np.flatnonzero(rng.random(rates.shape[0]) < rates)


def lus_sample(pilot, X: torch.Tensor, y: torch.Tensor, gamma: float, rng: np.random.Generator):
    a = acceptance(softmax_proba(logits_of(pilot, X)), gamma)
    keep = draw(rng, a[np.arange(len(y)), y.numpy()])
    return keep, np.log(a[keep])


def baseline_sample(kind: str, y: torch.Tensor, K: int, size: float, rng: np.random.Generator):
    """uniform or case-control rows for an expected `size`, with the (constant per class) log rate offsets."""
    counts = np.bincount(y.numpy(), minlength=K).astype(float)
    rates = np.full(K, min(1.0, size / len(y))) if kind == "uniform" else case_control_rates(counts, size)
    keep = draw(rng, rates[y.numpy()])
    return keep, np.tile(np.log(rates), (keep.size, 1))


def variance_ratios(reps: int, n: int = 50_000, n_pilot: int = 5_000) -> dict:
    """Fig. 2(a): average over coefficients of Var(method)/Var(full MLE), per gamma.

    The baselines are sampled at two sizes: LUS's realized subsample size (kept rows) and LUS's whole
    budget (kept rows + the pilot's rows, the paper's "fair" comparison).
    """
    baselines = [(kind, size) for kind in ("uniform", "case-control") for size in ("realized", "budget")]
    est: dict[str, list] = {"mle": []}
    for g in GAMMAS:
        est[f"lus@{g:g}"] = []
        est[f"lus_with_pilot@{g:g}"] = []
        for kind, size in baselines:
            est[f"{kind}/{size}@{g:g}"] = []
    sizes = {g: [] for g in GAMMAS}
    for rep in range(reps):
        rng = np.random.default_rng(1000 + rep)
        X, y = simulate(n, rng)
        Xp, yp = simulate(n_pilot, rng)
        est["mle"].append(contrasts(fit(X, y, 3)))
        pilot = fit(Xp, yp, 3)
        for g in GAMMAS:
            keep, off = lus_sample(pilot, X, y, g, rng)
            est[f"lus@{g:g}"].append(contrasts(fit(X[keep], y[keep], 3, off)))
            both_X, both_y = torch.cat([X[keep], Xp]), torch.cat([y[keep], yp])  # + the pilot's rows at offset 0
            est[f"lus_with_pilot@{g:g}"].append(
                contrasts(fit(both_X, both_y, 3, np.concatenate([off, np.zeros((len(yp), 3))])))
            )
            sizes[g].append(keep.size)
            for kind, size in baselines:
                rows, off_b = baseline_sample(kind, y, 3, keep.size + (n_pilot if size == "budget" else 0), rng)
                est[f"{kind}/{size}@{g:g}"].append(contrasts(fit(X[rows], y[rows], 3, off_b)))
        print(f"  variance: repetition {rep + 1}/{reps}", end="\r", flush=True)
    print()
    var_mle = np.var(np.asarray(est["mle"]), axis=0, ddof=1)

    def ratio(key: str) -> float:
        return float((np.var(np.asarray(est[key]), axis=0, ddof=1) / var_mle).mean())

    rows = []
    for g in GAMMAS:
        row = {
            "gamma": g,
            "lus_kept_fraction": float(np.mean(sizes[g]) / n),
            "budget_fraction": float((np.mean(sizes[g]) + n_pilot) / n),
            "lus_ratio": ratio(f"lus@{g:g}"),
            "lus_with_pilot_ratio": ratio(f"lus_with_pilot@{g:g}"),
        }
        for kind, size in baselines:
            row[f"{kind}_{size}_ratio"] = ratio(f"{kind}/{size}@{g:g}")
        rows.append(row)
    return {"reps": reps, "n": n, "n_pilot": n_pilot, "rows": rows}


METHODS = ("lus", "lus_no_pilot", "uniform", "case-control")


def accuracy_curve(
    X,
    y,
    Xt,
    yt,
    K: int,
    gammas,
    reps: int,
    pilot_frac: float,
    params: LogisticParams,
    model: str = "linear",
    pilot_params: LogisticParams | None = None,
) -> dict:
    """Test accuracy vs fraction of training rows used; the LUS pilot (linear) comes out of the same rows.

    `lus` fits on the accepted rows and the pilot's rows (offset 0), as `dmo train --solver lus --gamma` does;
    `lus_no_pilot` on the accepted rows only (the paper). Both use pilot + accepted rows of the budget.
    """
    n = len(y)
    pilot_params = pilot_params or params
    full, full_loss = accuracy(fit(X, y, K, params=params, model=model), Xt, yt)
    rows = []
    for g in gammas:
        acc: dict[str, list] = {m: [] for m in METHODS}
        used = []
        for rep in range(reps):
            rng = np.random.default_rng([int(g * 100), rep])
            in_pilot = rng.random(n) < pilot_frac
            pilot_rows, rest = np.flatnonzero(in_pilot), np.flatnonzero(~in_pilot)
            pilot = fit(X[pilot_rows], y[pilot_rows], K, params=pilot_params)
            keep, off = lus_sample(pilot, X[rest], y[rest], g, rng)
            acc["lus_no_pilot"].append(accuracy(fit(X[rest][keep], y[rest][keep], K, off, params, model), Xt, yt))
            both = np.concatenate([pilot_rows, rest[keep]])
            off_both = np.concatenate([np.zeros((pilot_rows.size, K)), off])
            acc["lus"].append(accuracy(fit(X[both], y[both], K, off_both, params, model), Xt, yt))
            size = pilot_rows.size + keep.size
            used.append(size / n)
            for kind in ("uniform", "case-control"):
                rows_b, off_b = baseline_sample(kind, y, K, size, rng)
                acc[kind].append(accuracy(fit(X[rows_b], y[rows_b], K, off_b, params, model), Xt, yt))
        rows.append(
            {
                "gamma": g,
                "fraction_used": float(np.mean(used)),
                **{f"{k}_accuracy": float(np.mean([v[0] for v in vs])) for k, vs in acc.items()},
                **{
                    f"{k}_accuracy_se": float(np.std([v[0] for v in vs], ddof=1) / np.sqrt(reps)) if reps > 1 else None
                    for k, vs in acc.items()
                },
                **{f"{k}_log_loss": float(np.mean([v[1] for v in vs])) for k, vs in acc.items()},
            }
        )
        print(
            f"  {model} pilot {pilot_frac:g} gamma {g:g}: used {rows[-1]['fraction_used']:.3f} "
            + " ".join(f"{m} {rows[-1][f'{m}_accuracy']:.4f}" for m in METHODS),
            flush=True,
        )
    return {
        "full_data_accuracy": full,
        "full_data_log_loss": full_loss,
        "n_train": n,
        "n_test": len(yt),
        "reps": reps,
        "pilot_frac": pilot_frac,
        "model": model,
        "pilot_model": "linear",
        "rows": rows,
        "reaches_full_accuracy": smallest_fractions(full, rows),
    }


def smallest_fractions(full: float, rows: list[dict], tolerances=(0.0005, 0.001, 0.002, 0.005, 0.01)) -> dict:
    """Per method, the smallest fraction used whose mean test accuracy is within `tol` of the full-data
    accuracy, for the fraction and every larger one tried (None: no fraction tried gets there)."""
    out: dict = {}
    ordered = sorted(rows, key=lambda r: r["fraction_used"])
    for tol in tolerances:
        out[str(tol)] = {}
        for method in METHODS:
            good = [r[f"{method}_accuracy"] >= full - tol for r in ordered]
            first = next((i for i in range(len(good)) if all(good[i:])), None)
            out[str(tol)][method] = None if first is None else ordered[first]["fraction_used"]
    return out


def letter(data_dir: Path):
    train = reading.read_table(data_dir / "letter" / "train.parquet")
    test = reading.read_table(data_dir / "letter" / "test.parquet")
    plan = plan_columns(train.schema, "label")
    pre = Preprocessor.fit(train.to_batches(), plan)
    labels = infer_label_spec(train.column("label"), "label", positive=None, binary=False)
    a, b = prepare(train, pre, labels), prepare(test, pre, labels)
    return (
        torch.from_numpy(a.X),
        torch.from_numpy(a.y),
        torch.from_numpy(b.X),
        torch.from_numpy(b.y),
        len(labels.classes),
    )


# ---- throughput -------------------------------------------------------------------------------------------
def make_big(directory: Path, rows: int, cols: int, classes: int = 5, files: int = 20) -> None:
    """rows x cols float32 features and a 5-class multinomial-logistic label, as `files` parquet files."""
    marker = directory.parent / f"{directory.name}-{rows}x{cols}.done"
    if marker.exists():
        return
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    marker.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    W = rng.normal(scale=0.6, size=(cols, classes))
    b = np.array([2.0, 0.5, 0.0, -0.5, -1.0])[:classes]
    per = rows // files
    names = [f"x{j}" for j in range(cols)]
    for i in range(files):
        X = rng.standard_normal((per, cols), dtype=np.float32)
        logits = X @ W.astype(np.float32) + b
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        y = np.minimum((rng.random((per, 1)) > np.cumsum(p, 1)).sum(1), classes - 1)
        arrays = [pa.array(X[:, j]) for j in range(cols)] + [pa.array(y.astype(np.int64))]
        pq.write_table(
            pa.table(arrays, names=names + ["label"]), directory / f"part-{i:03d}.parquet", row_group_size=65536
        )
    marker.touch()


def plain_read(directory: Path) -> dict:
    """The I/O ceiling two ways: pyarrow's dataset scanner, and pq.ParquetFile file by file (what dmocli uses)."""
    started = time.perf_counter()
    n = sum(batch.num_rows for batch in reading.open_dataset(directory).to_batches(batch_size=65536))
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    m = sum(
        batch.num_rows
        for name in sorted(directory.glob("*.parquet"))
        for batch in pq.ParquetFile(name, pre_buffer=False).iter_batches(batch_size=65536)
    )
    file_seconds = time.perf_counter() - started
    return {
        "rows": n,
        "seconds": seconds,
        "rows_per_second": n / seconds,
        "parquetfile_seconds": file_seconds,
        "parquetfile_rows_per_second": m / file_seconds,
    }


def run_subsample(directory: Path, out: Path, engine: str, gamma: float, *extra: str) -> dict:
    """`dmo subsample` as a user runs it, under /usr/bin/time for the peak RSS."""
    report = out.with_suffix(".json")
    dmo = Path(sys.executable).with_name("dmo")
    cmd = [
        str(dmo),
        "subsample",
        str(directory),
        "--gamma",
        str(gamma),
        "-o",
        str(out),
        "--report",
        str(report),
        "--engine",
        engine,
        "--workers",
        "2",
        *extra,
    ]
    timer = ["/usr/bin/time", "-v"] if Path("/usr/bin/time").exists() else []
    started = time.perf_counter()
    proc = subprocess.run(timer + cmd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    result = json.loads(report.read_text())
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    return {
        "engine": engine,
        "rows_read": result["rows_read"],
        "rows_kept": result["rows_kept"],
        "rows_written": result["rows_written"],
        "pilot_rows": result["pilot_rows"],
        "pilot_accuracy": result["pilot_accuracy"],
        "pilot_seconds": result["pilot_seconds"],
        "pass_seconds": result["pass_seconds"],
        "pass_rows_per_second": result["rows_per_second"],
        "command_seconds": wall,
        "overall_rows_per_second": result["rows_read"] / wall,
        "peak_rss_mib_largest_process": int(rss.group(1)) / 1024 if rss else None,
    }


def throughput(rows: int, cols: int, scratch: Path, dask: bool) -> dict:
    source = scratch / "big"
    started = time.perf_counter()
    make_big(source, rows, cols)
    out: dict = {
        "rows": rows,
        "cols": cols,
        "classes": 5,
        "files": 20,
        "generate_seconds": time.perf_counter() - started,
        "bytes_on_disk": sum(p.stat().st_size for p in source.glob("*.parquet")),
    }
    out["plain_read"] = plain_read(source)
    out["local"] = run_subsample(source, scratch / "sub_local.parquet", "local", 10.0)
    if dask:
        out["dask_2_workers"] = run_subsample(source, scratch / "sub_dask.parquet", "dask", 10.0)
    # Peak RSS versus rows: the same pilot size (the cap binds at both sizes), so only the pass's memory differs.
    small_rows = rows // 10
    small = scratch / "small"
    make_big(small, small_rows, cols)
    cap = ("--pilot-max-rows", str(small_rows // 10))
    out["rss_vs_rows"] = {
        n: run_subsample(src, scratch / f"sub_rss_{n}.parquet", "local", 10.0, *cap)
        for n, src in ((small_rows, small), (rows, source))
    }
    return out


def section_variance(args, results: dict) -> None:
    started = time.perf_counter()
    print(f"== 1. variance ratio to the full-data MLE (simulation, n = 50,000, {args.reps} repetitions) ==")
    results["variance"] = variance_ratios(args.reps)
    results["variance"]["seconds"] = time.perf_counter() - started
    print(f"{'':>21} {'':>7} | at LUS's kept size           | at kept + pilot size")
    print(
        f"{'gamma':>6} {'kept':>6} {'budget':>7} | {'LUS':>7} {'uniform':>8} {'case-ctl':>9} | "
        f"{'LUS+pilot':>9} {'uniform':>8} {'case-ctl':>9}"
    )
    for r in results["variance"]["rows"]:
        print(
            f"{r['gamma']:>6g} {r['lus_kept_fraction']:>6.3f} {r['budget_fraction']:>7.3f} | {r['lus_ratio']:>7.2f} "
            f"{r['uniform_realized_ratio']:>8.2f} {r['case-control_realized_ratio']:>9.2f} | "
            f"{r['lus_with_pilot_ratio']:>9.2f} {r['uniform_budget_ratio']:>8.2f} "
            f"{r['case-control_budget_ratio']:>9.2f}"
        )
    print(
        "   (LUS: the accepted rows, the paper's estimate; LUS+pilot: they and the pilot's rows at offset 0, "
        "as dmo fits)"
    )


def section_accuracy(args, results: dict) -> None:
    print("== 2. test accuracy vs fraction of training rows used (pilot included) ==")
    rng = np.random.default_rng(99)
    X, y = simulate(50_000, rng)
    Xt, yt = simulate(20_000, rng)
    curves = {}
    for frac in args.pilot_fracs:
        curves[f"simulation_pilot_{frac:g}"] = accuracy_curve(
            X, y, Xt, yt, 3, (1.5, 2, 3, 5, 10, 20, 40), args.acc_reps, frac, FIT
        )
    if (args.data_dir / "letter" / "train.parquet").exists():
        Xl, yl, Xlt, ylt, K = letter(args.data_dir)
        for frac in args.pilot_fracs:
            curves[f"letter_pilot_{frac:g}"] = accuracy_curve(
                Xl, yl, Xlt, ylt, K, (1.2, 1.5, 2, 3, 5, 10), args.acc_reps, frac, LogisticParams(l2=1e-4)
            )
        if not args.skip_letter_mlp:  # the paper's MNIST recipe: a simple pilot, a richer final model
            curves["letter_mlp_pilot_0.1"] = accuracy_curve(
                Xl,
                yl,
                Xlt,
                ylt,
                K,
                (1.05, 1.1, 1.2, 1.5, 2, 3, 5),
                args.acc_reps,
                0.1,
                LogisticParams(),
                model="mlp",
                pilot_params=LogisticParams(l2=1e-4),
            )
    results["accuracy"] = curves
    for name, curve in curves.items():
        print(
            f"-- {name}: full-data accuracy {curve['full_data_accuracy']:.4f}, log loss "
            f"{curve['full_data_log_loss']:.4f} (n_train {curve['n_train']}, {curve['reps']} reps)"
        )
        print(
            f"{'gamma':>6} {'used':>6} | accuracy {'LUS':>7} {'LUS-np':>7} {'uniform':>8} {'case-ctl':>8} | "
            f"log loss {'LUS':>7} {'LUS-np':>7} {'uniform':>8} {'case-ctl':>8}"
        )
        for r in curve["rows"]:
            print(
                f"{r['gamma']:>6g} {r['fraction_used']:>6.3f} |          "
                + " ".join(f"{r[f'{m}_accuracy']:>{w}.4f}" for m, w in zip(METHODS, (7, 7, 8, 8)))
                + " |          "
                + " ".join(f"{r[f'{m}_log_loss']:>{w}.4f}" for m, w in zip(METHODS, (7, 7, 8, 8)))
            )
        for tol, fractions in curve["reaches_full_accuracy"].items():
            shown = ", ".join(f"{m} {'-' if f is None else f'{f:.3f}'}" for m, f in fractions.items())
            print(f"   smallest fraction within {tol} of full-data accuracy: {shown}")
    print("   (LUS: accepted + pilot rows, as dmo fits it; LUS-np: accepted rows only, the paper's fit)")


def section_throughput(args, results: dict) -> None:
    print(f"== 3. subsample pass on {args.rows:,} x {args.cols} rows (gamma 10) ==")
    results["throughput"] = tp = throughput(args.rows, args.cols, args.scratch, not args.skip_dask)
    print(
        f"plain pyarrow read: dataset scanner {tp['plain_read']['rows_per_second']:,.0f} rows/s "
        f"({tp['plain_read']['seconds']:.1f} s), ParquetFile per file "
        f"{tp['plain_read']['parquetfile_rows_per_second']:,.0f} rows/s; {tp['bytes_on_disk'] / 2**30:.2f} GiB on disk"
    )
    for key in ("local", "dask_2_workers"):
        if key in tp:
            r = tp[key]
            print(
                f"{key:>15}: pass {r['pass_rows_per_second']:,.0f} rows/s ({r['pass_seconds']:.1f} s), whole command "
                f"{r['overall_rows_per_second']:,.0f} rows/s ({r['command_seconds']:.1f} s, "
                f"pilot {r['pilot_seconds']:.1f} s), "
                f"kept {r['rows_kept']:,}, peak RSS {r['peak_rss_mib_largest_process']:.0f} MiB"
            )
    for n, r in tp["rss_vs_rows"].items():
        print(
            f"peak RSS, local engine, {n:>11,} rows, pilot {r['pilot_rows']:,} rows: "
            f"{r['peak_rss_mib_largest_process']:.0f} MiB"
        )
    if not args.keep_scratch:
        shutil.rmtree(args.scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--acc-reps", type=int, default=10)
    parser.add_argument(
        "--pilot-fracs",
        type=float,
        nargs="+",
        default=[0.1, 0.05, 0.02],
        help="pilot share of the training rows (paper: 10%%; its appendix D: 5%% suffices; 2%% leaves room below 10%%)",
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--cols", type=int, default=50)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/dmo_lus_bench"))
    parser.add_argument("--skip-variance", action="store_true")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--skip-letter-mlp", action="store_true", help="skip the slowest curve (MLP fits on letter)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument("--keep-scratch", action="store_true", help="keep the generated 10M-row data for a rerun")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # sections 1-2 measure statistics; one thread avoids contention on a shared 2-core box
    out = REPO / "bench" / "results" / "lus.json"
    results: dict = json.loads(out.read_text()) if out.exists() else {}  # a partial rerun updates its sections
    results[f"machine_{int(time.time())}"] = {"cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()}
    started = time.perf_counter()

    if not args.skip_variance:
        section_variance(args, results)
    if not args.skip_accuracy:
        section_accuracy(args, results)
    if not args.skip_throughput:
        section_throughput(args, results)
    results["wall_seconds_last_run"] = time.perf_counter() - started
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out} ({results['wall_seconds_last_run']:.0f} s)")


if __name__ == "__main__":
    main()

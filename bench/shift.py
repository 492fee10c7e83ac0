"""The operating point after training (issue 35): monitor's estimates and --adapt under a changed positive rate.

Every binary set in ../shared/data, pooled and resplit (80 % DATA / 20 % test, stratified) RESPLITS times; on each,
`wce` linear and gbdt are trained once for FPOR 0.8 (FROP 0.8 and OFBS are re-targeted from the stored curve, which
gives train's threshold: counted below on the first resplit). The test split is then resampled to a positive rate of
x0.25, x0.5, x1, x2 and x4 the training rate, by dropping positives or negatives, and on each:

- prevalence: monitor's estimate (PACC on the stored curve) against classify-and-count, absolute error and whether
  the 95 % interval covers the true rate;
- precision and recall at the threshold estimated under label shift against the realized values, beside the
  "nothing changed" estimate (the held-out curve's own values);
- FPOR: test feasibility with the training threshold, with --adapt (estimated rate), with --adapt --confidence 0.95,
  and the recall given up;
- the gate: how often it fires where the realized precision fell below the target, and on the x1 runs, for the
  label-shift precision interval below the target alone and for `monitor --gate`'s verdict (that, or the positive
  rate moved past its limit; feature drift is not part of this benchmark's verdict).

    python bench/shift.py --resplits 20                     # writes bench/results/shift.json
    python bench/shift.py --only adapt --resplits 8 --results-name shift-adapt   # skips the re-targeting checks
    python bench/shift.py --only gate --results-name shift-gate   # estimates and gates only (no --adapt variants)

`--adapt --confidence 0.95` is run twice: certifying the precision measured on the next rows, as many as the test
split has (`--new-rows`, the default with --adapt NEW), and the population value at the new rate (`--new-rows inf`);
beside them `--adapt --confidence 0.8` (the test split's rows) and `--prior TRUE_RATE --confidence 0.95` (the rate
known: what the rate's uncertainty costs). Each cut reaches the model as `dmo threshold` carries it
(pipelines/adapt.carry_to_model: a gbdt `--cv` ensemble's by the share of the test split it is expected to flag, a
linear model's as the curve gives it; `--prior` has no rows to carry by). `*_other` variants carry the same cuts the
other way (gbdt: the curve's cut as it is, as before the change; linear: by share), the rule's evidence.
Each run also keeps the label-shift estimate's probability that precision >= the target holds on the test split's
rows (the rate and curve replicates of the estimate, each with a binomial draw of that many rows), so gates that
fire when it is low can be compared with the interval gate.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BINARY_SETS, DEFAULT_DATA, print_table, write_results  # noqa: E402
from targets_on_new_data import pooled, resplit  # noqa: E402

from dmocli import Problem, TrainOptions, load_model, refit_threshold, train  # noqa: E402
from dmocli.operating_point.heldout import HeldOutCurve  # noqa: E402
from dmocli.operating_point.search import search_curve  # noqa: E402
from dmocli.shift.adaptation import adapt_threshold  # noqa: E402
from dmocli.shift.carry import carried_by_share  # noqa: E402
from dmocli.shift.expected import metrics_under_label_shift  # noqa: E402
from dmocli.shift.prevalence import estimate_prevalence, usable_rate  # noqa: E402
from dmocli.use.adapt import carry_to_model  # noqa: E402
from dmocli.use.verdicts import ReferenceRate, rate_drift  # noqa: E402

SHIFTS = (0.25, 0.5, 1.0, 2.0, 4.0)
TARGET = 0.8
MODELS = {"linear": {}, "gbdt": {"model": "gbdt"}, "mlp": {"model": "mlp"}}  # mlp: `--models mlp`
CARRIED = ("adapt", "adapt95", "adapt95pop")  # also measured carried the other way (`*_other`)
VARIANTS = ("adapt", "adapt95", "adapt95pop", "adapt80", "prior95") + tuple(f"{v}_other" for v in CARRIED)
OUTLOOK_LIMITS = (0.05, 0.1, 0.2, 0.3, 0.5)  # the outlook gates measured: fire below each


def resampled(y: np.ndarray, factor: float, rng: np.random.Generator) -> np.ndarray | None:
    """Row indices of the test split at `factor` times its positive rate (positives or negatives dropped)."""
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    rate = pos.size / y.size * factor
    if rate >= 0.95:
        return None
    if factor <= 1:  # keep every negative
        keep_pos = int(round(rate * neg.size / (1 - rate)))
        rows = np.concatenate([rng.choice(pos, keep_pos, replace=False), neg])
    else:  # keep every positive
        keep_neg = int(round(pos.size * (1 - rate) / rate))
        rows = np.concatenate([pos, rng.choice(neg, keep_neg, replace=False)])
    return rows if (y[rows] == 1).sum() >= 1 else None


def at(logits: np.ndarray, y: np.ndarray, threshold: float) -> tuple[float, float]:
    taken = logits >= np.float32(threshold)
    tp = int((taken & (y == 1)).sum())
    return tp / max(int(taken.sum()), 1), tp / max(int((y == 1).sum()), 1)


def one_resplit(task: tuple[str, str, int, tuple[str, ...], str | None]) -> list[dict[str, Any]]:
    data_dir, name, seed, models, only = task
    data, test = resplit(pooled(Path(data_dir), name), seed)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        pq_path = work / "data.parquet"
        import pyarrow.parquet as pq

        pq.write_table(data, pq_path)
        for family in models:
            model_path = work / f"{family}.st"
            opts = TrainOptions(problem="fpor", target=TARGET, seed=seed, **MODELS[family])
            try:
                train(pq_path, opts, output=model_path)
            except Exception as exc:  # noqa: BLE001 - an unreachable target: counted as refused
                rows.append({"set": name, "seed": seed, "model": family, "refused": type(exc).__name__})
                continue
            rows += _shift_runs(name, seed, family, model_path, test, variants=only != "gate")
            if seed == 0 and only is None:
                rows.append(_retarget_check(name, family, pq_path, model_path, work, seed))
    return rows


def _retarget_check(name: str, family: str, data: Path, model: Path, work: Path, seed: int) -> dict[str, Any]:
    """FROP 0.8 and OFBS from the stored curve against train run for them (same seed)."""
    equal = 0
    for problem, target in (("frop", TARGET), ("ofbs", None)):
        direct = work / f"{family}-{problem}.st"
        train(data, TrainOptions(problem=problem, target=target, seed=seed, **MODELS[family]), output=direct)
        moved = refit_threshold(model, None, Problem(problem, target), work / "moved.st")
        equal += moved["threshold"] == load_model(direct).threshold
    return {"set": name, "seed": seed, "model": family, "retarget_equal": equal, "retarget_checked": 2}


def _shift_runs(
    name: str, seed: int, family: str, model_path: Path, test: pa.Table, *, variants: bool = True
) -> list[dict[str, Any]]:
    model = load_model(model_path)
    curve: HeldOutCurve = model.heldout
    logits, _ = model.logits(test)
    y = model.labels.encode(test.column("label"))
    threshold = model.threshold
    held_tp, held_fp = curve.counts_at(threshold)
    unchanged = (held_tp / max(held_tp + held_fp, 1), held_tp / max(curve.n_pos, 1))
    rng = np.random.default_rng(seed)
    out = []
    for factor in SHIFTS:
        rows = resampled(y, factor, rng)
        if rows is None:
            continue
        s, t = logits[rows], y[rows]
        true_rate = float(t.mean())
        estimate = estimate_prevalence(curve, s, model.calibration, 0.95)
        shifted = metrics_under_label_shift(curve, threshold, estimate, model.problem.beta)
        precision, recall = at(s, t, threshold)
        run = {
            "set": name,
            "seed": seed,
            "model": family,
            "shift": factor,
            "rows": int(t.size),
            "true_rate": true_rate,
            "rate_error": abs(estimate.rate - true_rate),
            "cc_error": abs(float(np.mean(s >= np.float32(threshold))) - true_rate),
            "rate_covered": estimate.low <= true_rate <= estimate.high,
            "precision": precision,
            "recall": recall,
            "precision_error": abs(shifted["precision"] - precision),
            "recall_error": abs(shifted["recall"] - recall),
            "precision_covered": shifted["precision_interval"][0] <= precision <= shifted["precision_interval"][1],
            "recall_covered": shifted["recall_interval"][0] <= recall <= shifted["recall_interval"][1],
            "unchanged_precision_error": abs(unchanged[0] - precision),
            "unchanged_recall_error": abs(unchanged[1] - recall),
            "gate": shifted["precision_interval"][1] < TARGET,
            "gate_rate": bool(
                rate_drift(
                    estimate.rate,
                    [estimate.low, estimate.high],
                    ReferenceRate(source="training", rate=curve.rate, interval=None),
                )
            ),  # fmt: skip
            "hold_probability": hold_probability(curve, threshold, estimate, int(t.size), seed),
            "feasible_training": precision >= TARGET,
        }
        run["gate_monitor"] = run["gate"] or run["gate_rate"]  # monitor --gate's verdict (features aside)
        if not variants:
            out.append(run)
            continue
        rate = usable_rate(estimate.rate, t.size)  # as `dmo threshold --adapt` takes it
        bounds = (usable_rate(estimate.low, t.size), usable_rate(estimate.high, t.size))
        at80 = estimate_prevalence(curve, s, model.calibration, 0.8)
        bounds80 = (usable_rate(at80.low, t.size), usable_rate(at80.high, t.size))
        variants = (  # label, rate, confidence, rate interval, --new-rows
            ("adapt", rate, None, None, None, s),
            ("adapt95", rate, 0.95, bounds, int(t.size), s),
            ("adapt95pop", rate, 0.95, bounds, None, s),
            ("adapt80", rate, 0.8, bounds80, int(t.size), s),
            ("prior95", usable_rate(true_rate, t.size), 0.95, None, int(t.size), None),  # the true rate: --prior
        )
        for label, new_rate, confidence, interval, new_rows, seen in variants:
            adapted = adapt_threshold(
                curve,
                model.problem,
                new_rate,
                confidence=confidence,
                rate_interval=interval,
                threshold=threshold,
                new_rows=new_rows,
            )
            answered = adapted.feasible is not False
            shipped, how = carry_to_model(model, curve, cut=adapted.threshold, rate=new_rate, logits=seen)
            run[f"carried_{label}"] = how["carried"]
            record(run, label, answered, s, t, recall, shipped)
            if label in CARRIED:  # the same cut carried the other way
                by_share = how["carried"] == "share"
                other = adapted.threshold if by_share else carried_by_share(curve, adapted.threshold, new_rate, s)[0]
                record(run, f"{label}_other", answered, s, t, recall, other)
        out.append(run)
    return out


def record(run: dict, label: str, answered: bool, s: np.ndarray, t: np.ndarray, recall: float, cut: float) -> None:
    """A variant's figures on the test split at `cut` (the model's threshold): met, recall given up, flags nothing."""
    p, r = at(s, t, cut)
    run[f"answered_{label}"] = answered
    run[f"feasible_{label}"] = answered and p >= TARGET
    run[f"recall_given_{label}"] = recall - r if answered else None
    run[f"flags_nothing_{label}"] = answered and not np.any(s >= np.float32(cut))


def hold_probability(curve: HeldOutCurve, threshold: float, estimate: Any, rows: int, seed: int) -> float:
    """The label-shift estimate's probability that precision >= TARGET on `rows` new rows at the threshold: per
    bootstrap replicate (its rate, TPR and FPR), one draw of the rows' positives, true and false positives."""
    rng = np.random.default_rng(seed)
    tps, fps = estimate.curve_replicates.counts_at(threshold)
    positives = rng.binomial(rows, np.clip(estimate.replicates, 0.0, 1.0))
    tp = rng.binomial(positives, np.clip(tps / curve.n_pos, 0.0, 1.0))
    fp = rng.binomial(rows - positives, np.clip(fps / curve.n_neg, 0.0, 1.0))
    return float(np.mean(tp >= TARGET * np.maximum(tp + fp, 1) - 1e-9))


def summary(runs: list[dict[str, Any]], key: str | None) -> list[dict[str, Any]]:
    groups: dict[Any, list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault(run.get(key, "pooled") if key else "pooled", []).append(run)
    table = []
    for group, members in sorted(groups.items(), key=lambda item: str(item[0])):
        row: dict[str, Any] = {"group": group, "runs": len(members)}
        for field in (
            "rate_error",
            "cc_error",
            "rate_covered",
            "precision_error",
            "unchanged_precision_error",
            "precision_covered",
            "recall_error",
            "unchanged_recall_error",
            "recall_covered",
            "feasible_training",
        ):
            row[field] = float(np.mean([m[field] for m in members]))
        for label in VARIANTS if "answered_adapt" in members[0] else ():
            answered = [m for m in members if m[f"answered_{label}"]]
            row[f"answered_{label}"] = len(answered)
            row[f"feasible_{label}"] = float(np.mean([m[f"feasible_{label}"] for m in answered])) if answered else None
            given = [m[f"recall_given_{label}"] for m in answered]
            row[f"recall_given_{label}"] = float(np.mean(given)) if given else None
            row[f"flags_nothing_{label}"] = sum(m[f"flags_nothing_{label}"] for m in answered)
        table.append(row)
    return table


def gate_rates(runs: list[dict[str, Any]]) -> dict[str, Any]:
    fell = [r for r in runs if r["precision"] < TARGET]
    same = [r for r in runs if r["shift"] == 1.0]
    fell_shifted = [r for r in fell if r["shift"] < 1.0]
    return {
        "fires_where_precision_fell": float(np.mean([r["gate"] for r in fell])) if fell else None,
        "runs_where_precision_fell": len(fell),
        "fires_where_precision_fell_at_lower_rates": (
            float(np.mean([r["gate"] for r in fell_shifted])) if fell_shifted else None
        ),
        "runs_where_precision_fell_at_lower_rates": len(fell_shifted),
        "fires_at_x1": float(np.mean([r["gate"] for r in same])) if same else None,
        "runs_at_x1": len(same),
        "outlook": {  # fire when the probability that the target holds on the test split's rows is below a limit
            str(limit): {
                "fires_where_precision_fell": _share([r["hold_probability"] < limit for r in fell]),
                "fires_at_lower_rates_where_it_fell": _share([r["hold_probability"] < limit for r in fell_shifted]),
                "fires_at_x1": _share([r["hold_probability"] < limit for r in same]),
                "with_interval_gate_fires_where_precision_fell": _share(
                    [r["gate"] or r["hold_probability"] < limit for r in fell]
                ),
                "with_interval_gate_fires_at_x1": _share([r["gate"] or r["hold_probability"] < limit for r in same]),
            }
            for limit in OUTLOOK_LIMITS
        },
        "fell_by_shift": {str(f): sum(r["shift"] == f for r in fell) for f in SHIFTS},
        "monitor_gate": {  # monitor --gate: the interval gate or the positive rate past its limit
            "fires_where_precision_fell": _share([r["gate_monitor"] for r in fell]),
            "fires_at_lower_rates_where_it_fell": _share([r["gate_monitor"] for r in fell_shifted]),
            "fires_at_x1": _share([r["gate_monitor"] for r in same]),
            "fires_where_it_fell_by_shift": {
                str(f): _share([r["gate_monitor"] for r in fell if r["shift"] == f]) for f in SHIFTS
            },
            "fires_by_shift": {str(f): _share([r["gate_monitor"] for r in runs if r["shift"] == f]) for f in SHIFTS},
        },
    }


def _share(flags: list[bool]) -> float | None:
    return float(np.mean(flags)) if flags else None


def retarget_speed(rows: int = 1_000_000) -> dict[str, float]:
    """Seconds to re-target on a stored curve of one million held-out rows (merged to 65,536 points): the plain
    search, a --confidence certificate of the population value, and one about 200,000 new rows (the new-sample
    test, whose cost grows with that count: docs/operating-points.md); and the curve's bytes."""
    rng = np.random.default_rng(0)
    labels = (rng.random(rows) < 0.05).astype(np.int8)
    scores = (rng.normal(size=rows) + 2 * labels).astype(np.float32)
    started = time.perf_counter()
    curve = HeldOutCurve.from_scores(scores, labels, split="cv", certified_rows=rows // 5)
    timings: dict[str, float] = {"rows": rows, "build_seconds": time.perf_counter() - started}
    for label, confidence, new_rows in (
        ("plain", None, None),
        ("population", 0.95, float("inf")),
        ("new_rows", 0.95, rows // 5),
    ):
        started = time.perf_counter()
        search_curve(curve.score_curve(), Problem("fpor", TARGET), confidence, new_rows)
        timings[f"retarget_{label}_seconds"] = time.perf_counter() - started
    timings["curve_bytes"] = sum(array.nbytes for array in curve.tensors().values())
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--resplits", type=int, default=20)
    parser.add_argument("--models", nargs="+", default=["linear", "gbdt"], choices=list(MODELS))
    parser.add_argument("--sets", nargs="+", default=list(BINARY_SETS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--results-name", default="shift")
    parser.add_argument(
        "--only",
        choices=["adapt", "gate"],
        help="adapt: skip the re-targeting checks (train for FROP and OFBS, 1M rows); gate: also the --adapt variants",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    tasks = [
        (str(args.data_dir), name, seed, tuple(args.models), args.only)
        for name in args.sets
        for seed in range(args.resplits)
    ]
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(args.workers) as pool:
        for done, part in enumerate(pool.map(one_resplit, tasks), 1):
            rows += part
            print(f"[{done}/{len(tasks)}] {tasks[done - 1][1]} seed {tasks[done - 1][2]}", file=sys.stderr, flush=True)
    runs = [r for r in rows if "shift" in r]
    checks = [r for r in rows if "retarget_equal" in r]
    refused = [r for r in rows if "refused" in r]
    columns = ["group", "runs", "rate_error", "cc_error", "rate_covered", "precision_error",
               "unchanged_precision_error", "precision_covered", "recall_covered", "feasible_training",
               "feasible_adapt", "feasible_adapt95", "answered_adapt95", "recall_given_adapt95",
               "feasible_adapt95pop", "answered_adapt95pop", "recall_given_adapt95pop",
               "feasible_adapt80", "answered_adapt80", "feasible_prior95", "answered_prior95",
               "feasible_adapt95_other", "feasible_adapt95pop_other"]  # fmt: skip
    tables = {key or "pooled": summary(runs, key) for key in ("shift", "set", "model", None)}
    for key, table in tables.items():
        print(f"\n== by {key}")
        print_table(table, columns)
    gates = gate_rates(runs)
    speed = None if args.only else retarget_speed()
    equal = sum(r["retarget_equal"] for r in checks)
    print(f"\ngate: {gates}\nre-targeting: {equal} of {sum(r['retarget_checked'] for r in checks)} equal to train")
    print(f"1M held-out rows: {speed}\nrefused trainings: {len(refused)}; {time.perf_counter() - started:.0f} s")
    payload = {"resplits": args.resplits, "only": args.only, "models": args.models, "sets": args.sets, "tables": tables,
               "gate": gates, "retarget": {"equal": equal, "checked": len(checks) * 2, "speed": speed},
               "refused": refused, "runs": runs}  # fmt: skip
    print(f"wrote {write_results(args.results_name, payload)}")


if __name__ == "__main__":
    main()

"""Out-of-time thresholds and monitoring by month on streams that drift (issue 46's closing note): docs/time.md.

Twelve monthly periods of timestamped rows, in settings with known truth:

- `stationary`: nothing changes (positives 10 %, two Gaussian classes, 8 features);
- `rate_halving`: the positive rate halves over the year (12 % in month 1 to 6 % in month 12), the classes'
  features unchanged (a label shift);
- `covariate_drift`: P(y|x) fixed (the stationary set's logistic), the features' distribution moves: two
  irrelevant features drift by 1.2 and 0.8 sd, and the informative direction by -0.5 sd over the year (fewer rows
  score high);
- `concept_change`: from month 7 on, positives no longer differ on x0 but on x7 (an unused feature), the
  separation unchanged: P(y|x) changes at a known month;
- each binary set of ../shared/data, pooled (train + val + test) and given a time order by a hidden drifting
  variable: a random direction over the standardized numeric features plus Gaussian noise of the same sd; the rows
  sorted by it and cut into 12 months of equal size (a new direction and noise each draw; nothing tuned to the sets).

Each draw trains, for each roll R = 6..11 (train on months 1..R, judge month R+1), one `wce` linear model per
fitting method, through the Python API: `shuffled` (`--cv 5`, the timestamp dropped) and `time` (`--time-col ts`,
5 forward-chained blocks). Every threshold is re-targeted from the model's stored held-out curve
(`dmocli.refit_threshold` without DATA: out-of-fold scores for `shuffled`, the later blocks' for `time`):
FPOR 0.9 (precision >= 0.9, most recall) and FROP 0.8 (recall >= 0.8, best precision), each without confidence,
with `--confidence 0.95` as a user types it (the population value certified: dmo's default `--new-rows`), and
with `--confidence 0.95 --new-rows M` (`0.95@month`), M the judged month's row count: the certificate for the
value measured on the next month's M rows, which is what "met on month R+1" judges. A run is refused when the
target is out of reach on the stored curve (or training refuses the data). Each threshold is judged on month R+1:
whether its constrained metric meets the target there, and the objective (recall for FPOR, precision for FROP).

Monitoring (the synthetic settings): the `time` model of roll 6 certified for FPOR 0.9 at 0.95 (the population
value) is monitored on each month 7..12 with `dmocli.use.monitor.monitor` (labels present, so the report holds the
realized values beside the estimates): the estimated positive rate and precision with their intervals against the
realized ones, and the gate's verdict (recorded without --gate) with its reasons.

    python bench/time.py --quick                       # a smoke run: 2 draws, judged months 7 and 12, 5 settings
    nice -n 10 python bench/time.py --draws 30 --settings stationary rate_halving covariate_drift --judged 7 \
        --population 20000 --results-name time-population   # also judged on 20,000 fresh rows of month 7
    nice -n 10 python bench/time.py --draws 30         # writes bench/results/time.json (judged months 7, 9, 12)
    nice -n 10 python bench/time.py --draws 30 --judged 7,8,9,10,11,12 --results-name time-all-rolls
    nice -n 10 python bench/time.py --draws 30 --settings stationary rate_halving covariate_drift concept_change \
        --results-name time-month-sample            # the same four settings alone (0.95@month: M = 1,500)
    nice -n 10 python bench/time.py --draws 30 --rows 4000 --settings stationary rate_halving covariate_drift \
        concept_change --results-name time-month-sample-4000   # 4,000 rows a month, certified for M = 4,000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread a worker process: the processes share the cores

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BINARY_SETS, DEFAULT_DATA, print_table, write_results  # noqa: E402
from targets_on_new_data import pooled  # noqa: E402

from dmocli import DmoError, Problem, TrainOptions, load_model, refit_threshold, train  # noqa: E402

SYNTHETIC = ("stationary", "rate_halving", "covariate_drift", "concept_change")
MONTHS, FEATURES, CHANGE_MONTH = 12, 8, 7  # CHANGE_MONTH: concept_change's first changed month (1-based)
SEPARATION, BASE_RATE = 2.5, 0.10
DIRECTION = np.array([1.0, -0.8, 0.6, 0.5, 0.4, 0.3, 0.0, 0.0]) / np.sqrt(2.5)  # unit: x6, x7 unused at first
PROBLEMS = {"fpor": ("fpor", 0.9), "frop": ("frop", 0.8)}
# name: (confidence, new_rows); "month": the judged month's row count, the sample its measured value is read on
CONFIDENCES = {"none": (None, None), "0.95": (0.95, None), "0.95@month": (0.95, "month")}
METHODS = {"shuffled": {"drop": ("ts",)}, "time": {"time_col": "ts"}}
MONITORED = ("time", "fpor", "0.95")  # the model monitored month by month
START = np.datetime64("2024-01", "M")


def wilson(hits: int, n: int, z: float = 1.96) -> list[float]:
    """The Wilson score interval of a share (95 %): usable at 0 and n hits, unlike the normal one."""
    if n == 0:
        return [0.0, 1.0]
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [float(max(0.0, centre - half)), float(min(1.0, centre + half))]


def timestamps(month: np.ndarray, rng: np.random.Generator) -> pa.Array:
    """A time for each row: its month's first day plus a uniform share of that month."""
    starts = (START + month.astype("timedelta64[M]")).astype("datetime64[us]")
    ends = (START + (month + 1).astype("timedelta64[M]")).astype("datetime64[us]")
    offsets = (rng.random(month.size) * (ends - starts).astype(np.int64)).astype("timedelta64[us]")
    return pa.array(starts + offsets)


def synthetic(scenario: str, seed: int, rows: int) -> tuple[pa.Table, np.ndarray]:
    """The scenario's 12 months of `rows` rows each, in time order, and each row's month (0-based)."""
    rng = np.random.default_rng([seed, SYNTHETIC.index(scenario)])
    month = np.repeat(np.arange(MONTHS), rows)
    step = month / (MONTHS - 1)  # 0 in month 1, 1 in month 12
    delta = np.tile(SEPARATION * DIRECTION, (month.size, 1))
    rate = np.full(month.size, BASE_RATE)
    if scenario == "rate_halving":
        rate = 0.12 * 0.5**step
    if scenario == "concept_change":
        changed = month >= CHANGE_MONTH - 1
        delta[changed, 7], delta[changed, 0] = delta[changed, 0], 0.0
    y = (rng.random(month.size) < rate).astype(np.int64)
    X = rng.standard_normal((month.size, FEATURES)) + y[:, None] * delta
    if scenario == "covariate_drift":  # move the features, then draw y from the fixed P(y|x)
        drift = 1.2 * np.eye(FEATURES)[6] + 0.8 * np.eye(FEATURES)[7] - 0.5 * DIRECTION
        X = X + step[:, None] * drift
        w = SEPARATION * DIRECTION
        logit = X @ w - w @ w / 2 + np.log(BASE_RATE / (1 - BASE_RATE))
        y = (rng.random(month.size) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    columns = {f"x{j}": pa.array(X[:, j].astype(np.float32)) for j in range(FEATURES)}
    table = pa.table({**columns, "ts": timestamps(month, rng), "label": pa.array(y)})
    return table, month


def shared(table: pa.Table, name: str, seed: int) -> tuple[pa.Table, np.ndarray]:
    """The pooled set in the order of a hidden drifting variable (a random direction over the standardized numeric
    features plus noise of the same sd), cut into 12 months of equal size."""
    rng = np.random.default_rng([seed, 1000 + BINARY_SETS.index(name)])
    numeric = [c for c in table.column_names if c != "label" and pa.types.is_floating(table.schema.field(c).type)]
    numeric += [c for c in table.column_names if c != "label" and pa.types.is_integer(table.schema.field(c).type)]
    Z = np.column_stack([table.column(c).to_numpy(zero_copy_only=False).astype(np.float64) for c in numeric])
    Z = np.nan_to_num((Z - np.nanmean(Z, axis=0)) / np.maximum(np.nanstd(Z, axis=0), 1e-12))
    direction = rng.standard_normal(Z.shape[1])
    projection = Z @ (direction / np.linalg.norm(direction))
    hidden = projection + rng.normal(scale=max(float(projection.std()), 1e-12), size=projection.size)
    order = np.argsort(hidden, kind="stable")
    month = (np.arange(order.size) * MONTHS) // order.size
    ordered = table.take(pa.array(order))
    return ordered.append_column("ts", timestamps(month, rng)), month


def at(logits: np.ndarray, y: np.ndarray, threshold: float) -> tuple[float, float, int]:
    """Precision (0 where nothing is flagged), recall and the flagged count at `threshold`."""
    flagged = logits >= np.float32(threshold)
    tp = int((flagged & (y == 1)).sum())
    return tp / max(int(flagged.sum()), 1), tp / max(int((y == 1).sum()), 1), int(flagged.sum())


def judged(
    model_path: Path, logits: np.ndarray, y: np.ndarray, work: Path, base: dict, *, population: tuple | None = None
) -> list[dict[str, Any]]:
    """Every (problem, confidence) threshold re-targeted from the stored curve, judged on the next month's rows
    (and, given `population`, on a large fresh sample of that month: the population value a certificate is about)."""
    out = []
    for pname, (kind, target) in PROBLEMS.items():
        for cname, (confidence, sample) in CONFIDENCES.items():
            new_rows = y.size if sample == "month" else None  # the judged month's rows: what it is measured on
            row = {**base, "problem": pname, "confidence": cname, "new_rows": new_rows}
            moved = work / f"{pname}-{cname}.st"
            moved.unlink(missing_ok=True)  # another model's re-target must not stand in for a refused one
            try:
                refit_threshold(
                    model_path, None, Problem(kind, target), moved, confidence=confidence, new_rows=new_rows
                )
            except DmoError as exc:  # the target out of reach on the stored curve: refused, not a threshold
                out.append({**row, "refused": type(exc).__name__, "reason": str(exc)[:600]})
                continue
            threshold = load_model(moved).threshold
            precision, recall, flagged = at(logits, y, threshold)
            met = (precision if kind == "fpor" else recall) >= target
            objective = recall if kind == "fpor" else precision
            row = {**row, "threshold": threshold, "met": bool(met), "objective": objective, "flagged": flagged}
            if population is not None:
                precision, recall, _ = at(*population, threshold)
                row["met_population"] = bool((precision if kind == "fpor" else recall) >= target)
            out.append(row)
    return out


def one_draw(task: tuple[str, int, int, tuple[int, ...], str]) -> dict[str, Any]:
    """One draw of one setting: every roll's two models, their thresholds judged, and the monitoring by month."""
    setting, draw, rows, judged_months, data_dir, population_rows = task
    if setting in SYNTHETIC:
        table, month = synthetic(setting, draw, rows)
    else:
        table, month = shared(pooled(Path(data_dir), setting), setting, draw)
    y_all = table.column("label").to_numpy()
    runs: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        for judge in judged_months:  # 1-based month judged; trained on months 1..judge-1
            train_rows = pa.array(month < judge - 1)
            next_rows = np.flatnonzero(month == judge - 1)
            next_table = table.take(pa.array(next_rows))
            y = y_all[next_rows]
            for method, extra in METHODS.items():
                base = {"setting": setting, "draw": draw, "month": judge, "method": method}
                if not (y == 1).any():
                    runs.append({**base, "excluded": "no positive in the judged month"})
                    continue
                model_path = work / f"{method}.st"
                opts = TrainOptions(problem="fpor", target=0.9, cv=5, seed=draw, allow_infeasible=True, **extra)
                try:
                    model, _ = train(table.filter(train_rows), opts, output=model_path)
                except DmoError as exc:  # e.g. too few positives for 5 blocks: the data refused, every variant
                    runs.append({**base, "refused_training": str(exc)[:200]})
                    continue
                logits, _ = model.logits(next_table)
                population = None
                if population_rows and setting in SYNTHETIC:  # a fresh draw of the same stream, many rows a month
                    big, big_month = synthetic(setting, draw + 1_000_000, population_rows)
                    big = big.filter(pa.array(big_month == judge - 1))
                    population = (model.logits(big)[0], big.column("label").to_numpy())
                runs += judged(model_path, logits, y, work, base, population=population)
                if setting in SYNTHETIC and judge == CHANGE_MONTH and method == MONITORED[0]:
                    history = monitored(work / f"{MONITORED[1]}-{MONITORED[2]}.st", table, month, base)
    return {"runs": runs, "history": history}


def monitored(model_path: Path, table: pa.Table, month: np.ndarray, base: dict) -> list[dict[str, Any]]:
    """`monitor` of the certified model on each month from CHANGE_MONTH on: estimates, realized values, gate."""
    from dmocli.use.monitor import monitor

    if not model_path.exists():  # the certificate was out of reach: nothing to monitor
        return [{"setting": base["setting"], "draw": base["draw"], "refused": True}]
    out = []
    for judge in range(CHANGE_MONTH, MONTHS + 1):
        section = table.filter(pa.array(month == judge - 1))
        report = monitor(model_path, section)
        report = report.to_dict() if hasattr(report, "to_dict") else report  # a typed result, or the report dict
        rate, shifted, realized = report["positive_rate"], report["label_shift"], report.get("realized", {})
        out.append(
            {
                "setting": base["setting"],
                "draw": base["draw"],
                "month": judge,
                "rate": rate["estimate"],
                "rate_interval": rate["interval"],
                "training_rate": rate["training"],
                "precision": shifted["precision"],
                "precision_interval": shifted["precision_interval"],
                "covariate_precision": report["covariate_shift"]["precision"],
                "covariate_precision_interval": report["covariate_shift"]["precision_interval"],
                "realized_rate": float(pc.mean(section.column("label")).as_py()),
                "realized_precision": realized.get("precision")
                if realized.get("tp", 0) + realized.get("fp", 0)
                else None,
                "passed": report["gate"]["passed"],
                "reasons": [reason_kind(r) for r in report["gate"]["reasons"]],
            }
        )
    return out


def reason_kind(reason: str | dict) -> str:
    """What a gate reason is about: the estimated constraint, the positive rate, a feature's drift, or other."""
    if isinstance(reason, dict):  # a typed reason written as a record
        reason = str(reason.get("text", reason))
    if "estimated precision" in reason or "estimated recall" in reason:
        return "estimate"
    if "positive rate moved" in reason:
        return "rate"
    if "PSI" in reason or "drift" in reason:
        return "drift"
    return "other"


def summary_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (setting, problem, method, confidence): the share of (draw, month) whose threshold met the target on
    the judged month (Wilson 95 %), refusals, and the mean objective with its standard error over draws (the
    months of one draw share a stream, so the draws are the independent units)."""
    keys = sorted({(r["setting"], r["problem"], r["method"], r["confidence"]) for r in runs if "problem" in r})
    order = {name: i for i, name in enumerate([*SYNTHETIC, *BINARY_SETS])}
    keys.sort(key=lambda k: (order.get(k[0], 99), k[1], list(CONFIDENCES).index(k[3]), k[2]))
    out = []
    for setting, problem, method, confidence in keys:
        mine = [
            r
            for r in runs
            if (r["setting"], r.get("problem"), r["method"], r.get("confidence"))
            == (setting, problem, method, confidence)
        ]
        given = [r for r in mine if "met" in r]
        hits = sum(r["met"] for r in given)
        per_draw: dict[int, list[float]] = {}
        for r in given:
            per_draw.setdefault(r["draw"], []).append(r["objective"])
        means = np.array([np.mean(v) for v in per_draw.values()])
        refused_training = sum(
            1 for r in runs if r["setting"] == setting and r["method"] == method and "refused_training" in r
        )
        out.append(
            {
                "setting": setting,
                "problem": problem,
                "confidence": confidence,
                "method": method,
                "draws": len({r["draw"] for r in runs if r["setting"] == setting}),
                "runs": len(given),
                "refused": len(mine) - len(given) + refused_training,
                "met": hits / len(given) if given else float("nan"),
                "met_low": wilson(hits, len(given))[0],
                "met_high": wilson(hits, len(given))[1],
                "objective": float(means.mean()) if means.size else float("nan"),
                "objective_se": float(means.std(ddof=1) / np.sqrt(means.size)) if means.size > 1 else float("nan"),
                "empty": sum(1 for r in given if r["flagged"] == 0),
                **population_share([r for r in given if "met_population" in r]),
            }
        )
    return out


def population_share(given: list[dict[str, Any]]) -> dict[str, Any]:
    """The share whose threshold met the target on the month's population (--population), with its interval."""
    if not given:
        return {}
    hits = sum(r["met_population"] for r in given)
    low, high = wilson(hits, len(given))
    return {"met_pop": hits / len(given), "met_pop_low": low, "met_pop_high": high}


def history_rows(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (scenario, month): the mean estimated and realized rate and precision, how often each 95 % interval
    held the realized value, and how often the gate failed (and on what)."""
    out = []
    for setting in SYNTHETIC:
        for judge in range(CHANGE_MONTH, MONTHS + 1):
            rows = [h for h in history if h["setting"] == setting and h.get("month") == judge]
            if not rows:
                continue
            real_p = [h for h in rows if h["realized_precision"] is not None]
            covered = sum(
                h["precision_interval"][0] <= h["realized_precision"] <= h["precision_interval"][1] for h in real_p
            )
            kinds = [k for h in rows for k in set(h["reasons"])]
            out.append(
                {
                    "setting": setting,
                    "month": judge,
                    "draws": len(rows),
                    "rate_est": float(np.mean([h["rate"] for h in rows])),
                    "rate_real": float(np.mean([h["realized_rate"] for h in rows])),
                    "rate_cover": float(
                        np.mean([h["rate_interval"][0] <= h["realized_rate"] <= h["rate_interval"][1] for h in rows])
                    ),
                    "prec_est": float(np.mean([h["precision"] for h in rows])),
                    "prec_cs": float(np.mean([h["covariate_precision"] for h in rows])),
                    "prec_real": float(np.mean([h["realized_precision"] for h in real_p])) if real_p else float("nan"),
                    "prec_cover": covered / len(real_p) if real_p else float("nan"),
                    "real_below": float(np.mean([h["realized_precision"] < 0.9 for h in real_p]))
                    if real_p
                    else float("nan"),
                    "gate_failed": float(np.mean([not h["passed"] for h in rows])),
                    "by_estimate": kinds.count("estimate"),
                    "by_rate": kinds.count("rate"),
                    "by_drift": kinds.count("drift"),
                    "by_other": kinds.count("other"),
                }
            )
    return out


def gate_summary(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per scenario over draws: the first month the gate failed (months after the change: concept_change's month 7;
    the others' first monitored month, 7), the first month the realized precision fell below 0.9, and false alarms
    (every failure on `stationary`; on the others, failures in months whose realized precision met 0.9)."""
    out = []
    for setting in SYNTHETIC:
        draws = sorted({h["draw"] for h in history if h["setting"] == setting and "month" in h})
        refused = len({h["draw"] for h in history if h["setting"] == setting and h.get("refused")})
        if not draws:
            continue
        firsts, realized_firsts, lags = [], [], []
        fired_months = months = 0
        alarms = alarm_months = 0
        for draw in draws:
            rows = sorted(
                (h for h in history if h["setting"] == setting and h["draw"] == draw and "month" in h),
                key=lambda h: h["month"],
            )
            fired = [h["month"] for h in rows if not h["passed"]]
            below = [h["month"] for h in rows if h["realized_precision"] is not None and h["realized_precision"] < 0.9]
            firsts.append(fired[0] if fired else None)
            realized_firsts.append(below[0] if below else None)
            if fired and below:
                lags.append(fired[0] - below[0])
            fired_months += len(fired)
            months += len(rows)
            held = [h for h in rows if h["realized_precision"] is None or h["realized_precision"] >= 0.9]
            alarm_months += len(held)
            alarms += sum(not h["passed"] for h in held)
        fired_at = [f for f in firsts if f is not None]
        out.append(
            {
                "setting": setting,
                "draws": len(draws),
                "refused": refused,
                "ever_fired": len(fired_at),
                "first_fire_median": float(np.median(fired_at)) if fired_at else float("nan"),
                "months_to_fire_median": float(np.median(fired_at)) - CHANGE_MONTH if fired_at else float("nan"),
                "first_below_median": float(np.median([f for f in realized_firsts if f is not None]))
                if any(f is not None for f in realized_firsts)
                else float("nan"),
                "lag_median": float(np.median(lags)) if lags else float("nan"),
                "failed_months": fired_months,
                "months": months,
                "failed_share": fired_months / months,
                "failed_low": wilson(fired_months, months)[0],
                "failed_high": wilson(fired_months, months)[1],
                "false_alarms": alarms,
                "false_alarm_months": alarm_months,
                "first_fires": firsts,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=30)
    parser.add_argument("--rows", type=int, default=1500, help="rows a month in the synthetic settings")
    parser.add_argument(
        "--judged", default="7,9,12", help="the months judged, each by models trained on the months before it"
    )
    parser.add_argument("--settings", nargs="+", default=[*SYNTHETIC, *BINARY_SETS])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--population", type=int, default=0, help="also judge on this many fresh rows of the month (synthetic)"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 draws, months 7 and 12, 600 rows")
    parser.add_argument("--results-name", default="time")
    args = parser.parse_args()
    if args.quick:
        args.draws, args.rows, args.judged = 2, 600, "7,12"
        args.settings = [*SYNTHETIC, "page_blocks0"]
        args.results_name = f"{args.results_name}-quick"
    judged_months = tuple(int(m) for m in args.judged.split(","))
    if CHANGE_MONTH not in judged_months:
        parser.error(f"--judged must include month {CHANGE_MONTH}: the monitored model is the one trained before it")
    started = time.perf_counter()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent)
    tasks = [
        (s, d, args.rows, judged_months, str(args.data_dir), args.population)
        for d in range(args.draws)
        for s in args.settings
    ]
    runs, history = [], []
    with ProcessPoolExecutor(args.workers) as pool:
        futures = [pool.submit(one_draw, task) for task in tasks]
        for done, future in enumerate(as_completed(futures), 1):
            result = future.result()
            runs += result["runs"]
            history += result["history"]
            if done % 10 == 0 or done == len(tasks):
                print(f"  {done}/{len(tasks)} draws done, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    summary = summary_rows(runs)
    print_table(
        summary,
        [
            "setting",
            "problem",
            "confidence",
            "method",
            "runs",
            "refused",
            "met",
            "met_low",
            "met_high",
            "objective",
            "objective_se",
            "empty",
            "met_pop",
        ],
    )
    months = history_rows(history)
    print()
    print_table(months, list(months[0]) if months else ["setting"])
    gates = gate_summary(history)
    print()
    print_table(gates, [c for c in (gates[0] if gates else {"setting": 0}) if c != "first_fires"])
    path = write_results(
        args.results_name,
        {
            "setup": {
                "draws": args.draws,
                "rows_per_month": args.rows,
                "judged_months": list(judged_months),
                "settings": args.settings,
                "problems": PROBLEMS,
                "confidences": {k: list(v) for k, v in CONFIDENCES.items()},
                "methods": {
                    k: {n: list(v) if isinstance(v, tuple) else v for n, v in o.items()} for k, o in METHODS.items()
                },
                "monitored": list(MONITORED),
                "change_month": CHANGE_MONTH,
                "dmocli": str(Path(sys.modules["dmocli"].__file__).parent),
                "commit": commit.stdout.strip(),
                "workers": args.workers,
                "population_rows": args.population,
            },
            "summary": summary,
            "history_by_month": months,
            "gate": gates,
            "runs": runs,
            "history": history,
            "seconds": time.perf_counter() - started,
        },
    )
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

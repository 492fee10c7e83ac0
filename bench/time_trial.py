"""Issue 46's trial replayed before and after (its closing note: "the trial's frictions above, each before/after").

Why: issue 46 was filed from a new user's trial (a payments team's fraud export, January and February labeled,
March unlabeled with the fraud rate halved, precision >= 0.9 wanted) that failed where the rows are a sequence in
time. This script replays that trial on a generated export with known truth and runs each friction's commands on
two trees of the code, recording exit codes and the figures the issue names:

1. out-of-time threshold: `dmo train --time-col created_at` (refused before: no such option) against the shuffled
   `--cv` threshold, both judged on March's true labels; and `--val FEB` pooled (before) or the later period (after);
2. `--dates parts` on January alone: `dmo monitor --gate` on March (days_since's PSI before), `predict --explain 3`
   and `info --features`;
3. monitoring by period: `--chunk-col week` on a computed column (before) or `--time-col created_at --every week`;
4. the loop: gate, `threshold --adapt`, gate on the adapted model, `info`'s certificate line, March precision of
   the adapted threshold (after: also `--no-confidence`, and the `--time-col` model adapted);
5. labels arrive: `monitor --history`, `evaluate --history` on March's labels, `monitor --history` (the table).

The export (seed 46): 4,350 January, 4,344 February rows at a fraud rate of 6.5 %, 4,306 March rows at 3.25 %
(March's labels kept aside in march_labeled.parquet); a timestamp `created_at` uniform over each month, four numeric
features and one categorical (`channel`) drawn given the label from distributions that do not change over the
months (a pure label shift, which `--adapt` assumes). Every training: `wce` linear,
`--problem fpor --target 0.9 --confidence 0.95 --label-col is_fraud`, seed 0.

Which code runs: every `dmo` process is `python -m dmocli` with `PYTHONPATH=TREE` and the current directory the
work folder (so the editable install of /work/main cannot win); before the first command the script checks that
`dmocli.__file__` lies inside each TREE.

    mkdir -p /tmp/identity/base_src && git archive 3e516ca | tar -x -C /tmp/identity/base_src   # the code before
    python bench/time_trial.py --before /tmp/identity/base_src        # about 2 minutes on 2 cores

Writes bench/results/time_trial.json (every command, its exit code and last error line, and the figures) and
prints the before/after table that docs/time.md ("The trial, before and after") shows.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, write_results  # noqa: E402

TARGET = ["--problem", "fpor", "--target", "0.9", "--confidence", "0.95", "--label-col", "is_fraud"]
CHANNELS = ["web", "app", "pos", "phone"]


def month_rows(rng: np.random.Generator, month: int, rows: int, rate: float) -> pa.Table:
    """One month of payments: the label first, then features drawn given it (the same laws every month)."""
    y = (rng.random(rows) < rate).astype(np.int64)
    start = dt.datetime(2026, month, 1)
    span = (dt.datetime(2026, month + 1, 1) - start).total_seconds()
    micros = np.sort(rng.uniform(0, span, rows)) * 1e6
    created = np.datetime64(start, "us") + micros.astype("timedelta64[us]")
    fraud_channel = rng.choice(CHANNELS, rows, p=[0.5, 0.2, 0.1, 0.2])
    legit_channel = rng.choice(CHANNELS, rows, p=[0.3, 0.35, 0.3, 0.05])
    return pa.table(
        {
            "created_at": pa.array(created, pa.timestamp("us")),
            "amount": np.round(np.exp(rng.normal(3.6 + 1.1 * y, 0.9)), 2),
            "tx_last_24h": rng.poisson(1.5 + 2.5 * y),
            "account_age_days": np.round(rng.gamma(2.0, 400.0 - 250.0 * y), 0),
            "ip_distance_km": np.round(np.abs(rng.normal(20.0 + 120.0 * y, 40.0 + 60.0 * y)), 1),
            "channel": np.where(y == 1, fraud_channel, legit_channel),
            "is_fraud": y,
        }
    )


def write_export(directory: Path, seed: int) -> dict[str, float]:
    """The trial's files, and each month's true fraud rate."""
    rng = np.random.default_rng(seed)
    jan, feb, mar = month_rows(rng, 1, 4350, 0.065), month_rows(rng, 2, 4344, 0.065), month_rows(rng, 3, 4306, 0.0325)
    pq.write_table(jan, directory / "jan.parquet")
    pq.write_table(feb, directory / "feb.parquet")
    pq.write_table(pa.concat_tables([jan, feb]), directory / "janfeb.parquet")
    pq.write_table(mar, directory / "march_labeled.parquet")
    pq.write_table(mar.drop(["is_fraud"]), directory / "march.parquet")
    monday = [str((t - dt.timedelta(days=t.weekday())).date()) for t in mar.column("created_at").to_pylist()]
    pq.write_table(mar.drop(["is_fraud"]).append_column("week", pa.array(monday)), directory / "march_week.parquet")
    rate = {
        name: float(pc.mean(t.column("is_fraud")).as_py()) for name, t in (("jan", jan), ("feb", feb), ("mar", mar))
    }
    return rate


@dataclass
class Step:
    """One dmo command: its arguments, exit code, last error line and the JSON it printed (if any)."""

    args: list[str]
    rc: int
    error: str
    stdout: str
    report: dict[str, Any] | None = field(default=None)


@dataclass
class Tree:
    """One checkout of the code, run as `python -m dmocli` with PYTHONPATH set to it, in the work folder."""

    name: str
    path: Path
    work: Path
    steps: list[dict[str, Any]] = field(default_factory=list)

    def check(self) -> str:
        env = {**os.environ, "PYTHONPATH": str(self.path)}
        out = subprocess.run(
            [sys.executable, "-c", "import dmocli; print(dmocli.__file__)"],
            cwd=self.work,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not Path(out).resolve().is_relative_to((self.path / "dmocli").resolve()):
            raise SystemExit(f"{self.name}: dmocli imported from {out}, not {self.path}")
        return out

    def dmo(self, *args: str, json_out: bool = False) -> Step:
        env = {**os.environ, "PYTHONPATH": str(self.path), "COLUMNS": "200", "NO_COLOR": "1"}
        argv = [*args, "--json"] if json_out else list(args)
        done = subprocess.run(
            [sys.executable, "-m", "dmocli", "--no-progress", *argv],
            cwd=self.work,
            env=env,
            capture_output=True,
            text=True,
        )
        errors = [line for line in done.stderr.splitlines() if line.strip()]
        report = None
        if json_out and done.stdout.strip().startswith("{"):
            report = json.loads(done.stdout)
        step = Step(argv, done.returncode, errors[-1] if errors else "", done.stdout, report)
        self.steps.append({"args": argv, "rc": step.rc, "error": step.error})
        return step

    def train(self, data: str, out: str, *extra: str) -> Step:
        step = self.dmo("train", data, *TARGET, "-o", out, "--report", out + ".json", *extra)
        report = self.work / (out + ".json")
        step.report = json.loads(report.read_text()) if step.rc in (0, 3) and report.exists() else None
        return step

    def precision_on(self, model: str, data: str = "march_labeled.parquet") -> dict[str, Any] | None:
        """The realized precision and recall of MODEL's stored threshold on labeled rows."""
        step = self.dmo("evaluate", model, data, json_out=True)
        if step.report is None:
            return None
        split = step.report["splits"]["data"]
        return {k: split[k] for k in ("precision", "precision_interval", "recall", "tp", "fp", "n_pos", "n")}


def info_lines(tree: Tree, model: str) -> list[str]:
    """`dmo info`'s lines about the target, certificate and adaptation."""
    step = tree.dmo("info", model)
    keys = ("problem:", "certif", "adapted:")
    return [line.strip() for line in step.stdout.splitlines() if any(k in line for k in keys)]


def friction_out_of_time(tree: Tree) -> dict[str, Any]:
    """1. Train on Jan+Feb with --time-col (or the refusal), the shuffled --cv threshold, and --val FEB."""
    res: dict[str, Any] = {}
    timed = tree.train("janfeb.parquet", "time.dmo.safetensors", "--time-col", "created_at")
    res["time_col"] = {"rc": timed.rc, "error": timed.error}
    if timed.rc == 0 and timed.report is not None:
        blocks = timed.report["time_blocks"]
        res["time_col"] |= {
            "held_out": blocks["held_out"],
            "threshold": timed.report["threshold"],
            "march": tree.precision_on("time.dmo.safetensors"),
        }
    shuffled = tree.train("janfeb.parquet", "cv.dmo.safetensors", "--drop", "created_at")
    res["shuffled_cv"] = {
        "rc": shuffled.rc,
        "held_out": "Jan+Feb rows in 5 shuffled folds",
        "threshold": shuffled.report["threshold"] if shuffled.report else None,
        "march": tree.precision_on("cv.dmo.safetensors"),
    }
    for key, extra in (("val_feb", ()), ("val_feb_cv5", ("--cv", "5"))):
        out = key + ".dmo.safetensors"
        step = tree.train("jan.parquet", out, "--val", "feb.parquet", "--drop", "created_at", *extra)
        rep = step.report or {}
        cv = rep.get("cv") or {}
        held = "val" if "val" in rep.get("splits", {}) else "cv"
        res[key] = {
            "rc": step.rc,
            "threshold_on": held,
            "pooled_val": cv.get("pooled_val"),
            "held_out_rows": rep.get("splits", {}).get(held, {}).get("n"),
            "threshold": rep.get("threshold"),
            "march": tree.precision_on(out),
        }
    later = tree.train("jan.parquet", "val_time.dmo.safetensors", "--val", "feb.parquet", "--time-col", "created_at")
    res["val_feb_time_col"] = {"rc": later.rc, "error": later.error}
    if later.rc == 0 and later.report is not None:
        res["val_feb_time_col"] |= {
            "held_out": later.report["time_blocks"]["held_out"],
            "march": tree.precision_on("val_time.dmo.safetensors"),
        }
    return res


def monitor_summary(step: Step) -> dict[str, Any]:
    """A monitor run's exit code, rate estimate, top drift and gate reasons."""
    out: dict[str, Any] = {"rc": step.rc, "error": step.error}
    rep = step.report
    if rep is None or "drift" not in rep:  # a refusal's JSON names the error only
        return out
    drift = sorted(rep["drift"], key=lambda d: -d["psi"])
    out |= {
        "rate": rep["positive_rate"]["estimate"],
        "rate_interval": rep["positive_rate"]["interval"],
        "reference_rate": (rep.get("reference_rate") or {}).get("rate", rep["positive_rate"]["training"]),
        "label_shift_precision": rep["label_shift"]["precision"],
        "top_drift": [(d["name"], round(d["psi"], 3), d["severity"]) for d in drift[:3]],
        "gate_reasons": rep["gate"]["reasons"],
        "chunks": [(c["chunk"], c["rows"]) for c in rep.get("chunks") or []],
    }
    return out


def friction_date_parts(tree: Tree, trend: bool = False) -> dict[str, Any]:
    """2. --dates parts (or parts,trend) on January alone, then March: monitor --gate, explain, info --features."""
    model = "parts_trend.dmo.safetensors" if trend else "parts.dmo.safetensors"
    step = tree.train("jan.parquet", model, "--dates", "parts,trend" if trend else "parts")
    res: dict[str, Any] = {"train_rc": step.rc, "train_error": step.error}
    if step.rc != 0:
        return res
    res["warnings"] = (step.report or {}).get("warnings", [])
    res["monitor_gate"] = monitor_summary(tree.dmo("monitor", model, "march.parquet", "--gate", json_out=True))
    res["predict_explain_rc"] = tree.dmo(
        "predict", model, "march.parquet", "-o", "explained.parquet", "--explain", "3"
    ).rc
    res["info_features_rc"] = tree.dmo("info", model, "--features").rc
    return res


def friction_periods(tree: Tree) -> dict[str, Any]:
    """3. Per-week monitoring: a computed week column, or --time-col created_at --every week."""
    chunked = tree.dmo("monitor", "cv.dmo.safetensors", "march_week.parquet", "--chunk-col", "week", json_out=True)
    timed = tree.dmo(
        "monitor", "cv.dmo.safetensors", "march.parquet", "--time-col", "created_at", "--every", "week", json_out=True
    )
    return {"chunk_col_week": monitor_summary(chunked), "time_col_every_week": monitor_summary(timed)}


def adapt_and_judge(tree: Tree, model: str, out: str, *extra: str) -> dict[str, Any]:
    """--adapt MARCH, then the gate on the adapted model, its info lines and March precision."""
    adapted = tree.dmo("threshold", model, "--adapt", "march.parquet", "-o", out, *extra, json_out=True)
    res: dict[str, Any] = {"rc": adapted.rc, "error": adapted.error}
    if adapted.report is not None:
        res |= {
            "threshold": adapted.report["threshold"],
            "previous": adapted.report["previous_threshold"],
            "report_certificate": adapted.report.get("certificate"),
            "report_confidence": adapted.report.get("confidence"),
        }
    if adapted.rc != 0 or not (tree.work / out).exists():
        return res
    res["gate"] = monitor_summary(tree.dmo("monitor", out, "march.parquet", "--gate", json_out=True))
    res["info"] = info_lines(tree, out)
    res["march"] = tree.precision_on(out)
    return res


def friction_loop(tree: Tree) -> dict[str, Any]:
    """4. gate -> adapt -> gate, the certificate through it, March precision (shuffled --cv model)."""
    res: dict[str, Any] = {
        "gate": monitor_summary(tree.dmo("monitor", "cv.dmo.safetensors", "march.parquet", "--gate", json_out=True)),
        "info_model": info_lines(tree, "cv.dmo.safetensors"),
        "adapt": adapt_and_judge(tree, "cv.dmo.safetensors", "adapted.dmo.safetensors"),
    }
    if tree.name == "after":
        res["adapt_no_confidence"] = adapt_and_judge(
            tree, "cv.dmo.safetensors", "adapted_nc.dmo.safetensors", "--no-confidence"
        )
        res["adapt_time_col_model"] = adapt_and_judge(tree, "time.dmo.safetensors", "adapted_time.dmo.safetensors")
    return res


def history_table(tree: Tree, model: str, history: str) -> dict[str, Any]:
    """monitor --history, evaluate --history on March's labels, the table; and the same monitor run again."""
    week = ["--time-col", "created_at", "--every", "week", "--history", history]
    first = tree.dmo("monitor", model, "march.parquet", *week)
    labels = tree.dmo("evaluate", model, "march_labeled.parquet", *week)
    again = tree.dmo("monitor", model, "march.parquet", *week)
    table = tree.dmo("monitor", model, "--history", history, json_out=True)
    res: dict[str, Any] = {
        "monitor_rc": first.rc,
        "evaluate_rc": labels.rc,
        "monitor_again_rc": again.rc,
        "table_rc": table.rc,
        "error": table.error or labels.error or first.error,
    }
    if table.report is not None and "periods" in table.report:
        keys = (
            "period",
            "rows",
            "rate",
            "rate_low",
            "rate_high",
            "realized_rate",
            "precision",
            "precision_low",
            "precision_high",
            "realized_precision",
            "gate_passed",
        )
        res["periods"] = [{k: p.get(k) for k in keys} for p in table.report["periods"]]
    return res


def friction_labels(tree: Tree) -> dict[str, Any]:
    """5. The history of the trained model and of the adapted one (after); the refusal before."""
    res = {"model": history_table(tree, "cv.dmo.safetensors", "history.parquet")}
    if tree.name == "after" and (tree.work / "adapted.dmo.safetensors").exists():
        res["adapted"] = history_table(tree, "adapted.dmo.safetensors", "history_adapted.parquet")
    return res


def replay(tree: Tree) -> dict[str, Any]:
    return {
        "dmocli_file": tree.check(),
        "1_out_of_time": friction_out_of_time(tree),
        "2_dates_parts": friction_date_parts(tree),
        "2_dates_parts_trend": friction_date_parts(tree, trend=True),
        "3_periods": friction_periods(tree),
        "4_loop": friction_loop(tree),
        "5_labels": friction_labels(tree),
    }


def _p(figures: dict[str, Any] | None) -> str:
    """A realized precision on March with its interval and counts."""
    if not figures:
        return "-"
    low, high = figures["precision_interval"]
    return f"{figures['precision']:.3f} [{low:.3f}, {high:.3f}] (tp {figures['tp']}, fp {figures['fp']})"


def _refused(step: dict[str, Any]) -> str:
    return f"exit {step['rc']}: {step['error'].removeprefix('dmo: error: ')[:70]}"


def _held(held: dict[str, Any]) -> str:
    return f"{held['first'][:10]}..{held['last'][:10]}, {held['rows']:,} rows, {held['positives']} pos"


def _val(fit: dict[str, Any]) -> str:
    where = f"val pooled into 5 folds: {fit['pooled_val']}" if fit["threshold_on"] == "cv" else "fitted on val"
    return (
        f"exit {fit['rc']}; threshold {fit['threshold']:.3f} {where}, {fit['held_out_rows']:,} held-out rows; "
        f"March {_p(fit['march'])}"
    )


def _reason(reason: str) -> str:
    """A gate reason's gist: the rate's move or the feature that drifted."""
    body = reason.split(": ", 1)[-1]
    return body.split(" drifted")[0] + " drifted" if " drifted" in body else body.split(",")[0][:48]


def _gate(mon: dict[str, Any]) -> str:
    if "gate_reasons" not in mon:
        return _refused(mon)
    top = ", ".join(f"{name} {psi}" for name, psi, _ in mon["top_drift"][:1])
    reasons = "; ".join(_reason(r) for r in mon["gate_reasons"] if r.startswith("all rows"))
    return f"exit {mon['rc']}; top drift {top}; reasons: {reasons or 'none'}"


def _adapt(ad: dict[str, Any]) -> str:
    if "gate" not in ad:
        return f"adapt exit {ad['rc']}: {ad['error'].removeprefix('dmo: ')[:150]}..."
    info = "; ".join(line for line in ad["info"] if line.startswith(("problem:", "certif")))
    return (
        f"adapt exit {ad['rc']}, thr {ad['previous']:.3f}->{ad['threshold']:.3f}; gate exit {ad['gate']['rc']}; "
        f"info '{info}'; March precision {_p(ad['march'])}"
    )


def _periods(mon: dict[str, Any]) -> str:
    if not mon.get("chunks"):
        return _refused(mon)
    return f"exit {mon['rc']}: " + ", ".join(f"{name} {rows:,}" for name, rows in mon["chunks"])


def _history(hist: dict[str, Any]) -> str:
    if "periods" not in hist:
        return f"exit {hist['monitor_rc']}/{hist['evaluate_rc']}/{hist['table_rc']}: {hist['error'][:60]}"
    cells = [
        f"{p['period'][5:]} prec {p['precision']:.3f} [{p['precision_low']:.3f}, {p['precision_high']:.3f}]"
        f" real {p['realized_precision']:.3f}"
        for p in hist["periods"]
    ]
    inside = sum(p["precision_low"] <= p["realized_precision"] <= p["precision_high"] for p in hist["periods"])
    return (
        f"exits {hist['monitor_rc']}/{hist['evaluate_rc']}/{hist['table_rc']}; {len(cells)} rows after a rerun; "
        f"realized precision inside the estimate's interval {inside}/{len(cells)}: " + "; ".join(cells)
    )


def table(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The before/after rows the closing note and docs/time.md show."""
    b1, a1 = before["1_out_of_time"], after["1_out_of_time"]
    b2, a2 = before["2_dates_parts"], after["2_dates_parts"]
    b4, a4 = before["4_loop"], after["4_loop"]
    rows = [
        (
            "1 train JAN+FEB --time-col created_at",
            _refused(b1["time_col"]),
            f"exit 0; held out {_held(a1['time_col']['held_out'])}; March precision {_p(a1['time_col']['march'])}",
        ),
        (
            "1 shuffled --cv 5 (--drop created_at), March precision",
            _p(b1["shuffled_cv"]["march"]),
            _p(a1["shuffled_cv"]["march"]),
        ),
        ("1 train JAN --val FEB (no --cv)", _val(b1["val_feb"]), _val(a1["val_feb"])),
        ("1 train JAN --val FEB --cv 5", _val(b1["val_feb_cv5"]), _val(a1["val_feb_cv5"])),
        (
            "1 train JAN --val FEB --time-col created_at",
            _refused(b1["val_feb_time_col"]),
            f"exit 0; held out {_held(a1['val_feb_time_col']['held_out'])}; March "
            f"{_p(a1['val_feb_time_col']['march'])}",
        ),
        (
            "2 --dates parts (Jan): train warnings",
            "; ".join(b2["warnings"]) or "none",
            "; ".join(a2["warnings"]) or "none",
        ),
        ("2 monitor PARTS MARCH --gate", _gate(b2["monitor_gate"]), _gate(a2["monitor_gate"])),
        (
            "2 March rate estimate (true {:.4f})".format(after["rates"]["mar"]),
            "{:.4f} {}".format(b2["monitor_gate"]["rate"], b2["monitor_gate"]["rate_interval"]),
            "{:.4f} {}".format(a2["monitor_gate"]["rate"], a2["monitor_gate"]["rate_interval"]),
        ),
        (
            "2 --dates parts,trend: monitor --gate",
            before["2_dates_parts_trend"].get("train_error", "")[:70]
            or _gate(before["2_dates_parts_trend"]["monitor_gate"]),
            _gate(after["2_dates_parts_trend"]["monitor_gate"])
            if "monitor_gate" in after["2_dates_parts_trend"]
            else after["2_dates_parts_trend"]["train_error"],
        ),
        (
            "2 predict --explain 3 / info --features",
            f"exit {b2['predict_explain_rc']} / {b2['info_features_rc']}",
            f"exit {a2['predict_explain_rc']} / {a2['info_features_rc']}",
        ),
        (
            "3 monitor --chunk-col week (computed)",
            _periods(before["3_periods"]["chunk_col_week"]),
            _periods(after["3_periods"]["chunk_col_week"]),
        ),
        (
            "3 monitor --time-col created_at --every week",
            _periods(before["3_periods"]["time_col_every_week"]),
            _periods(after["3_periods"]["time_col_every_week"]),
        ),
        ("4 monitor MODEL MARCH --gate", _gate(b4["gate"]), _gate(a4["gate"])),
        ("4 threshold --adapt MARCH; gate; info; March", _adapt(b4["adapt"]), _adapt(a4["adapt"])),
        ("4 ... --adapt --no-confidence", "no such option", _adapt(a4["adapt_no_confidence"])),
        ("4 --time-col model, --adapt", "-", _adapt(a4["adapt_time_col_model"])),
        (
            "5 monitor/evaluate --history, table (MODEL)",
            _history(before["5_labels"]["model"]),
            _history(after["5_labels"]["model"]),
        ),
    ]
    if "adapted" in after["5_labels"]:
        rows.append(("5 the same for ADAPTED", "-", _history(after["5_labels"]["adapted"])))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, default=Path("/tmp/identity/base_src"))
    parser.add_argument("--after", type=Path, default=REPO)
    parser.add_argument("--seed", type=int, default=46)
    parser.add_argument("--results-name", default="time_trial")
    args = parser.parse_args()
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="time_trial_") as tmp:
        for name, path in (("before", args.before), ("after", args.after)):
            work = Path(tmp) / name
            work.mkdir()
            rates = write_export(work, args.seed)
            tree = Tree(name, path.resolve(), work)
            found[name] = {"tree": str(path), "rates": rates, **replay(tree), "commands": tree.steps}
    rows = table(found["before"], found["after"])
    width = max(len(r[0]) for r in rows)
    for friction, was, now in rows:
        print(f"{friction:<{width}}  before: {was}\n{'':<{width}}  after:  {now}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    path = write_results(
        args.results_name,
        {
            "after_commit": commit.stdout.strip(),
            "seed": args.seed,
            "table": [{"friction": f, "before": b, "after": a} for f, b, a in rows],
            **found,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

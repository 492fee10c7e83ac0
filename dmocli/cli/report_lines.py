"""The summary lines several commands print under their figures: one line per split, the outlook of a target on
new rows, a multi-class operating point's offsets (train, threshold, evaluate)."""

from __future__ import annotations

import math
from typing import Any


def split_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    constrained = {"fpor": "precision", "frop": "recall"}.get(report.get("problem") or "")
    for name, s in report.get("splits", {}).items():
        if "precision" in s and "accuracy" not in s:
            feasible = "" if s.get("feasible") is None else f"  feasible={s['feasible']}"
            lines.append(
                f"{name:>6}: {figure(s, 'precision', constrained)}  {figure(s, 'recall', constrained)}  "
                f"F{s['beta']:g} {s['f_beta']:.4f}  (tp {s['tp']}, fp {s['fp']}, fn {s['fn']}, n {s['n']}){feasible}"
            )
        else:
            lines.append(
                f"{name:>6}: accuracy {s['accuracy']:.4f}  balanced accuracy {s['balanced_accuracy']:.4f}  "
                f"macro F1 {s['macro_f1']:.4f}  (n {s['n']})"
                + (f"  min recall {min(s['per_class']['recall']):.4f}" if "macro_recall" in s else "")
            )
    return lines


def figure(split: dict[str, Any], metric: str, constrained: str | None) -> str:
    """`recall 0.4120`; the constrained metric with its interval, where its value on new data lies (`precision
    0.9050 [0.879, 0.927] 95%`): a figure alone reads as more certain than a few hundred rows allow. No interval
    without trials (no predicted positive)."""
    interval = split.get(f"{metric}_interval") if metric == constrained else None
    shown = "" if interval is None else f" [{interval[0]:.3f}, {interval[1]:.3f}] {split['interval_level']:.0%}"
    return f"{metric} {split[metric]:.4f}{shown}"


def outlook_line(report: dict[str, Any], split_name: str, new_rows: float | None) -> list[str]:
    """The chance the target holds on the next `new_rows` rows like the split's (None: as many as it has;
    math.inf: the population's value, what --confidence certifies by default), and, below 0.8, the option that
    makes it high. None for a certified threshold: its line says it already."""
    metric = {"fpor": "precision", "frop": "recall"}.get(report.get("problem") or "")
    split = report.get("splits", {}).get(split_name)
    if metric is None or split is None or "tp" not in split or report.get("confidence") is not None:
        return []
    from dmocli.operating_point.outlook import LOW_OUTLOOK, outlook  # scipy: only where there is a target

    rows = new_rows or split["n"]
    chance = outlook(split, metric, report["target"], rows)
    if chance is None:
        return []
    where = "in the population" if math.isinf(rows) else f"on the next {rows:,} rows"
    line = f"outlook: {metric} >= {report['target']:g} {where} with probability about {chance:.2f}"
    if chance < LOW_OUTLOOK:
        line += f"; below {LOW_OUTLOOK:g}: --confidence 0.95 picks a threshold that holds with probability 0.95"
    return [line]


def offsets_text(point: dict[str, Any]) -> str:
    """A multi-class operating point in one line: its class offsets and the classes left below their floor."""
    offsets = ", ".join(f"{row['class']} {row['offset']:+.3g}" for row in point["per_class"])
    below = f"; below the floor: {', '.join(map(str, point['below_floor']))}" if point["below_floor"] else ""
    return f"class offsets: {offsets}{below}"

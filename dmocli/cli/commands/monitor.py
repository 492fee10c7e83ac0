"""`dmo monitor`: the options MonitorOptions declares (dmocli/command_options.py), one call of
`pipelines.monitor.monitor`, and its summary lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from dmocli.cli.commands.shared import engine_choice
from dmocli.cli.declared import takes_options
from dmocli.cli.output import emit, report_on_refusal
from dmocli.command_options import MonitorOptions


@takes_options(MonitorOptions)
def monitor(
    model: Path = typer.Argument(..., help="Model file (.safetensors) written by dmo train or dmo threshold."),
    data: Path = typer.Argument(
        ..., help="New rows, labels not needed (`-`: a CSV on standard input; --engine dask: parquet)."
    ),
    *,
    options: MonitorOptions = None,  # type: ignore[assignment]  # made from the declaration by takes_options
    report: Optional[Path] = typer.Option(None, "--report", help="Write the JSON report here."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report to stdout."),
) -> None:
    """Estimate a model's operating point on new unlabeled rows: their positive rate, precision and recall at
    the model's threshold, and drift.

    Example: dmo monitor fraud.safetensors march.parquet --gate --chunk-col week
    """
    from dmocli.use.monitor import monitor as run_monitor

    with report_on_refusal(as_json, _monitor_lines):
        result = run_monitor(
            model,
            data,
            gate=options.gate,
            chunk_col=options.chunk_col,
            chunk_size=options.chunk_size,
            confidence=options.confidence,
            report_path=report,
            engine=engine_choice(options),
            allow_train_rows=options.allow_train_rows,
        )
    emit(result, as_json, _monitor_lines(result))


def _monitor_lines(report: dict[str, Any]) -> list[str]:
    """The summary, printed alike whether the gate passed or failed (exit 3): a CI log keeps the figures and every
    reason of a failure."""
    lines = [f"model: {report['model']}  threshold (logit): {report['threshold']:.6g}  rows: {report['rows']}"]
    lines += _monitor_section(report)
    for chunk in report.get("chunks", []):
        rate, shift = chunk["positive_rate"], chunk["label_shift"]
        small = "  (too small to tell: not gated)" if chunk["too_small"] else ""
        lines.append(
            f"  chunk {chunk['chunk']}: rows {chunk['rows']}  rate {rate['estimate']:.4f}  precision "
            f"{shift['precision']:.4f}  recall {shift['recall']:.4f}{small}"
        )
    gate = report["gate"]
    lines.append("gate: passed" if gate["passed"] else f"gate: failed on {len(gate['reasons'])} reason(s):")
    lines += [f"  {reason}" for reason in ([] if gate["passed"] else gate["reasons"])]
    return lines


def _monitor_section(section: dict[str, Any]) -> list[str]:
    rate, shift, covariate = section["positive_rate"], section["label_shift"], section["covariate_shift"]
    low, high = rate["interval"]
    lines = [
        f"positive rate: {rate['estimate']:.4f} [{low:.4f}, {high:.4f}] ({rate['method']}); trained at "
        f"{rate['training']:.4f}; predicted positive {rate['classify_and_count']:.4f}",
        _estimate_line("label shift", shift),
        _estimate_line("covariate shift", covariate),
    ]
    if section["too_small"]:
        lines.insert(
            1,
            f"  too small to say anything: {section['rows']} row(s) cannot tell a positive rate from the training "
            f"rate (at least {rate['rows_needed']} needed); not gated",
        )
    if not section["assumptions"]["agree"]:
        lines.append(f"  {section['assumptions']['note']}")
    if "realized" in section:
        lines.append(_estimate_line(f"realized on {section['realized']['rows']} labels", section["realized"]))
    for drift in section.get("drift", [])[:5]:
        # A PSI is read as drift only beside a change the rows could not give by chance (reports before 1.7: always)
        rows = drift["rows_after"]
        chance = f"within chance at {rows} row{'' if rows == 1 else 's'}"
        reading = drift["severity"] if drift.get("significant", True) else chance
        lines.append(f"  drift {drift['name']}: PSI {drift['psi']:.3f} ({reading}), p {drift['p_value']:.2g}")
    return lines


def _estimate_line(name: str, figures: dict[str, Any]) -> str:
    parts = []
    for metric in ("precision", "recall", "f_beta"):
        value, interval = figures.get(metric), figures.get(f"{metric}_interval")
        if value is None:
            continue
        shown = "" if not interval else f" [{interval[0]:.3f}, {interval[1]:.3f}]"
        parts.append(f"{metric} {value:.4f}{shown}")
    return f"  {name}: " + "  ".join(parts)

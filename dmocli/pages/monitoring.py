"""The monitoring page (`dmo monitor --html`, `dmo report monitor.json...`, `dmo report H.parquet`): a deployed
model's life after training, period by period, from one or more monitor reports (each chunk or period of a report a
period; a report not cut into chunks one period) or from the model's monitoring history (use/history.py).

Per period: the estimated positive rate with its interval against the rate the model was trained at (and the
realized rate where labels arrived), the estimated precision and recall against the target with the realized ones
beside them, a heat map of every feature's drift with the gate's limit, the rows at unseen levels, and the gate's
verdict with every reason. Each figure's numbers are in the table under it.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dmocli.errors import DmoError
from dmocli.pages.document import Figure, Page, Table
from dmocli.pages.drift_heatmap import drift_heatmap
from dmocli.pages.svg import BLUE, BLUISH_GREEN, DARK_GREY, VERMILLION, new_figure
from dmocli.use import history
from dmocli.use.history import reasons_of

ESTIMATE_COLOUR, COVARIATE_COLOUR, REALIZED_COLOUR = BLUE, BLUISH_GREEN, VERMILLION
REFERENCE_COLOUR = TARGET_COLOUR = DARK_GREY
Interval = tuple[float | None, float | None]


@dataclass(frozen=True)
class Period:
    """One period of the page: its estimates (value and interval), realized figures, drift and gate verdict; None
    where the source has no such figure (a history row only `dmo evaluate` wrote has no estimates)."""

    name: str
    rows: int | None = None
    too_small: bool | None = None
    rate: float | None = None
    rate_interval: Interval = (None, None)
    reference_rate: float | None = None
    estimated: Mapping[str, tuple[float | None, Interval]] = field(default_factory=dict)
    covariate: Mapping[str, tuple[float | None, Interval]] = field(default_factory=dict)  # a history keeps none
    covariate_rate: float | None = None  # the rate under covariate shift: the rows' mean calibrated probability
    assumptions_agree: bool | None = None  # whether the label-shift and covariate-shift estimates of the rate agree
    realized_rows: int | None = None
    realized_rate: float | None = None
    realized: Mapping[str, tuple[float | None, Interval]] = field(default_factory=dict)
    psi: Mapping[str, float] | None = None
    past_limit: Sequence[str] = ()
    unseen_rows: Mapping[str, int] = field(default_factory=dict)
    score_psi: float | None = None
    gate_passed: bool | None = None
    reasons: Sequence[str] = ()


@dataclass(frozen=True)
class Monitoring:
    """What the page shows: the model, its problem and training rate, where the periods come from, the periods."""

    model: str
    model_sha256: str | None
    dmo_version: str
    problem: str | None
    target: float | None
    training_rate: float | None
    source: str
    periods: Sequence[Period]
    made: str  # when the input was written: the reports' `written_at`, the history's last row's (never the clock)


def monitoring_input(paths: Sequence[str | Path]) -> Monitoring:
    """What `dmo report` reads for a monitoring page: one history parquet, or monitor report JSONs in time order.
    A file of another kind, a truncated JSON, reports of different model files: one line (DmoError), nothing read
    further."""
    paths = [Path(path) for path in paths]
    if any(path.suffix.lower() == ".parquet" for path in paths):
        if len(paths) != 1:
            raise DmoError("a monitoring history is one .parquet file: give it alone, or monitor reports (.json)")
        return of_history(history.read(paths[0]).to_pylist(), str(paths[0]))
    return of_reports([_monitor_report(path) for path in paths])


def _monitor_report(path: Path) -> Mapping[str, Any]:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DmoError(f"{path} cannot be read ({exc.__class__.__name__}); give a monitor report JSON") from None
    except json.JSONDecodeError as exc:
        raise DmoError(f"{path} is not complete JSON ({exc.msg} at line {exc.lineno}); give the whole report") from None
    command = report.get("command") if isinstance(report, dict) else None
    if command != "monitor":
        what = f"the report of dmo {command}" if command else "not a dmo report"
        raise DmoError(f"{path} is {what}, not of dmo monitor: give monitor reports (--report of dmo monitor)")
    return report


def of_reports(reports: Sequence[Mapping[str, Any]]) -> Monitoring:
    """The periods of monitor reports in the order given: each report's chunks, or the report as one period named by
    its data file. Nothing is taken from where a report was read, so `dmo monitor --html` and `dmo report` on the
    JSON it wrote make the same page."""
    hashes = {report.get("model_sha256") for report in reports} - {None}
    if len(hashes) > 1:
        raise DmoError(
            f"the monitor reports are of {len(hashes)} different model files (model_sha256): give one model's reports"
        )
    periods = []
    for report in reports:
        reasons = report["gate"]["reasons"]
        sections = report.get("chunks") or [{**report, "chunk": None}]
        for section in sections:
            where = "all rows" if section["chunk"] is None else f"chunk {section['chunk']}"
            label = Path(str(report["data"])).name if section["chunk"] is None else str(section["chunk"])
            periods.append(_report_period(section, label, report["reference_rate"]["rate"], reasons_of(reasons, where)))
    first, data = reports[0], [str(report["data"]) for report in reports]
    return Monitoring(
        model=str(first["model"]),
        model_sha256=next(iter(hashes), None),
        dmo_version=str(first["dmocli_version"]),
        problem=first.get("problem"),
        target=first.get("target"),
        training_rate=first.get("training_rate"),
        source=("monitor reports of " if len(reports) > 1 else "monitor report of ") + ", ".join(data),
        made=_reports_written([report.get("written_at") for report in reports]),
        periods=periods,
    )


def _reports_written(written: Sequence[str | None]) -> str:
    """When the reports were written, from their `written_at` (a report of an older dmo has none)."""
    known = sorted(str(value) for value in written if value)
    if not known:
        return "not recorded: the report keeps no date (an older dmo's)"
    if len(written) == 1:
        return f"report written {known[0]}"
    missing = "" if len(known) == len(written) else f"; {len(written) - len(known)} keep no date"
    return f"{len(written)} reports written from {known[0]} to {known[-1]}{missing}"


def _report_period(section: Mapping[str, Any], name: str, reference: float, reasons: list[str]) -> Period:
    rate, shift, covariate = section["positive_rate"], section["label_shift"], section.get("covariate_shift")
    realized, drift_map, assumptions = (
        section.get("realized"),
        section.get("drift_map") or {},
        section.get("assumptions"),
    )
    return Period(
        name=name,
        rows=section["rows"],
        too_small=section["too_small"],
        rate=rate["estimate"],
        rate_interval=tuple(rate["interval"] or (None, None)),
        reference_rate=reference,
        estimated=_estimates(shift),
        covariate={} if covariate is None else _estimates(covariate),
        covariate_rate=_covariate_rate(covariate, section["rows"]),
        assumptions_agree=None if assumptions is None else assumptions["agree"],
        realized_rows=None if realized is None else realized["rows"],
        realized_rate=None if realized is None else realized["positive_rate"],
        realized={} if realized is None else _estimates(realized),
        psi=drift_map.get("psi"),
        past_limit=tuple(drift_map.get("past_limit") or ()),
        unseen_rows=drift_map.get("unseen_rows") or {},
        score_psi=drift_map.get("score_psi"),
        gate_passed=not reasons,
        reasons=tuple(reasons),
    )


METRICS = ("precision", "recall")


def _covariate_rate(covariate: Mapping[str, Any] | None, rows: int) -> float | None:
    """The positive rate the covariate-shift estimate expects: its expected positives (true positives and false
    negatives, each row counted by its calibrated probability) over the rows."""
    return None if covariate is None or not rows else (covariate["tp"] + covariate["fn"]) / rows


def _estimates(found: Mapping[str, Any]) -> dict[str, tuple[float | None, Interval]]:
    """Precision and recall, each with its interval, of a report's estimate or realized figures."""
    return {metric: (found[metric], tuple(found[f"{metric}_interval"] or (None, None))) for metric in METRICS}


def of_history(rows: Sequence[Mapping[str, Any]], path: str) -> Monitoring:
    """The periods of a history's rows, in its order (by how periods were cut, then period)."""
    if not rows:
        raise DmoError(f"the history {path} has no periods; dmo monitor MODEL NEW --history {path} adds them")
    hashes = {row["model_sha256"] for row in rows}
    cuts = len({row["every"] for row in rows})
    return Monitoring(
        model=f"the model file of {path}",
        model_sha256=sorted(hashes)[0] if len(hashes) == 1 else None,
        dmo_version=str(max(row["dmo_version"] for row in rows)),
        problem=None,
        target=None,
        training_rate=None,
        source=f"history {path}",
        made=f"history last written {_utc_seconds(max(row['written_at'] for row in rows))}",
        periods=[_history_period(row, _period_name(row, cuts)) for row in rows],
    )


def _utc_seconds(moment: datetime.datetime) -> str:
    """A history's time of writing as a report's `written_at` reads: UTC, ISO 8601, to the second."""
    return moment.astimezone(datetime.timezone.utc).isoformat(timespec="seconds")


def _period_name(row: Mapping[str, Any], cuts: int) -> str:
    """A period's name, with how periods were cut where the history holds several cuts (`2026-03-02 (week)`)."""
    return str(row["period"]) if cuts == 1 else f"{row['period']} ({row['every']})"


def _history_period(row: Mapping[str, Any], name: str) -> Period:
    def figures(prefix: str) -> dict[str, tuple[float | None, Interval]]:
        return {m: (row[f"{prefix}{m}"], (row[f"{prefix}{m}_low"], row[f"{prefix}{m}_high"])) for m in METRICS}

    reasons = row["gate_reason_list"]
    if reasons is None and row["gate_first_reason"] is not None:  # a row written before the list was kept
        more = row["gate_reasons"] - 1
        reasons = [row["gate_first_reason"]] + ([f"... and {more} more reason(s) not kept"] if more else [])
    return Period(
        name=name,
        rows=row["rows"],
        too_small=row["too_small"],
        rate=row["rate"],
        rate_interval=(row["rate_low"], row["rate_high"]),
        reference_rate=row["reference_rate"],
        estimated=figures("") if row["rate"] is not None else {},
        realized_rows=row["realized_rows"],
        realized_rate=row["realized_rate"],
        realized=figures("realized_") if row["realized_rows"] is not None else {},
        psi=None if row["drift_psi"] is None else dict(row["drift_psi"]),
        past_limit=tuple(row["drift_past_limit"] or ()),
        unseen_rows=dict(row["unseen_rows"] or ()),
        gate_passed=row["gate_passed"],
        reasons=tuple(reasons or ()),
    )


def monitoring_page(monitoring: Monitoring) -> str:
    """The page of the periods, in their order."""
    periods = monitoring.periods
    page = Page(f"Monitoring of {monitoring.model}", kind="monitoring", facts=_facts(monitoring))
    page.section("The gate, period by period", anchor="gate")
    _gate(page, periods)
    page.section("Positive rate", anchor="rate")
    _assumptions(page, periods)
    page.figure(_rate_figure(periods, monitoring))
    page.section("Precision and recall", anchor="metrics")
    for metric in METRICS:
        page.figure(_metric_figure(periods, metric, monitoring))
    page.section("Drift", anchor="drift-section")
    heatmap = drift_heatmap(
        [p.name for p in periods],
        [p.psi for p in periods],
        [p.past_limit for p in periods],
        [p.score_psi for p in periods],
    )
    if heatmap is None:
        page.text("No period has drift figures (the model file keeps no training profile).", css_class="note")
    else:
        page.figure(heatmap)
    _unseen(page, periods)
    return page.html()


def _facts(monitoring: Monitoring) -> dict[str, str]:
    target = "" if monitoring.target is None else f", target {monitoring.target:g}"
    facts = {
        "model file": monitoring.model,
        "model sha256": monitoring.model_sha256 or "not known",
        "from": monitoring.source,
        "made": monitoring.made,
        "periods": str(len(monitoring.periods)),
        "dmo version": monitoring.dmo_version,
    }
    if monitoring.problem is not None:
        facts["operating point"] = f"{monitoring.problem}{target}"
    if monitoring.training_rate is not None:
        facts["training positive rate"] = f"{monitoring.training_rate:.4f}"
    return facts


def _gate(page: Page, periods: Sequence[Period]) -> None:
    judged = [p for p in periods if p.gate_passed is not None]
    failed = [p for p in judged if not p.gate_passed]
    if not judged:
        page.text("No period has a gate verdict (its history rows hold realized figures only).", css_class="note")
    elif failed:
        names = ", ".join(p.name for p in failed[:10]) + (" ..." if len(failed) > 10 else "")
        page.text(f"The gate failed on {len(failed)} of {len(judged)} period(s): {names}.", css_class="missed")
    else:
        page.text(f"The gate passed on every one of the {len(judged)} period(s).", css_class="met")
    rows = [
        [
            p.name,
            p.rows,
            "not gated (too few rows)" if p.too_small else _verdict(p.gate_passed),
            "; ".join(p.reasons) or None,
        ]
        for p in periods
    ]
    page.table(Table("Each period's gate verdict and its reasons", ["period", "rows", "verdict", "reasons"], rows))


def _verdict(passed: bool | None) -> str | None:
    return None if passed is None else "passed" if passed else "failed"


def _values(periods: Sequence[Period], read) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A figure per period, with its interval's low and high ends (NaN where missing)."""
    found = [read(p) for p in periods]
    value = np.asarray([np.nan if f[0] is None else f[0] for f in found], dtype=np.float64)
    low = np.asarray([np.nan if f[1][0] is None else f[1][0] for f in found], dtype=np.float64)
    high = np.asarray([np.nan if f[1][1] is None else f[1][1] for f in found], dtype=np.float64)
    return value, low, high


def _series(ax, x: np.ndarray, values: tuple[np.ndarray, np.ndarray, np.ndarray], **style) -> None:
    value, low, high = values
    shown = ~np.isnan(value)
    if not shown.any():
        return
    err = np.vstack([np.nan_to_num(value - low)[shown], np.nan_to_num(high - value)[shown]])
    ax.errorbar(x[shown], value[shown], yerr=np.maximum(err, 0), capsize=3, **style)


def _axes_periods(ax, periods: Sequence[Period]) -> np.ndarray:
    x = np.arange(len(periods), dtype=np.float64)
    ax.set_xticks(x, [p.name for p in periods], rotation=90 if len(periods) > 6 else 0, fontsize=7)
    ax.set_xlim(-0.6, len(periods) - 0.4)
    ax.set_xlabel("period")
    return x


def _legend_below(fig, ax) -> None:
    """The legend under the figure, outside the axes: inside, it covered the first periods' points."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 2), fontsize=8, frameon=False)


def _rate_figure(periods: Sequence[Period], monitoring: Monitoring) -> Figure:
    fig, ax = new_figure(min(5.0 + 0.18 * len(periods), 14.0), 4.6)
    x = _axes_periods(ax, periods)
    estimate = _values(periods, lambda p: (p.rate, p.rate_interval))
    _series(ax, x - 0.12, estimate, fmt="o-", color=ESTIMATE_COLOUR, label="estimated under label shift (interval)")
    covariate = np.asarray([np.nan if p.covariate_rate is None else p.covariate_rate for p in periods])
    if not np.isnan(covariate).all():
        ax.plot(x, covariate, "^--", color=COVARIATE_COLOUR, label="estimated under covariate shift")
    realized = _values(periods, lambda p: (p.realized_rate, (None, None)))
    if not np.isnan(realized[0]).all():
        ax.plot(x + 0.12, realized[0], "s", color=REALIZED_COLOUR, label="realized (labeled rows)")
    reference = np.asarray([np.nan if p.reference_rate is None else p.reference_rate for p in periods])
    if not np.isnan(reference).all():
        ax.step(x, reference, where="mid", color=REFERENCE_COLOUR, linestyle="--", label="reference (training) rate")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("positive rate (share of rows)")
    ax.set_title("Estimated positive rate against the training rate")
    _legend_below(fig, ax)
    rows = [
        [
            p.name,
            p.rows,
            p.rate,
            *p.rate_interval,
            p.covariate_rate,
            p.assumptions_agree,
            p.reference_rate,
            p.realized_rows,
            p.realized_rate,
        ]
        for p in periods
    ]
    table = Table(
        "Each period's estimated positive rate under label shift with its interval, under covariate shift (the mean "
        "calibrated probability), whether the two assumptions agree, the reference rate, and the realized rate",
        ["period", "rows", "label shift", "low", "high", "covariate shift", "agree", "reference rate", "labeled rows",
         "realized"],
        rows,
    )  # fmt: skip
    alt = f"The estimated positive rate of {len(periods)} period(s) with intervals, under label shift and under "
    alt += "covariate shift, against the reference rate" + (
        "" if monitoring.training_rate is None else f" {monitoring.training_rate:.4f}"
    )
    return Figure.of(fig, anchor="positive-rate", title="Positive rate by period", alt=alt, table=table)


def _assumptions(page: Page, periods: Sequence[Period]) -> None:
    """Whether the label-shift and the covariate-shift estimates agree, in words: where they do not, the data
    contradict at least one assumption and neither estimate should be trusted without labels."""
    judged = [p for p in periods if p.assumptions_agree is not None]
    if not judged:
        return
    apart = [p for p in judged if not p.assumptions_agree]
    words = (
        "Two estimates, two assumptions: under label shift the positive rate moves and the scores of each class stay "
        "as in training (the stored curve); under covariate shift the rows move and the calibrated probabilities "
        f"stay right. They agree on {len(judged) - len(apart)} of {len(judged)} period(s)"
    )
    if not apart:
        page.text(words + ".", css_class="met")
        return
    names = ", ".join(p.name for p in apart[:10]) + (" ..." if len(apart) > 10 else "")
    page.text(
        f"{words}; they disagree on {names}: the data contradict at least one assumption there, so trust neither "
        "estimate of precision or recall without labels.",
        css_class="missed",
    )


def _metric_figure(periods: Sequence[Period], metric: str, monitoring: Monitoring) -> Figure:
    fig, ax = new_figure(min(5.0 + 0.18 * len(periods), 14.0), 4.4)
    x = _axes_periods(ax, periods)
    estimated = _values(periods, lambda p: p.estimated.get(metric, _NONE))
    covariate = _values(periods, lambda p: p.covariate.get(metric, _NONE))
    realized = _values(periods, lambda p: p.realized.get(metric, _NONE))
    _series(ax, x - 0.12, estimated, fmt="o-", color=ESTIMATE_COLOUR, label="estimated under label shift")
    _series(ax, x, covariate, fmt="^--", color=COVARIATE_COLOUR, label="estimated under covariate shift")
    _series(ax, x + 0.12, realized, fmt="s", color=REALIZED_COLOUR, label="realized (labeled rows)")
    constrained = {"fpor": "precision", "frop": "recall"}.get(monitoring.problem or "")
    if constrained == metric and monitoring.target is not None:
        ax.axhline(
            monitoring.target, color=TARGET_COLOUR, linestyle="--", linewidth=1, label=f"target {monitoring.target:g}"
        )
    ax.set_ylim(0, 1.02)
    ax.set_ylabel(metric)
    ax.set_title(f"Estimated and realized {metric} at the model's threshold")
    _legend_below(fig, ax)
    rows = [
        [
            p.name,
            *_flat(p.estimated.get(metric)),
            *_flat(p.covariate.get(metric)),
            p.assumptions_agree,
            *_flat(p.realized.get(metric)),
        ]
        for p in periods
    ]
    table = Table(
        f"Each period's {metric}: estimated under label shift and under covariate shift, whether the two assumptions "
        "agree, and realized on labeled rows, with intervals",
        ["period", "label shift", "low", "high", "covariate shift", "low", "high", "agree", "realized",
         "realized low", "realized high"],
        rows,
    )  # fmt: skip
    alt = f"Estimated {metric} of {len(periods)} period(s) with intervals, under label shift and under covariate "
    alt += "shift, realized beside where labels arrived"
    return Figure.of(fig, anchor=f"{metric}-by-period", title=f"{metric.capitalize()} by period", alt=alt, table=table)


_NONE: tuple[None, Interval] = (None, (None, None))


def _flat(figure: tuple[float | None, Interval] | None) -> list[float | None]:
    return [None, None, None] if figure is None else [figure[0], *figure[1]]


def _unseen(page: Page, periods: Sequence[Period]) -> None:
    columns = sorted({name for p in periods for name in p.unseen_rows})
    if not columns:
        page.text("No period has rows at a level the model never saw.", css_class="note")
        return
    page.table(
        Table(
            "Rows at levels the model never saw, per categorical feature and period",
            ["period", *columns],
            [[p.name, *[p.unseen_rows.get(name, 0) for name in columns]] for p in periods],
        )
    )

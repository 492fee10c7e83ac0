"""A model's monitoring history (`--history H.parquet`): one row a period, built up run after run, so what
`dmo monitor` estimated for a period and what its labels later showed (`dmo monitor` on labeled rows, or
`dmo evaluate`) sit side by side in the same row.

A row is identified by its period (`period`, the first day of an `--every` period, a `--chunk-col` value, or
`all`) and how periods were cut (`every`). `dmo monitor` writes a period's estimates, drift and gate verdict (and,
on labeled rows, its realized metrics); `dmo evaluate` writes its realized metrics only. Each replaces what the same
kind of source wrote for that period before and keeps the rest, so a run repeated gives the same rows and labels
arriving later fill in the row the estimates made. The file is rewritten whole under a temporary name and renamed
(data/outputs.py atomic_path): a failing run leaves the old file. Every row carries the sha256 of the model file it
is about; a history of another model file is refused, since its estimates and a new model's would read as one
series. The columns are documented in docs/monitoring.md#history.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dmocli.data import outputs
from dmocli.errors import DmoError
from dmocli.models.modelfile import DmoModel, file_sha256
from dmocli.prep.periods import MISSING_TIME, Periods
from dmocli.use.results.monitor import MonitorResult, MonitorSection, Realized
from dmocli.version import __version__

SCHEMA_VERSION = 1
WHOLE = "all"  # the period of an unchunked run: all of NEW (or DATA)
MONITOR, EVALUATE = "monitor", "evaluate"
UTC_TIME = pa.timestamp("us", tz="UTC")
# Columns added after schema version 1 was first written: a file without them reads as if they were empty (null),
# and a dmo without them reads a file with them (it selects its own columns). Every feature's drift and every gate
# reason of a period, which a monitoring page draws (dmocli/pages/monitoring.py).
ADDED_COLUMNS = (
    ("drift_psi", pa.map_(pa.string(), pa.float64())),
    ("drift_past_limit", pa.list_(pa.string())),
    ("unseen_rows", pa.map_(pa.string(), pa.int64())),
    ("gate_reason_list", pa.list_(pa.string())),
)
ESTIMATE_COLUMNS = (
    ("rows", pa.int64()),
    ("too_small", pa.bool_()),
    *[(name, pa.float64()) for name in ("rate", "rate_low", "rate_high", "reference_rate")],
    *[(f"{m}{end}", pa.float64()) for m in ("precision", "recall", "f_beta") for end in ("", "_low", "_high")],
    ("top_drift_feature", pa.string()),
    ("top_drift_psi", pa.float64()),
    ("drift_reasons", pa.int64()),
    ("gate_passed", pa.bool_()),
    ("gate_reasons", pa.int64()),
    ("gate_first_reason", pa.string()),
    ("estimated_at", UTC_TIME),
    *ADDED_COLUMNS,
)
# Realized columns added after schema version 1 was first written, read as empty (null) from a file without them:
# the value per row a --problem value model's threshold realized on the period's labeled rows (dmo evaluate).
ADDED_REALIZED_COLUMNS = (("realized_value", pa.float64()),)
REALIZED_COLUMNS = (
    ("realized_rows", pa.int64()),
    ("realized_rate", pa.float64()),
    *[(f"realized_{m}{end}", pa.float64()) for m in ("precision", "recall") for end in ("", "_low", "_high")],
    ("realized_f_beta", pa.float64()),
    ("realized_source", pa.string()),
    ("realized_at", UTC_TIME),
    *ADDED_REALIZED_COLUMNS,
)
IDENTITY_COLUMNS = (
    ("schema_version", pa.int32()),
    ("period", pa.string()),
    ("period_start", pa.date32()),
    ("every", pa.string()),
)
STAMP_COLUMNS = (("model_sha256", pa.string()), ("dmo_version", pa.string()), ("written_at", UTC_TIME))
SCHEMA = pa.schema([*IDENTITY_COLUMNS, *ESTIMATE_COLUMNS, *REALIZED_COLUMNS, *STAMP_COLUMNS])
_OWN = {MONITOR: [name for name, _ in ESTIMATE_COLUMNS], EVALUATE: [name for name, _ in REALIZED_COLUMNS]}


@dataclass(frozen=True)
class Cut:
    """How a run cut its rows into periods: `every` as the history's column writes it (`week`, `7d`, `column
    week` for a --chunk-col's values, `all` for none)."""

    every: str

    @classmethod
    def of(cls, *, every: Any = None, chunk_col: str | None = None) -> "Cut":
        if every is not None:
            return cls(str(every))
        return cls(f"column {chunk_col}" if chunk_col is not None else WHOLE)

    @property
    def periodic(self) -> bool:
        """Cut by --every: each period's name is its first day."""
        return self.every != WHOLE and not self.every.startswith("column ")

    def start(self, period: str) -> datetime.date | None:
        """A period's first day where its name is one (an --every period), else None."""
        return datetime.date.fromisoformat(period) if self.periodic else None


def read(path: str | Path) -> pa.Table:
    """A history file, checked: a parquet table of this module's columns at a schema version this dmo reads. A
    truncated or foreign file is refused in one line rather than overwritten."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise DmoError(
            f"--history {path} is not a readable parquet file ({str(exc).splitlines()[0][:120]}); restore it or give "
            "a new path"
        ) from None
    for name, kind in (*ADDED_COLUMNS, *ADDED_REALIZED_COLUMNS):
        if name not in table.schema.names:
            table = table.append_column(name, pa.nulls(len(table), kind))
    missing = [name for name in SCHEMA.names if name not in table.schema.names]
    if missing:
        raise DmoError(
            f"--history {path} is not a dmo monitoring history (no column {missing[0]}); give a new path for one"
        )
    versions = set(table.column("schema_version").to_pylist())
    if versions - {SCHEMA_VERSION}:
        raise DmoError(
            f"--history {path} has schema version {max(v or 0 for v in versions)}, newer than this dmo reads "
            f"({SCHEMA_VERSION}); upgrade dmo or give a new path"
        )
    try:
        return table.select(SCHEMA.names).cast(SCHEMA)
    except (pa.ArrowException, ValueError):
        raise DmoError(f"--history {path} has columns of the wrong types; restore it or give a new path") from None


def append(path: str | Path, rows: list[dict[str, Any]], *, kind: str, sha256: str) -> int:
    """Write `rows` (one a period, `kind`'s columns filled) into the history at `path`: a period already there
    takes `kind`'s columns from the new row and keeps the others; a new period is added. The rows' model file must be
    the history's. Rewritten atomically; the rows the file holds after."""
    import pyarrow.parquet as pq

    existing = read(path).to_pylist() if Path(path).exists() else []
    _refuse_other_model(path, {row["model_sha256"] for row in existing}, sha256)
    now = datetime.datetime.now(datetime.timezone.utc)
    held = {(row["period"], row["every"]): row for row in existing}
    for row in rows:
        key = (row["period"], row["every"])
        stamped = {**row, f"{'estimated' if kind == MONITOR else 'realized'}_at": now, "written_at": now}
        kept = held.get(key, dict.fromkeys(SCHEMA.names))
        replaced = [name for name in _OWN[kind] if name in stamped]
        if kind == MONITOR and row.get("realized_rows") is not None:
            replaced += _OWN[EVALUATE]  # labeled rows monitored: their realized figures are this run's too
        held[key] = {**kept, **{name: stamped.get(name) for name in replaced}, **_identity(row, sha256, now)}
    ordered = sorted(held.values(), key=lambda row: (row["every"], row["period"] == WHOLE, row["period"]))
    with outputs.atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pylist(ordered, schema=SCHEMA), tmp)
    return len(ordered)


def _identity(row: dict[str, Any], sha256: str, now: datetime.datetime) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "period": row["period"],
        "period_start": row["period_start"],
        "every": row["every"],
        "model_sha256": sha256,
        "dmo_version": __version__,
        "written_at": now,
    }


def record_monitor(path: str | Path, result: MonitorResult, cut: Cut) -> None:
    """`dmo monitor --history`: the run's periods written into the history of the model file the result names by
    its sha256."""
    append(path, monitor_rows(result, cut), kind=MONITOR, sha256=result.model_sha256)


def monitor_rows(result: MonitorResult, cut: Cut) -> list[dict[str, Any]]:
    """The history rows of a monitor result: one a chunk (the MISSING_TIME rows belong to no period and are left
    out), or one for all of NEW when it was not cut; each with its estimates, drift, the gate's verdict on it, the
    rate it was judged against, and where it had labels, the realized figures."""
    reasons, reference = result.gate.reasons, {"reference_rate": result.reference_rate.rate}
    if cut.every == WHOLE:
        return [_monitor_row(result.overall, WHOLE, cut, reasons_of(reasons, "all rows")) | reference]
    return [
        _monitor_row(chunk.section, chunk.chunk, cut, reasons_of(reasons, f"chunk {chunk.chunk}")) | reference
        for chunk in result.chunks or []
        if not (cut.periodic and chunk.chunk == MISSING_TIME)
    ]


def reasons_of(reasons: list[str], where: str) -> list[str]:
    """A section's gate reasons (the report prefixes them `all rows: `, `chunk NAME: `), after the model's own
    (the threshold's, unprefixed), which hold for every section."""
    own = [reason for reason in reasons if not reason.startswith(("all rows: ", "chunk "))]
    return own + [reason[len(where) + 2 :] for reason in reasons if reason.startswith(f"{where}: ")]


def _monitor_row(section: MonitorSection, period: str, cut: Cut, reasons: list[str]) -> dict[str, Any]:
    rate, drift = section.positive_rate, section.drift or []
    low, high = rate.interval or [None, None]
    row = {
        "period": period,
        "period_start": cut.start(period),
        "every": cut.every,
        "rows": section.rows,
        "too_small": section.too_small,
        "rate": rate.estimate,
        "rate_low": low,
        "rate_high": high,
        "top_drift_feature": drift[0].name if drift else None,
        "top_drift_psi": drift[0].psi if drift else None,
        "drift_reasons": len(section.drift_reasons or []),
        "gate_passed": not reasons,
        "gate_reasons": len(reasons),
        "gate_first_reason": reasons[0] if reasons else None,
        "gate_reason_list": reasons,
    }
    if section.drift_map is not None:
        drift_map = section.drift_map
        row |= {
            "drift_psi": list(drift_map.psi.items()),
            "drift_past_limit": drift_map.past_limit,
            "unseen_rows": list(drift_map.unseen_rows.items()),
        }
    for metric in ("precision", "recall", "f_beta"):
        value, (low, high) = section.label_shift.measured(metric)
        row |= {metric: value, f"{metric}_low": low, f"{metric}_high": high}
    return row | (_realized_columns(section.realized, MONITOR) if section.realized else {})


def evaluate_row(period: str, cut: Cut, realized: Realized, *, value: float | None = None) -> dict[str, Any]:
    """One period's history row from `dmo evaluate`: its realized figures alone (and a value model's realized value
    per row, `value`)."""
    return (
        {"period": period, "period_start": cut.start(period), "every": cut.every}
        | _realized_columns(realized, EVALUATE)
        | {"realized_value": value}
    )


def _realized_columns(realized: Realized, source: str) -> dict[str, Any]:
    row = {
        "realized_rows": realized.rows,
        "realized_rate": realized.positive_rate,
        "realized_f_beta": realized.f_beta,
        "realized_source": source,
    }
    for metric in ("precision", "recall"):
        low, high = getattr(realized, f"{metric}_interval") or [None, None]
        row |= {
            f"realized_{metric}": getattr(realized, metric),
            f"realized_{metric}_low": low,
            f"realized_{metric}_high": high,
        }
    return row


def shown(path: str | Path | None, model_path: str | Path) -> dict[str, Any]:
    """`dmo monitor MODEL --history H` without NEW: the history of MODEL's file, its rows in order as JSON-ready
    dicts (`--json` prints this object)."""
    if path is None:
        raise DmoError("dmo monitor needs NEW, the rows to monitor (or --history H.parquet, to print that history)")
    if not Path(path).exists():
        raise DmoError(f"--history {path} does not exist; dmo monitor MODEL NEW --history {path} starts one")
    rows = read(path).to_pylist()
    sha256 = file_sha256(model_path)
    _refuse_other_model(path, {row["model_sha256"] for row in rows}, sha256)
    periods = [{key: _plain(value) for key, value in row.items()} for row in rows]
    return {"history": str(path), "model": str(model_path), "model_sha256": sha256, "periods": periods}


def _refuse_other_model(path: str | Path, found: set[str], sha256: str) -> None:
    """A history is one model file's: its rows under another file's hash are refused, with the fix."""
    others = found - {sha256}
    if others:
        raise DmoError(
            f"--history {path} is the history of another model file (sha256 {sorted(others)[0][:12]}..., this one "
            f"{sha256[:12]}...): give a new history file for this model"
        )


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, (datetime.date, datetime.datetime)) else value


def table_lines(shown_history: dict[str, Any]) -> list[str]:
    """The history `shown` returns as a table: each period's estimated rate and precision (with intervals) beside the
    realized ones, the most drifted feature and the gate's verdict."""
    rows = shown_history["periods"]
    lines = [
        f"{'period':<12} {'rows':>8}  {'rate est [interval]':<24} {'real':>6}  {'precision est [interval]':<24} "
        f"{'real':>6}  {'top drift (PSI)':<24} gate"
    ]
    for row in rows:
        lines.append(
            f"{row['period']:<12} {_count(row['rows']):>8}  {_est(row, 'rate'):<24} {_num(row['realized_rate']):>6}  "
            f"{_est(row, 'precision'):<24} {_num(row['realized_precision']):>6}  {_drift(row):<24} {_gate(row)}"
        )
    return lines


def _count(value: Any) -> str:
    return "-" if value is None else f"{value:,}"


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.4f}"


def _est(row: dict[str, Any], metric: str) -> str:
    if row[metric] is None:
        return "-"
    return f"{row[metric]:.4f} [{_num(row[f'{metric}_low'])}, {_num(row[f'{metric}_high'])}]"


def _drift(row: dict[str, Any]) -> str:
    return "-" if row["top_drift_feature"] is None else f"{row['top_drift_feature']} ({row['top_drift_psi']:.3f})"


def _gate(row: dict[str, Any]) -> str:
    if row["gate_passed"] is None:
        return "-"
    return "passed" if row["gate_passed"] else f"failed: {row['gate_first_reason']}"


def record_evaluate(
    path: str | Path,
    model: DmoModel,
    model_path: Any,
    scored: tuple[np.ndarray, np.ndarray],
    *,
    data: Any,
    time_col: str | None = None,
    every: str | None = None,
    engine: Any = None,
    value: float | None = None,
    sha256: str | None,
) -> None:
    """`dmo evaluate --history`: DATA's realized metrics written into the model's history, as one period `all`
    (from the evaluation's own scores, `scored`: logits and labels; a value model's realized value per row on them,
    `value`, in `realized_value`) or, with --every, per period (one more pass over DATA, cut as monitor cuts NEW:
    use/monitor_read.py; that pass reads no gain column, so a period's `realized_value` stays empty). `sha256` is
    the model file's, as the evaluation's report states it (None only without a model file, refused here)."""
    from dmocli.use.monitor_read import read_sections

    if not isinstance(model_path, (str, Path)) or not Path(model_path).is_file():
        raise DmoError("--history is a model file's history: give MODEL as a .safetensors file")
    if not model.binary or model.class_offsets is not None:
        raise DmoError("--history keeps a binary model's figures; this model is multi-class")
    cut = Cut.of(every=every)
    if every is None:
        rows = [evaluate_row(WHOLE, cut, Realized.at_threshold(model, *scored), value=value)]
    else:
        periods = Periods.of(time_col, every, model.preprocessor.derive)
        read = read_sections(model, data, chunk_col=None, chunk_size=None, engine=engine, periods=periods)
        rows = []
        for chunk in read.chunks:
            logits, labels = np.concatenate(chunk.logits).astype(np.float32), np.concatenate(chunk.labels)
            labeled = labels >= 0
            if chunk.name != MISSING_TIME and labeled.any():
                rows.append(
                    evaluate_row(chunk.name, cut, Realized.at_threshold(model, logits[labeled], labels[labeled]))
                )
    append(path, rows, kind=EVALUATE, sha256=sha256)

"""The options of `dmo monitor` and `dmo subsample`, declared once, as TrainOptions declares `dmo train`'s.

Each field is an `option(...)`: its flags, default, help text and constraint. The CLI builds the command from
the dataclass (dmocli/cli/declared.py) and checks every constraint before the command runs; the Python API
takes the same dataclass, so a default (subsample's `pilot_max_rows`, `batch_rows`) is written in one place.
The declarations live here, below every pipeline, so that `dmo --help` builds them without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from dmocli.constraints import Interval, OneOf
from dmocli.options import AT_LEAST_ONE, CONFIDENCE, SEED, option

ENGINE_HELP = (
    "local (record batches in this process) or dask (partitions on Dask workers, parquet only; needs dmocli[dask])."
)
SCHEDULER_HELP = "Dask scheduler ADDRESS (default: a local cluster of --workers processes)."
WORKERS_HELP = "Worker processes of the local Dask cluster."
SUBSAMPLE_METHODS = ("lus", "uniform", "case-control")  # as solvers/acceptance.py's METHODS


@dataclass
class MonitorOptions:
    """Every option of `dmo monitor` (docs/monitoring.md)."""

    gate: bool = option(
        False,
        "--gate",
        help="Exit 3 when the estimate rules the target out or a feature drifts past the limit (PSI >= 0.25 "
        "and significant).",
    )
    chunk_col: str | None = option(None, "--chunk-col", help="Also per value of this column, in order.")
    chunk_size: int | None = option(
        None, "--chunk-size", constraint=AT_LEAST_ONE, help="Also per this many consecutive rows."
    )
    confidence: float = option(
        0.95, "--confidence", constraint=CONFIDENCE, help="Level of the intervals (default 0.95)."
    )


@dataclass
class SubsampleOptions:
    """Every option of `dmo subsample`; the CLI fills it, Python callers may too."""

    gamma: float | None = option(
        None,
        "--gamma",
        "-g",
        constraint=Interval(float, 1, None, message="must be >= 1 (the subsample keeps at most 1/gamma of the rows)"),
        help="LUS: variance <= gamma x full-data MLE with at most n/gamma rows; baselines keep n/gamma rows.",
    )
    method: str = option(
        "lus",
        "--method",
        constraint=OneOf(SUBSAMPLE_METHODS),
        help="lus, uniform or case-control (equal count per class).",
    )
    pilot_frac: float = option(
        0.1,
        "--pilot-frac",
        constraint=Interval(float, 0, 1, closed="neither"),
        help="Uniform fraction of rows for the pilot model (not drawn again by the acceptance pass).",
    )
    pilot_max_rows: int = option(
        200_000,
        "--pilot-max-rows",
        constraint=Interval(int, 2, None),
        help="Cap on pilot rows, so memory does not grow with the data.",
    )
    pilot_model: str = option(
        "linear",
        "--pilot-model",
        constraint=OneOf(("linear", "mlp")),
        help="Pilot network: linear (multinomial logistic) or mlp.",
    )
    match_size: bool = option(
        False,
        "--match-size",
        help="uniform/case-control: keep as many rows as LUS would (its expected size plus its pilot).",
    )
    keep_pilot: bool = option(
        True,
        "--keep-pilot/--no-keep-pilot",
        help="LUS: also write the pilot's labeled rows, with log_accept 0 for every class (a uniform draw needs "
        "no correction), so training uses every row the pilot read.",
    )
    label_col: str = option("label", "--label-col", help="Name of the label column.")
    drop: tuple[str, ...] = option((), "--drop", help="Column the pilot must ignore (repeatable); it is still copied.")
    embedding_col: str | None = option(None, "--embedding-col", help="List column to use as the feature vector.")
    impute: str = option("none", "--impute", help="none or median (pilot features).")
    engine: str = option("local", "--engine", help=ENGINE_HELP)
    scheduler: str | None = option(None, "--scheduler", help=SCHEDULER_HELP)
    workers: int = option(2, "--workers", constraint=AT_LEAST_ONE, help=WORKERS_HELP)
    batch_rows: int = option(
        65536,
        "--batch-rows",
        constraint=AT_LEAST_ONE,
        help="Rows per record batch (local engine); part of what --seed reproduces.",
    )
    seed: int = option(
        0, "--seed", constraint=SEED, help="Random seed; same data, options and seed give the same subsample."
    )

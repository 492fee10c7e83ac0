"""The options of `dmo threshold`, `evaluate`, `predict`, `monitor`, `subsample` and `extract`, declared once,
as TrainOptions declares `dmo train`'s.

Each field is an `option(...)`: its flags, default, help text and constraint. The CLI builds the command from
the dataclass (dmocli/cli/declared.py) and checks every constraint before the command runs; the Python API
takes the same dataclass, so a default (subsample's `pilot_max_rows`, `batch_rows`, extract's `batch_size`) is
written in one place.
The declarations live here, below every pipeline, so that `dmo --help` builds them without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from dmocli.constraints import Exclusive, Interval, Matches, OneOf, Requires, Rule, When
from dmocli.options import (
    AT_LEAST_ONE,
    CONFIDENCE,
    GAIN_RULES,
    NEW_ROWS,
    NEW_ROWS_NEED_CONFIDENCE,
    REVIEW_BUDGET,
    SEED,
    TARGET,
    alert_budget_option,
    alert_budget_rules,
    option,
    problem_kind,
    read_new_rows,
)

ENGINE_HELP = (
    "local (record batches in this process) or dask (partitions on Dask workers, parquet only; needs dmocli[dask])."
)
SCHEDULER_HELP = "Dask scheduler ADDRESS (default: a local cluster of --workers processes)."
WORKERS_HELP = "Worker processes of the local Dask cluster."
SUBSAMPLE_METHODS = ("lus", "uniform", "case-control")  # dmo subsample --method (solvers/subsampling/acceptance.py)
ENGINES = ("local", "dask")  # --engine; engines/choice.py checks an EngineChoice against these
# What a positive rate admits (`dmo threshold --prior R`): a class that is every row, or none, has no threshold.
RATE = Interval(float, 0, 1, closed="neither", message="must be a positive rate strictly between 0 and 1")
RATE_SOURCES = ("adapt", "prior")  # dmo threshold --adapt NEW | --prior R: the model's own problem at a new rate
# --every: a day, a week from Monday, a calendar month, or N days from 1970-01-01 (prep/periods.py reads it)
EVERY = Matches(
    r"day|week|month|[1-9][0-9]{0,4}d",
    "is not a period: give day, week, month or a number of days such as 7d",
    examples=("week", "day", "month", "7d"),
    refused=("fortnight", "0d", "7"),
)
PERIOD_RULES: tuple[Rule, ...] = (
    Requires(("every",), "time_col", "--every needs --time-col COL, the column whose dates name the periods"),
    Requires(("time_col",), "every", "--time-col needs --every day|week|month|Nd, the length of a period"),
)


def time_col_option() -> Any:
    return option(
        None, "--time-col", metavar="COL", help="Column of dates or timestamps whose periods (--every) split the rows."
    )


def every_option() -> Any:
    return option(
        None,
        "--every",
        metavar="day|week|month|Nd",
        constraint=EVERY,
        help="With --time-col: per period of this length, named by its first day (a week starts on Monday; Nd: N "
        "days counted from 1970-01-01), in time order (docs/monitoring.md#periods).",
    )


def history_option(writes: str) -> Any:
    return option(
        None,
        "--history",
        metavar="H.parquet",
        help=f"Write {writes} into this history of the model, one row a period, replacing that period's earlier "
        "row (docs/monitoring.md#history).",
    )


def engine_option() -> Any:
    """--engine of the commands that map record batches over an engine (evaluate, predict, subsample, threshold,
    monitor)."""
    return option("local", "--engine", constraint=OneOf(ENGINES), help=ENGINE_HELP)


def scheduler_option() -> Any:
    return option(None, "--scheduler", help=SCHEDULER_HELP)


def workers_option() -> Any:
    return option(2, "--workers", constraint=AT_LEAST_ONE, help=WORKERS_HELP)


def strict_option() -> Any:
    """--strict of the commands that score a model on new rows (evaluate, predict)."""
    return option(
        False,
        "--strict",
        help="Refuse drift (exit 2, nothing written): a text column with more than --max-unseen of its rows at "
        "levels training never saw, or a numeric column missing in every row. Without it, drift is a warning.",
    )


def max_unseen_option() -> Any:
    return option(
        None,
        "--max-unseen",
        metavar="FRACTION",
        constraint=Interval(
            float, 0, 1, closed="left", message="is a share of rows: give a number from 0 to below 1 (e.g. 0.01)"
        ),
        help="Share of a column's rows at unseen levels that --strict tolerates (default 0.01; implies --strict).",
    )


@dataclass
class ThresholdOptions:
    """Every option of `dmo threshold` but its outputs (-o, --report, --json)."""

    problem: str | None = option(
        None,
        "--problem",
        "-p",
        constraint=OneOf(("fpor", "frop", "ofbs", "value")),
        help="fpor, frop, ofbs or value (any case). Default: the problem, target and --confidence stored in MODEL.",
    )
    gain: str | None = option(
        None,
        "--gain",
        metavar="CELLS",
        help="With --problem value: what each decision is worth, over the gain columns MODEL's held-out curve keeps "
        "(default: the gain it was trained with), e.g. 'tp=50,fp=-5,fn=-amount,tn=0.02*amount'.",
    )
    target: float | None = option(None, "--target", "-a", constraint=TARGET, help="Target in (0,1) for fpor/frop.")
    beta: float | None = option(
        None,
        "--beta",
        constraint=Interval(
            float,
            0,
            None,
            closed="neither",
            message="must be a positive finite number (1 weighs precision and recall alike)",
        ),
        help="Beta of F-beta (default 1).",
    )
    confidence: float | None = option(
        None, "--confidence", constraint=CONFIDENCE, help="Clopper-Pearson lower bound level (e.g. 0.95)."
    )
    new_rows: int | float | None = option(
        None,
        "--new-rows",
        metavar="N|inf",
        constraint=NEW_ROWS,
        help="With --confidence: the guarantee is about the metric measured on a new sample of this many rows "
        "(default: the sample MODEL's certificate was about, as its info stores it; inf: the population value, "
        "also for a model certified without one).",
    )
    no_confidence: bool | None = option(
        None,
        "--no-confidence",
        help="Drop MODEL's --confidence certificate instead of certifying the new threshold at its confidence (the "
        "default for a certified model); the report and dmo info say it was dropped.",
    )
    max_alert_rate: float | None = alert_budget_option("max_alert_rate")
    max_alerts: int | None = alert_budget_option("max_alerts")
    per_rows: int | None = alert_budget_option("per_rows")
    allow_infeasible: bool = option(False, "--allow-infeasible", help="Keep the closest threshold when unreachable.")
    review_budget: float | None = option(
        None,
        "--review-budget",
        metavar="R",
        constraint=REVIEW_BUDGET,
        help="A review band under the new cut within this share of the rows (fpor/frop; default: MODEL's own "
        "budget, where it has a band).",
    )
    allow_train_rows: bool = option(
        False,
        "--allow-train-rows",
        help="Fit on DATA even when it holds the rows MODEL was trained on (refused by default: optimistic).",
    )
    adapt: Path | None = option(
        None,
        "--adapt",
        metavar="NEW",
        help="Move the threshold for the positive rate estimated on these unlabeled rows (label shift; no DATA).",
    )
    prior: float | None = option(
        None,
        "--prior",
        metavar="R",
        constraint=RATE,
        help="Move the threshold for this known positive rate (label shift; no DATA).",
    )
    engine: str = engine_option()
    scheduler: str | None = scheduler_option()
    workers: int = workers_option()

    # A re-fit takes the problem and certificate MODEL stores where none is given, so --target and --beta need
    # --problem, and --new-rows alone re-sizes the stored certificate (use/apply.py checks it once MODEL is read).
    # --adapt and --prior keep MODEL's problem, re-certify it at MODEL's confidence, and give one rate;
    # --no-confidence drops the certificate instead, so it takes no confidence or sample of its own.
    RULES: ClassVar[tuple[Rule, ...]] = (
        When(
            RATE_SOURCES,
            Requires(
                ("target", "beta"),
                "problem",
                "{given} needs --problem (without it, the problem stored in MODEL is used as it is)",
            ),
            given=False,
        ),
        Exclusive(
            RATE_SOURCES, ("problem",), "--adapt and --prior keep the problem stored in MODEL: leave --problem out"
        ),
        Exclusive(("adapt",), ("prior",), "give --adapt NEW or --prior R, not both"),
        When(RATE_SOURCES, NEW_ROWS_NEED_CONFIDENCE),
        Exclusive(
            ("no_confidence",),
            ("confidence", "new_rows"),
            "--no-confidence drops the certificate: leave out --confidence and --new-rows, which ask for one",
        ),
        *GAIN_RULES,
        *alert_budget_rules(*RATE_SOURCES),
        Exclusive(
            RATE_SOURCES,
            ("max_alert_rate", "max_alerts", "per_rows"),
            "--adapt and --prior keep MODEL's operating point at a new rate: re-target an alert budget without them",
        ),
        Exclusive(
            RATE_SOURCES,
            ("review_budget",),
            "--adapt and --prior move the automatic cut alone: give --review-budget on a re-target, without them",
        ),
    )

    def __post_init__(self) -> None:
        self.problem = problem_kind(self.problem)  # FPOR, as papers write it
        self.new_rows = read_new_rows(self.new_rows)  # the API may spell it as the command line does, or numpy


@dataclass
class EvaluateOptions:
    """Every option of `dmo evaluate` but its outputs (--report, --plot, --json)."""

    strict: bool = strict_option()
    max_unseen: float | None = max_unseen_option()
    gate: bool = option(
        False,
        "--gate",
        help="Exit 3 (with the full report) when DATA shows the model's target missed: its precision (fpor) or "
        "recall (frop) below the target, or a multi-class model's class floor missed. An ofbs model has no "
        "target: nothing is checked, and a warning says so.",
    )
    gate_confidence: float | None = option(
        None,
        "--gate-confidence",
        metavar="C",
        constraint=CONFIDENCE,
        help="Fail the gate only when DATA rules the target out: the metric's one-sided Clopper-Pearson upper "
        "bound at level C (e.g. 0.95) is below it, so a small holdout's chance dip passes (implies --gate).",
    )
    allow_train_rows: bool = option(
        False,
        "--allow-train-rows",
        help="Gate on DATA even when a tenth of it or more is rows MODEL was trained on (refused by default under "
        "--gate: optimistic; a warning names any share from 2 %).",
    )
    engine: str = engine_option()
    scheduler: str | None = scheduler_option()
    workers: int = workers_option()
    time_col: str | None = time_col_option()
    every: str | None = every_option()
    history: Path | None = history_option("the realized metrics of DATA (per --every period, or as one period 'all')")

    RULES: ClassVar[tuple[Rule, ...]] = (
        *PERIOD_RULES,
        When(
            ("time_col",),
            Requires(("every",), "history", "--time-col and --every split DATA for --history H.parquet: give it"),
        ),
    )


@dataclass
class PredictOptions:
    """Every option of `dmo predict` but its outputs (-o, --json)."""

    id_col: str | None = option(None, "--id-col", help="Column to copy into the output to identify rows.")
    csv_escape: bool = option(
        True,
        "--csv-escape/--no-csv-escape",
        help="CSV output: put a ' before text cells starting with = + - @ tab or CR, which spreadsheets would run "
        "as formulas; --no-csv-escape writes them verbatim.",
    )
    explain: int | None = option(
        None,
        "--explain",
        metavar="K",
        constraint=Interval(
            int, 1, None, message="is how many contributions to write per row: give a whole number from 1"
        ),
        help="Also each row's K largest contributions to its logit: explain_<i>_feature and "
        "explain_<i>_contribution (linear: exact; gbdt: XGBoost's pred_contribs; mlp: integrated gradients); "
        "at most the model's column count (a larger K writes every column).",
    )
    strict: bool = strict_option()
    max_unseen: float | None = max_unseen_option()
    decision_names: str | None = option(
        None,
        "--decision-names",
        metavar="POS,REVIEW,NEG",
        help="A model with a review band: the names its decision column writes for the automatic positives, the "
        "review band and the rest (default positive,review,negative).",
    )
    engine: str = engine_option()
    scheduler: str | None = scheduler_option()
    workers: int = workers_option()


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
    time_col: str | None = time_col_option()
    every: str | None = every_option()
    history: Path | None = history_option(
        "the estimates, drift and gate verdict (with labels, the realized metrics beside them)"
    )
    confidence: float = option(
        0.95, "--confidence", constraint=CONFIDENCE, help="Level of the intervals (default 0.95)."
    )
    allow_train_rows: bool = option(
        False,
        "--allow-train-rows",
        help="Gate on NEW even when a tenth of it or more is rows MODEL was trained on (refused by default under "
        "--gate: optimistic; a warning names any share from 2 %).",
    )
    engine: str = engine_option()
    scheduler: str | None = scheduler_option()
    workers: int = workers_option()

    # Sections come from a column's values and runs of rows (within each value, with both), or from periods of a
    # time column alone. A history keeps periods, or a column's values taken as periods, never runs of rows.
    RULES: ClassVar[tuple[Rule, ...]] = (
        *PERIOD_RULES,
        When(
            ("time_col",),
            Exclusive(
                ("every",),
                ("chunk_col", "chunk_size"),
                "--every makes the sections: leave out --chunk-col and --chunk-size",
            ),
        ),
        Exclusive(("history",), ("chunk_size",), "--history keeps one row a period: give --every, not --chunk-size"),
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
    engine: str = engine_option()
    scheduler: str | None = scheduler_option()
    workers: int = workers_option()
    batch_rows: int = option(
        65536,
        "--batch-rows",
        constraint=AT_LEAST_ONE,
        help="Rows per record batch (local engine); part of what --seed reproduces.",
    )
    seed: int = option(
        0, "--seed", constraint=SEED, help="Random seed; same data, options and seed give the same subsample."
    )


@dataclass
class ExtractOptions:
    """Every option of `dmo extract` but its outputs (-o, --report, --json); the CLI fills it, Python callers may
    too. The runner (dmocli/extract/runner.py) checks the declared constraints once the outputs are checked."""

    kind: str = option("auto", "--kind", help="image, text or auto (a table or .txt folder is text).")
    model: str | None = option(
        None,
        "--model",
        help="Local model folder (save_pretrained layout, or a timm "
        "folder) or a hub name already in the local Hugging Face cache; offline only. "
        "Default: facebook/dinov2-small (image), sentence-transformers/all-MiniLM-L6-v2 (text).",
    )
    device: str = option("auto", "--device", help="auto (CUDA if present), cpu or cuda.")
    batch_size: int = option(64, "--batch-size", constraint=AT_LEAST_ONE, help="Items per forward pass.")
    dtype: str = option(
        "auto", "--dtype", help="auto (bf16 for images on CUDA, else fp32), fp32, bf16 or fp16 (autocast)."
    )
    workers: int | None = option(
        None,
        "--workers",
        constraint=Interval(int, 0, None, message="must be 0 (decode in the main process) or more"),
        help="Image decode worker processes (0: in the main process; default: one per core, at most 8).",
    )
    pooling: str = option(
        "auto",
        "--pooling",
        help="cls, mean (text: attention-masked) or auto (the checkpoint's own; else mean for text, cls for images).",
    )
    normalize: bool | None = option(
        None,
        "--normalize/--no-normalize",
        help="L2-normalize the features (default: as a sentence-transformers checkpoint says, else no).",
    )
    views: str | None = option(
        None,
        "--views",
        help="Augmented image views as extra columns, e.g. weak:1,strong:2 -> features_weak_0, features_strong_0, "
        "features_strong_1.",
    )
    seed: int = option(0, "--seed", constraint=SEED, help="Seed of the augmented views.")
    resume: bool = option(
        False,
        "--resume",
        help="Keep the rows already in OUTPUT (or in a killed run's checkpoints) and extract only the rest.",
    )
    checkpoint_every: int = option(
        4096, "--checkpoint-every", constraint=AT_LEAST_ONE, help="Save finished rows for --resume every N items."
    )
    text_col: str = option("text", "--text-col", help="Text column of a table.")
    label_col: str = option(
        "label", "--label-col", help="Label column of a table (missing column: all rows unlabeled). Written as 'label'."
    )
    max_length: int | None = option(
        None,
        "--max-length",
        constraint=Interval(
            int,
            3,
            None,
            message="leaves no room for text beside the tokenizer's special tokens; give at least 3, or leave it out "
            "for the model's limit",
        ),
        help="Truncate texts to this many tokens (default: the model's limit).",
    )


@dataclass
class InfoOptions:
    """Every option of `dmo info` but its output (--json)."""

    features: bool = option(
        False,
        "--features",
        help="Also each column's importance (gbdt: XGBoost total gain; linear, mlp: mean absolute contribution "
        "on rows drawn from the training profile) and a linear model's coefficients.",
    )

"""The options of `dmo train`, declared once, and the checks every option and `--param` value goes through.

`TrainOptions` is the single declaration: each field carries its command-line
flags, help text, allowed choices and numeric range in its metadata. The CLI
builds the `dmo train` command from it (dmocli/cli/train_command.py), the
Python API takes it as is, and `DmoClassifier` takes its constructor parameters
from the fields marked `estimator` (dmocli/estimator.py), so a default or a
range cannot drift between the three. Solver `--param` fields declare their
ranges and choices the same way and go through the same `check_value`, so every
bad value gets a message of one form, before any data is read.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmocli.errors import DmoError

MAX_SEED = 2**63 - 1  # numpy's and torch's generators take seeds in [0, 2^63)

PROBLEM_CHOICES = ("fpor", "frop", "ofbs", "multiclass")
MODEL_CHOICES = ("linear", "mlp", "gbdt")
DEVICE_CHOICES = ("auto", "cpu", "cuda")
IMPUTE_CHOICES = ("none", "median")


def option(default: Any, *flags: str, help: str, estimator: bool = False, **checks: Any) -> Any:
    """A TrainOptions field: its default, its command-line flags (the first is the name used in messages), its
    help text, whether DmoClassifier exposes it, its declared checks (`choices`, `min`, `max`, `below`,
    `positive`) and, where the type does not say how to spell it, its `metavar` in --help. Mutable defaults
    (dicts, tuples of paths) are copied per instance."""
    metadata = {"flags": flags, "help": help, "estimator": estimator, **checks}
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=metadata)
    return field(default=default, metadata=metadata)


def choice_list(choices: Sequence[str]) -> str:
    """`a, b or c`: how messages list the allowed values."""
    return choices[0] if len(choices) == 1 else f"{', '.join(choices[:-1])} or {choices[-1]}"


def check_value(label: str, value: Any, declared: Mapping[str, Any]) -> str | None:
    """The problem with one option or --param value under its declared checks, or None when it has none.

    `label` is how the user wrote it (`--model 'tree'`, `--param lr=0`), so the message names it exactly. A
    value no solver can use (a NaN learning rate, zero rows per batch, an unknown mode) is refused here, by
    name, rather than failing inside torch or training silently on NaN weights.
    """
    if value is None:
        return None
    choices = declared.get("choices")
    if choices is not None:
        return None if value in choices else f"{label} is not known (use {choice_list(choices)})"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{label} must be a finite number"
    if "min" in declared and "below" in declared and not declared["min"] <= value < declared["below"]:
        return f"{label} must be in [{declared['min']:g}, {declared['below']:g})"
    if declared.get("positive") and not value > 0:
        return f"{label} must be positive"
    if "min" in declared and value < declared["min"]:
        return f"{label} must be at least {declared['min']}"
    if "max" in declared and value > declared["max"]:
        return f"{label} must be at most {declared['max']}"
    if "below" in declared and not value < declared["below"]:
        return f"{label} must be below {declared['below']}"
    return None


def problem_kind(value: Any) -> Any:
    """A problem's name in any case (`FPOR`, as papers and the README write it) as the lower-case name the
    choices declare; anything else unchanged, for the choice check to refuse by name."""
    return value.lower() if isinstance(value, str) else value


def refuse(problems: list[str]) -> None:
    """Every problem found, in one error: a user fixes them all before the next run, not one per run."""
    if problems:
        raise DmoError("; ".join(problems))


@dataclass
class TrainOptions:
    """Every option of `dmo train`: the CLI fills it, Python callers may too."""

    problem: str | None = option(
        None,
        "--problem",
        "-p",
        estimator=True,
        choices=PROBLEM_CHOICES,
        help="fpor: max recall s.t. precision >= target; frop: max precision s.t. recall >= target; ofbs: max "
        "F-beta; multiclass: K-class training (default: ofbs for binary labels, multiclass otherwise)",
    )
    target: float | None = option(
        None, "--target", "-a", estimator=True, help="Target in (0,1) for the constrained metric (fpor/frop)."
    )
    beta: float = option(
        1.0, "--beta", estimator=True, positive=True, help="Beta of F-beta (ofbs, and F-beta in reports)."
    )
    class_target: dict[str, str] = option(
        {},
        "--class-target",
        metavar="CLASS=A",
        help="Multi-class fpor/frop: class CLASS's own floor A, over --target's (repeatable; a class given neither is "
        "unconstrained).",
    )
    focus: str | None = option(
        None,
        "--focus",
        metavar="CLASS",
        help="Multi-class fpor/frop/ofbs: the constraint (or F-beta) of class CLASS alone; the other classes are "
        "decided by the arg-max among themselves.",
    )
    solver: str = option("wce", "--solver", "-s", estimator=True, help="Training method; `dmo solvers` lists them.")
    model: str = option(
        "linear",
        "--model",
        "-m",
        estimator=True,
        choices=MODEL_CHOICES,
        help="linear, mlp, or gbdt (gradient-boosted trees: pip install 'dmocli[gbdt]'; missing values allowed).",
    )
    width: int = option(100, "--width", estimator=True, min=1, help="MLP hidden width.")
    depth: int = option(2, "--depth", estimator=True, min=1, help="MLP hidden layers.")
    val: str | Path | None = option(
        None,
        "--val",
        help="Validation table: the threshold (and, where the solver uses one, early stopping or "
        "iterate selection) is fitted on it.",
    )
    val_frac: float = option(
        0.0,
        "--val-frac",
        estimator=True,
        min=0.0,
        below=1.0,
        help="Hold out this stratified fraction of DATA as validation instead of --val.",
    )
    label_col: str = option("label", "--label-col", help="Name of the label column.")
    positive: str | None = option(
        None, "--positive", estimator=True, help="Positive class value (default: minority class of a two-class label)."
    )
    drop: tuple[str, ...] = option((), "--drop", help="Column to ignore (repeatable), e.g. an id column.")
    embedding_col: str | None = option(None, "--embedding-col", help="List column to use as the feature vector.")
    impute: str = option(
        "none",
        "--impute",
        estimator=True,
        choices=IMPUTE_CHOICES,
        help="none: refuse NaN/inf features; median: fill with training medians.",
    )
    fold_case: bool = option(
        False,
        "--fold-case",
        estimator=True,
        help="Match text levels whatever their case and surrounding spaces (Grocery, grocery and ' GROCERY ' are "
        "one level), in training and, stored in the model, in predict and evaluate.",
    )
    dates: str = option(
        "refuse",
        "--dates",
        estimator=True,
        choices=("refuse", "parts"),
        help="refuse: a date or timestamp column is a problem to fix; parts: turn each into numeric features (year, "
        "month, day, weekday, hour and minute when it holds times, days since the earliest training date), stored "
        "in the model and applied by evaluate and predict (docs/data.md, Dates).",
    )
    parse_numbers: bool = option(
        False,
        "--parse-numbers",
        estimator=True,
        help="Read text columns of numbers written for people ($1,234.50, 1.234,50 EUR, 12%, (300)) as numbers, "
        "the decimal mark decided per column; stored in the model and applied by evaluate and predict.",
    )
    device: str = option(
        "auto", "--device", estimator=True, choices=DEVICE_CHOICES, help="auto (CUDA if present), cpu or cuda."
    )
    seed: int = option(
        0,
        "--seed",
        estimator=True,
        min=0,
        max=MAX_SEED,
        help="Random seed; same data, options and seed give the same model.",
    )
    params: dict[str, str] = option(
        {}, "--param", estimator=True, help="Solver hyper-parameter KEY=VALUE (repeatable; see `dmo solvers`)."
    )
    gamma: float | None = option(
        None,
        "--gamma",
        help="--solver lus: pilot, subsample (variance <= gamma x full-data MLE) and fit in one command.",
    )
    folding: int | None = option(
        None,
        "--folding",
        min=2,
        help="--solver ero without --val: hold out one of K stratified folds of DATA to select the iterate (same "
        "as --param folding=K; pick the fold with --param fold=k).",
    )
    cv: int | str | None = option(
        None,
        "--cv",
        estimator=True,
        min=0,
        metavar="K|auto",
        help="Fit the threshold on out-of-fold scores of K stratified folds of DATA (with --val, its rows are "
        "pooled in), then save the K fold models averaged, or see --cv-transfer (default: 5 without "
        "--val/--val-frac; 0: fit the threshold on the training rows, which is optimistic). auto: 5 folds when a "
        "held-out fifth of DATA (or --val) would hold too few positives for a precise threshold, else that one "
        "held-out split (docs/training.md#cv-auto).",
    )
    cv_transfer: str = option(
        "ensemble",
        "--cv-transfer",
        estimator=True,
        choices=("ensemble", "apply", "rank"),
        help="What --cv saves: the K fold models averaged (a binary model's calibrated probabilities), at the "
        "out-of-fold threshold (ensemble), or a model trained on all rows at that threshold (apply) or keeping the "
        "share of rows it predicts positive (rank).",
    )
    confidence: float | None = option(
        None,
        "--confidence",
        estimator=True,
        min=0.5,
        below=1.0,
        help="Require a one-sided Clopper-Pearson lower bound of the constrained metric to reach the target at "
        "this level (e.g. 0.95).",
    )
    new_rows: int | float | None = option(
        None,
        "--new-rows",
        estimator=True,
        metavar="N|inf",
        help="With --confidence: the guarantee is about the metric measured on a new sample of this many rows (a "
        "test split, a day of traffic). Default: as many rows as the held-out split the threshold is fitted on "
        "(one fold with --cv, else the validation split, else the training rows it is fitted on); inf: the "
        "population value (docs/operating-points.md).",
    )
    adjust: bool | None = option(
        None,
        "--adjust/--no-adjust",
        estimator=True,
        help="Exact threshold adjustment after training (off: keep the solver's own threshold). Default: on, "
        "except for the streaming solvers fofo/ofo/lr, which keep their learned threshold.",
    )
    allow_infeasible: bool = option(
        False,
        "--allow-infeasible",
        estimator=True,
        help="Save the closest threshold when the target is unreachable (exit 0 instead of 3).",
    )
    drop_unlabeled: bool = option(
        False, "--drop-unlabeled", help="Ignore rows with a missing label (for solvers that cannot use them)."
    )
    unlabeled_truth: str | Path | None = option(
        None,
        "--unlabeled-truth",
        help="Table with the true labels of DATA's unlabeled rows (same label column; one row per unlabeled row, "
        "in order, or one per row of DATA); the report adds pseudo-label precision/recall (adsh, fixmatch).",
    )
    epochs: int | None = option(
        None,
        "--epochs",
        estimator=True,
        min=1,
        help="Passes over the data for the streaming solvers fofo/ofo/lr (default 1).",
    )
    plot: str | Path | None = option(None, "--plot", help="Streaming solvers: draw online F vs rows seen to this PNG.")
    engine: str = option(
        "local",
        "--engine",
        choices=("local", "dask"),
        help="local, or dask: --model gbdt --solver wce trains on Dask workers through XGBoost's Dask interface, "
        "each worker reading its parquet files (needs dmocli[dask,gbdt]).",
    )
    scheduler: str | None = option(
        None, "--scheduler", help="Dask scheduler ADDRESS for --engine dask (default: a local cluster of --workers)."
    )
    workers: int = option(2, "--workers", min=1, help="Worker processes of the local Dask cluster (--engine dask).")

    def __post_init__(self) -> None:
        self.problem = problem_kind(self.problem)
        self.new_rows = read_new_rows(self.new_rows)  # the API may spell it as the command line does, or numpy
        self.cv = read_cv(self.cv)  # a number of folds or auto, as the command line spells it (typer gives text)

    def problems(self) -> list[str]:
        """What breaks a declared choice or range: every such option, checked before any data is read."""
        problems = []
        for spec in dataclasses.fields(self):
            if spec.name == "new_rows":  # a count of rows or inf: new_rows_problem below
                continue
            if spec.name == "cv" and not isinstance(self.cv, int) and self.cv not in (None, CV_AUTO):
                problems.append(f"--cv {self.cv!r} must be a number of folds K >= 2, 0 for none, or auto")
                continue
            value = getattr(self, spec.name)
            problem = check_value(f"{flag_of(spec)} {value!r}", value, spec.metadata)
            if problem is not None:
                problems.append(problem)
        problem = new_rows_problem(self.new_rows, self.confidence)
        if problem is not None:
            problems.append(problem)
        problem = None if self.target is None else target_problem(self.target)
        if problem is not None:
            problems.append(problem)
        return problems


def target_problem(target: Any) -> str | None:
    """What is wrong with a given --target, or None: fpor/frop need a rate strictly between 0 and 1 (the range
    check_value cannot declare, its bounds being open)."""
    if isinstance(target, numbers.Real) and not isinstance(target, bool) and 0.0 < target < 1.0:
        return None
    return f"--target {target} is outside (0, 1); give a value such as 0.8"


def flag_of(spec: dataclasses.Field) -> str:
    """The long flag of a TrainOptions field, as messages name it (`--adjust`, not `--adjust/--no-adjust`)."""
    return spec.metadata["flags"][0].split("/")[0]


def estimator_fields() -> list[dataclasses.Field]:
    """The TrainOptions fields DmoClassifier takes as constructor parameters, in declaration order."""
    return [spec for spec in dataclasses.fields(TrainOptions) if spec.metadata["estimator"]]


def _declared(name: str) -> Mapping[str, Any]:
    """The declared checks of one TrainOptions field, for commands that take the same option without it."""
    return next(spec.metadata for spec in dataclasses.fields(TrainOptions) if spec.name == name)


def check_seed(seed: int) -> None:
    """The seed check of the commands that have no TrainOptions (subsample, extract)."""
    refuse([problem for problem in [check_value(f"--seed {seed}", seed, _declared("seed"))] if problem])


CV_AUTO = "auto"  # --cv auto: folds or one held-out split by the count of positives (pipelines/cv_auto.py)


def read_cv(value: Any) -> Any:
    """--cv as the command line spells it (`5`, `auto`) and a numpy integer as the int it is; anything else is
    kept as given, for `TrainOptions.problems` to name."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if not isinstance(value, str):
        return value
    spelled = value.strip().lower()
    if spelled == CV_AUTO:
        return CV_AUTO
    if spelled.isascii() and spelled.lstrip("-").isdigit():
        return int(spelled)
    return value


NEW_ROWS_WITHOUT_CONFIDENCE = "--new-rows says which sample --confidence is about: give --confidence C with it"
POPULATION = math.inf  # --new-rows inf: the certificate is about the population value, not a finite sample's
MAX_NEW_ROWS = 10**9  # beyond it the test over every count of the new sample takes minutes (docs/operating-points.md)


def read_new_rows(text: Any) -> Any:
    """--new-rows as the command line spells it (a whole number of rows, or `inf` for the population value) and
    a numpy integer as the int it is; anything else is kept as given, for `new_rows_problem` to name."""
    if isinstance(text, numbers.Integral) and not isinstance(text, bool):
        return int(text)
    if not isinstance(text, str):
        return text
    spelled = text.strip().lower()
    if spelled in ("inf", "infinity"):
        return POPULATION
    if spelled.isascii() and spelled.isdigit():
        return int(spelled)
    try:  # 1e6 and 2.5e4 are whole numbers too (and 1e18 is then named for being over the cap, not for its spelling)
        value = float(spelled)
    except ValueError:
        return text
    return int(value) if math.isfinite(value) and value.is_integer() else value


def new_rows_format_problem(new_rows: Any) -> str | None:
    """What is wrong with the value of --new-rows, or None: it counts rows (at least one) unless it is inf."""
    if new_rows is None or new_rows == POPULATION:
        return None
    if isinstance(new_rows, bool) or not isinstance(new_rows, (int, float)) or not float(new_rows).is_integer():
        return f"--new-rows {new_rows!r} must be a whole number of rows (e.g. 2000) or inf (the population value)"
    if new_rows < 1:
        return f"--new-rows {new_rows!r} must be at least 1 (or inf for the population value)"
    if new_rows > MAX_NEW_ROWS:
        return (
            f"--new-rows {new_rows!r} is more than {MAX_NEW_ROWS:,} rows, the most the new-sample test is run for "
            "(its time grows with the count); give at most that, or inf for the population value"
        )
    return None


def new_rows_problem(new_rows: Any, confidence: float | None) -> str | None:
    """What is wrong with --new-rows, or None: it names the sample a --confidence guarantee is about, so it
    means nothing without one, and its value must count rows or be inf."""
    if new_rows is not None and confidence is None:
        return NEW_ROWS_WITHOUT_CONFIDENCE
    return new_rows_format_problem(read_new_rows(new_rows))


def check_new_rows(new_rows: Any, confidence: float | None) -> None:
    """The --new-rows check of `dmo threshold`, which has no TrainOptions."""
    problem = new_rows_problem(new_rows, confidence)
    if problem is not None:
        raise DmoError(problem)


def check_confidence(confidence: float | None) -> None:
    """The level of the one-sided Clopper-Pearson bound: below 0.5 it would loosen the target, not guard it."""
    problem = check_value(f"--confidence {confidence}", confidence, _declared("confidence"))
    if problem is not None:
        raise DmoError(f"{problem}, e.g. 0.95")

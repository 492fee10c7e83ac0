"""The options of `dmo train`, declared once, and the checks every option and `--param` value goes through.

`TrainOptions` is the single declaration: each field carries its command-line flags, help text and the
constraint its values meet (dmocli/constraints.py) in its metadata. The CLI builds the `dmo train` command from
it (dmocli/cli/declared.py), the Python API takes it as is, and `DmoClassifier` takes its constructor parameters
from the fields marked `estimator` (dmocli/estimator.py), so a default or a range cannot drift between the three.
Solver `--param` fields declare their ranges and choices with flat keys, which `check_value` turns into the same
constraint objects, so every bad value gets a message of one form, from one validator (`constraints.failure`),
before any data is read. A rule between options (`--new-rows` needs `--confidence`) is an object too, listed once
in the declaration's `RULES`, and `option_errors` checks it with the constraints, for the CLI and the Python API
alike. The other commands are declared the same way in dmocli/command_options.py.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from dmocli.constraints import (
    AllOf,
    AnyOf,
    Chosen,
    Constraint,
    Except,
    Exclusive,
    Given,
    Interval,
    OneOf,
    Requires,
    Rule,
    When,
    failure,
    from_flat_keys,
)
from dmocli.constraints import choice_list as choice_list  # messages elsewhere list choices as the validator does
from dmocli.errors import DmoError

MAX_SEED = 2**63 - 1  # numpy's and torch's generators take seeds in [0, 2^63)

PROBLEM_CHOICES = ("fpor", "frop", "ofbs", "value", "multiclass")
MODEL_CHOICES = ("linear", "mlp", "gbdt")  # the kinds a model file holds (architecture.kind)
MODEL_AUTO = "auto"  # --model auto: not a kind but a choice between AUTO_CANDIDATES (pipelines/model_choice.py)
AUTO_CANDIDATES = ("linear", "gbdt")  # in order of simplicity: a tie goes to the first
DEVICE_CHOICES = ("auto", "cpu", "cuda")
IMPUTE_CHOICES = ("none", "median")
NEW_ROWS_WITHOUT_CONFIDENCE = "--new-rows says which sample --confidence is about: give --confidence C with it"
# The rule behind that message, declared once: TrainOptions lists it, ThresholdOptions under --adapt/--prior, and
# check_new_rows applies it where a confidence comes from a model file.
NEW_ROWS_NEED_CONFIDENCE = Requires(("new_rows",), "confidence", NEW_ROWS_WITHOUT_CONFIDENCE)
# --problem value weighs each row by --gain (operating_point/gain.py), which no other problem takes: train's and
# threshold's declarations list both rules.
GAIN_RULES = (
    Chosen(
        "problem",
        ("value",),
        Requires(
            ("problem",),
            "gain",
            "--problem value needs --gain, what each decision is worth: e.g. --gain 'tp=50,fp=-5,fn=-amount,tn=0'",
        ),
    ),
    Chosen(
        "problem",
        ("value",),
        Given(("gain",), "--gain weighs the decisions of --problem value: give --problem value, or leave --gain out"),
        chosen=False,
    ),
)


MAX_NEW_ROWS = 10**9  # beyond it the test over every count of the new sample takes minutes (docs/operating-points.md)
POPULATION = math.inf  # --new-rows inf: the certificate is about the population value, not a finite sample's
CV_AUTO = "auto"  # --cv auto: folds or one held-out split by the count of positives (pipelines/cv_auto.py)

# The constraints the declarations share (dmocli/constraints.py says how each refuses).
AT_LEAST_ONE = Interval(int, 1, None)
POSITIVE = Interval(float, 0, None, closed="neither")
SEED = Interval(int, 0, MAX_SEED)
TARGET = Interval(float, 0, 1, closed="neither", message="is outside (0, 1); give a value such as 0.8")
# --review-budget (train and threshold): the share of rows a review band may send to people (review_band.py).
REVIEW_BUDGET = Interval(
    float, 0, 1, closed="neither", message="is a share of rows: give a number strictly between 0 and 1 (e.g. 0.05)"
)
REVIEW_BUDGET_NEEDS_TARGET = Requires(
    ("review_budget",),
    "target",
    "--review-budget sets a review band under an automatic cut that meets a target: give --problem fpor --target A "
    "(or frop)",
)
# Every confidence level (train's and threshold's certificate, evaluate's gate, monitor's intervals): below 0.5 a
# lower bound would loosen the target, an upper bound fail models that meet it, an interval hold less than half.
CONFIDENCE = Interval(float, 0.5, 1, closed="left", message="must be in [0.5, 1), e.g. 0.95")
CV = AnyOf(
    (
        AllOf(
            (
                Interval(int, 0, None),
                Except((1,), why="leaves no fold to hold out; give --cv K with K >= 2 (or --cv 0 for none)"),
            )
        ),
        OneOf((CV_AUTO,)),
    ),
    description="a number of folds K >= 2, 0 for none, or auto",
)
NEW_ROWS = AnyOf(
    (
        AllOf(
            (
                Interval(int, 1, None, message="must be at least 1 (or inf for the population value)"),
                Interval(
                    int,
                    None,
                    MAX_NEW_ROWS,
                    message=f"is more than {MAX_NEW_ROWS:,} rows, the most the new-sample test is run for (its time "
                    "grows with the count); give at most that, or inf for the population value",
                ),
            )
        ),
        OneOf((POPULATION,)),
    ),
    description="a whole number of rows (e.g. 2000) or inf (the population value)",
)


def option(
    default: Any,
    *flags: str,
    help: str,
    estimator: bool = False,
    constraint: Constraint | None = None,
    metavar: str | None = None,
) -> Any:
    """A declared option: its default, its command-line flags (the first is the name used in messages), its
    help text, whether DmoClassifier exposes it, the `constraint` its values must meet and, where the type does
    not say how to spell it, its `metavar` in --help. Mutable defaults (dicts) are copied per instance."""
    metadata = {"flags": flags, "help": help, "estimator": estimator, "constraint": constraint, "metavar": metavar}
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=metadata)
    return field(default=default, metadata=metadata)


# The alert budget of train and threshold (operating_point/alert_budget.py): a share of rows, or N alerts per M rows.
def alert_budget_rules(*excluding: str) -> tuple[Rule, ...]:
    """A rate or N alerts per M rows, not both; N and M together. `excluding`: options that refuse a budget (a
    command's own rule says so), beside which N and M are not asked for each other, so each combination breaks
    one rule and gets one line."""
    alone = ("max_alert_rate", *excluding)
    return (
        Exclusive(
            ("max_alert_rate",),
            ("max_alerts", "per_rows"),
            "give --max-alert-rate R or --max-alerts N --per-rows M, not both (a rate's period is --new-rows M)",
        ),
        When(
            alone,
            Requires(("max_alerts",), "per_rows", "--max-alerts N counts a period's alerts: give --per-rows M"),
            given=False,
        ),
        When(
            alone,
            Requires(("per_rows",), "max_alerts", "--per-rows M is the period of --max-alerts N: give both"),
            given=False,
        ),
    )


ALERT_RATE = Interval(float, 0, 1, closed="right", message="is a share of rows: give one in (0, 1], e.g. 0.02")
ALERT_BUDGET_HELP = {
    "max_alert_rate": "Alert budget: flag at most this share of rows (alone: the most recall within it; beside "
    "--problem: the best cut within both; with --confidence, certified for --new-rows or the population).",
    "max_alerts": "Alert budget: at most N alerts per --per-rows M rows (with --confidence: certified for the next M).",
    "per_rows": "The period of --max-alerts N, in rows.",
}


def alert_budget_option(name: str, *, estimator: bool = False) -> Any:
    """--max-alert-rate R, --max-alerts N or --per-rows M, declared once for train and threshold (`estimator`:
    train's, a DmoClassifier parameter too)."""
    flag, metavar = "--" + name.replace("_", "-"), {"max_alert_rate": "R", "max_alerts": "N", "per_rows": "M"}[name]
    constraint = ALERT_RATE if name == "max_alert_rate" else AT_LEAST_ONE
    return option(None, flag, metavar=metavar, estimator=estimator, constraint=constraint, help=ALERT_BUDGET_HELP[name])


def check_value(label: str, value: Any, declared: Mapping[str, Any]) -> str | None:
    """The problem with one option or --param value under its declared constraint (or the flat `choices`/`min`/
    `max`/`below`/`positive` keys solver parameters declare), or None.

    `label` is how the user wrote it (`--model 'tree'`, `--param lr=0`), so the message names it exactly. A
    value no solver can use (a NaN learning rate, zero rows per batch, an unknown mode) is refused here, by
    name, rather than failing inside torch or training silently on NaN weights.
    """
    return failure(label, value, from_flat_keys(declared))


def option_errors(options: Any) -> list[str]:
    """What breaks a declared constraint or rule in a filled declaration (TrainOptions, or another command's):
    every such option, then every rule of its `RULES` broken, checked before any data is read."""
    errors = []
    specs = {spec.name: spec for spec in dataclasses.fields(options)}
    for spec in specs.values():
        value = getattr(options, spec.name)
        reason = failure("", value, spec.metadata.get("constraint"))  # " must be ...": the label once refused,
        if reason is not None:  # as a value's repr may be a whole table's (`adapt_to_rate(new_data=frame)`)
            errors.append(f"{flag_of(spec)} {value!r}{reason}")
    values = {name: getattr(options, name) for name in specs}
    for rule in getattr(options, "RULES", ()):
        if rule.broken(values):
            errors.append(rule.reason(values, lambda name: flag_of(specs[name])))
    return errors


def check_given(declaration: type, **given: Any) -> None:
    """Refuse what a library function was given as keywords named after `declaration`'s fields (its command's
    options; the others keep their defaults, which break nothing): the same constraints, rules and messages as
    the command line, with no second copy of any."""
    refuse(option_errors(declaration(**given)))


def example_value(declaration: type, name: str) -> Any:
    """A value the option `name` of `declaration` admits, for the combinations a rule generates (Rule.failing):
    its constraint's example, or for an option with none (a path, a name) the metavar or name it is shown with."""
    (spec,) = [spec for spec in dataclasses.fields(declaration) if spec.name == name]
    constraint = spec.metadata.get("constraint")
    return constraint.example() if constraint is not None else spec.metadata.get("metavar") or name


def failing_combinations(declaration: type) -> list[tuple[Rule, dict[str, Any]]]:
    """Every combination of options that breaks one of `declaration`'s rules, each with that rule: what
    tests/cli/test_option_constraints.py runs through each command, as `invalid_values` gives single values."""
    return [
        (rule, combination)
        for rule in getattr(declaration, "RULES", ())
        for combination in rule.failing(lambda name: example_value(declaration, name))
    ]


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
        constraint=OneOf(PROBLEM_CHOICES),
        help="fpor: max recall s.t. precision >= target; frop: max precision s.t. recall >= target; ofbs: max "
        "F-beta; value: max the expected value of --gain (binary labels); multiclass: K-class training (default: "
        "ofbs for binary labels, multiclass otherwise)",
    )
    gain: str | None = option(
        None,
        "--gain",
        metavar="CELLS",
        estimator=True,
        help="With --problem value: what each decision is worth, e.g. 'tp=50,fp=-5,fn=-amount,tn=0.02*amount'; each "
        "cell a number, a column, -column (a loss: the column must not be negative) or number*column; a cell left "
        "out is 0 (docs/operating-points.md#value).",
    )
    target: float | None = option(
        None,
        "--target",
        "-a",
        estimator=True,
        constraint=TARGET,
        help="Target in (0,1) for the constrained metric (fpor/frop).",
    )
    beta: float = option(
        1.0, "--beta", estimator=True, constraint=POSITIVE, help="Beta of F-beta (ofbs, and F-beta in reports)."
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
        constraint=OneOf((*MODEL_CHOICES, MODEL_AUTO)),
        help="linear, mlp, or gbdt (gradient-boosted trees: pip install 'dmocli[gbdt]'; missing values allowed); "
        "auto: train linear and gbdt on the same folds and keep the one with the better out-of-fold objective "
        "(docs/gbdt.md).",
    )
    width: int = option(100, "--width", estimator=True, constraint=AT_LEAST_ONE, help="MLP hidden width.")
    depth: int = option(2, "--depth", estimator=True, constraint=AT_LEAST_ONE, help="MLP hidden layers.")
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
        constraint=Interval(float, 0, 1, closed="left"),
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
        constraint=OneOf(IMPUTE_CHOICES),
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
        constraint=OneOf(("refuse", "parts", "parts,trend")),
        help="refuse: a date or timestamp column is a problem to fix; parts: turn each into the numeric features "
        "that recur (month, day, weekday; hour and minute when it holds times); parts,trend: also year and days "
        "since the earliest training date, which no later period matches. A part the same in every training row "
        "is dropped with a warning. Stored in the model and applied by evaluate and predict (docs/data.md, Dates).",
    )
    parse_numbers: bool = option(
        False,
        "--parse-numbers",
        estimator=True,
        help="Read text columns of numbers written for people ($1,234.50, 1.234,50 EUR, 12%, (300)) as numbers, "
        "the decimal mark decided per column; stored in the model and applied by evaluate and predict.",
    )
    device: str = option(
        "auto",
        "--device",
        estimator=True,
        constraint=OneOf(DEVICE_CHOICES),
        help="auto (CUDA if present), cpu or cuda.",
    )
    seed: int = option(
        0,
        "--seed",
        estimator=True,
        constraint=SEED,
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
        constraint=Interval(int, 2, None),
        help="--solver ero without --val: hold out one of K stratified folds of DATA to select the iterate (same "
        "as --param folding=K; pick the fold with --param fold=k).",
    )
    cv: int | str | None = option(
        None,
        "--cv",
        estimator=True,
        constraint=CV,
        metavar="K|auto",
        help="Fit the threshold on out-of-fold scores of K stratified folds of DATA (with --val, its rows are "
        "pooled in), then save the K fold models averaged, or see --cv-transfer (default: 5 without "
        "--val/--val-frac; 0: fit the threshold on the training rows, which is optimistic). auto: 5 folds when a "
        "held-out fifth of DATA (or --val) would hold too few positives for a precise threshold, else that one "
        "held-out split (docs/training.md#cv-auto).",
    )
    time_col: str | None = option(
        None,
        "--time-col",
        estimator=True,
        metavar="COL",
        help="Rows are a sequence in time ordered by COL (a date or timestamp in any form --dates reads, or a number): "
        "the threshold is fitted on out-of-time scores, each of K later blocks scored by a model trained on the "
        "blocks before it (--cv K, default 5), or on --val, which must follow DATA's period; the model saved is one "
        "trained on every row. COL is not a feature (docs/training.md#time-col).",
    )
    cv_transfer: str = option(
        "ensemble",
        "--cv-transfer",
        estimator=True,
        constraint=OneOf(("ensemble", "apply", "rank")),
        help="What --cv saves: the K fold models averaged (a binary model's calibrated probabilities), at the "
        "out-of-fold threshold (ensemble), or a model trained on all rows at that threshold (apply) or keeping the "
        "share of rows it predicts positive (rank).",
    )
    confidence: float | None = option(
        None,
        "--confidence",
        estimator=True,
        constraint=CONFIDENCE,
        help="Require a one-sided Clopper-Pearson lower bound of the constrained metric to reach the target at "
        "this level (e.g. 0.95).",
    )
    new_rows: int | float | None = option(
        None,
        "--new-rows",
        estimator=True,
        constraint=NEW_ROWS,
        metavar="N|inf",
        help="With --confidence: the guarantee is about the metric measured on a new sample of this many rows (a "
        "test split, a day of traffic), which a small sample makes stricter. Default: inf, the population value "
        "(docs/operating-points.md).",
    )
    review_budget: float | None = option(
        None,
        "--review-budget",
        metavar="R",
        estimator=True,
        constraint=REVIEW_BUDGET,
        help="Beside --problem fpor|frop --target A: a review band under the automatic cut, as low as keeps it within "
        "this share of the rows (with --confidence, its share's upper bound); predict writes a decision column "
        "positive/review/negative (docs/operating-points.md#review-band).",
    )
    max_alert_rate: float | None = alert_budget_option("max_alert_rate", estimator=True)
    max_alerts: int | None = alert_budget_option("max_alerts", estimator=True)
    per_rows: int | None = alert_budget_option("per_rows", estimator=True)
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
        constraint=AT_LEAST_ONE,
        help="Passes over the data for the streaming solvers fofo/ofo/lr (default 1).",
    )
    plot: str | Path | None = option(None, "--plot", help="Streaming solvers: draw online F vs rows seen to this PNG.")
    engine: str = option(
        "local",
        "--engine",
        constraint=OneOf(("local", "dask")),
        help="local, or dask: --model gbdt --solver wce trains on Dask workers through XGBoost's Dask interface, "
        "each worker reading its parquet files (needs dmocli[dask,gbdt]).",
    )
    scheduler: str | None = option(
        None, "--scheduler", help="Dask scheduler ADDRESS for --engine dask (default: a local cluster of --workers)."
    )
    workers: int = option(
        2, "--workers", constraint=AT_LEAST_ONE, help="Worker processes of the local Dask cluster (--engine dask)."
    )

    RULES: ClassVar[tuple[Rule, ...]] = (
        NEW_ROWS_NEED_CONFIDENCE,
        REVIEW_BUDGET_NEEDS_TARGET,
        *alert_budget_rules(),
        *GAIN_RULES,
    )

    def __post_init__(self) -> None:
        self.problem = problem_kind(self.problem)
        self.new_rows = read_new_rows(self.new_rows)  # the API may spell it as the command line does, or numpy
        self.cv = read_cv(self.cv)  # a number of folds or auto, as the command line spells it (typer gives text)


def target_problem(target: Any) -> str | None:
    """What is wrong with a given --target, or None: fpor/frop need a rate strictly between 0 and 1."""
    return failure(f"--target {target}", target, TARGET)


def flag_of(spec: dataclasses.Field) -> str:
    """The long flag of a TrainOptions field, as messages name it (`--adjust`, not `--adjust/--no-adjust`)."""
    return spec.metadata["flags"][0].split("/")[0]


def estimator_fields() -> list[dataclasses.Field]:
    """The TrainOptions fields DmoClassifier takes as constructor parameters, in declaration order."""
    return [spec for spec in dataclasses.fields(TrainOptions) if spec.metadata["estimator"]]


def read_cv(value: Any) -> Any:
    """--cv as the command line spells it (`5`, `auto`) and a numpy integer as the int it is; anything else is
    kept as given, for the CV constraint to name."""
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


def read_new_rows(text: Any) -> Any:
    """--new-rows as the command line spells it (a whole number of rows, or `inf` for the population value) and
    a numpy integer as the int it is; anything else is kept as given, for the NEW_ROWS constraint to name."""
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


def check_new_rows(new_rows: Any, confidence: float | None) -> None:
    """--new-rows and the --confidence it is about where no declaration holds them (a re-fit, whose confidence
    may be the one MODEL stores; the search API): TrainOptions' constraints and NEW_ROWS_NEED_CONFIDENCE."""
    check_given(TrainOptions, new_rows=new_rows, confidence=confidence)


def check_confidence(confidence: float | None) -> None:
    """The level of the one-sided Clopper-Pearson bound where no declaration holds it (the search API)."""
    check_given(TrainOptions, confidence=confidence)

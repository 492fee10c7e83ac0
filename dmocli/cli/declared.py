"""A command's options, made from its declaration: TrainOptions (dmocli/options.py) or another command's
dataclass of `option(...)` fields.

typer reads a command's options from its function signature. Writing that
signature by hand repeated every flag, default and help text of the
declaration (and they drifted), so `takes_options` builds it from the dataclass
fields instead: the command function declares only its arguments and outputs
(DATA, -o, --report, --json) and receives one filled declaration.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from pathlib import Path
from typing import Any, Callable, Collection, Optional

import typer
from rich.markup import escape

from dmocli.data.outputs import check_distinct
from dmocli.errors import DmoError
from dmocli.options import option_errors, refuse

KEYWORD = inspect.Parameter.KEYWORD_ONLY

# How the command line spells the fields whose Python type typer cannot take as is: repeatable options are lists,
# paths are Paths (the Python API also takes strings), and --param is a list of KEY=VALUE strings.
CLI_TYPES: dict[str, Any] = {
    "drop": list[str],
    "params": list[str],
    "class_target": list[str],
    "val": Optional[Path],
    "unlabeled_truth": Optional[Path],
    "plot": Optional[Path],
    "new_rows": Optional[str],  # a number of rows, or inf (read by the declaration)
    "cv": Optional[str],  # a number of folds, or auto (read by TrainOptions)
}


def parse_params(values: list[str]) -> dict[str, str]:
    """`--param KEY=VALUE` strings as a dict; a repeated key keeps its last value, as for any option."""
    params = {}
    for item in values:
        if "=" not in item or not item.split("=", 1)[0].strip():
            raise DmoError(f"--param {item!r} must look like KEY=VALUE (see `dmo solvers` for each solver's keys)")
        key, value = item.split("=", 1)
        params[key.strip()] = value.strip()
    return params


def parse_class_targets(values: list[str]) -> dict[str, str]:
    """`--class-target CLASS=A` strings as a dict (the floors are read and checked against the classes in training)."""
    targets = {}
    for item in values:
        if "=" not in item or not item.rsplit("=", 1)[0].strip():
            raise DmoError(f"--class-target {item!r} must look like CLASS=A, e.g. fraud=0.9")
        name, value = item.rsplit("=", 1)
        targets[name.strip()] = value.strip()
    return targets


def _cli_type(name: str, annotation: Any) -> Any:
    """The field's type as typer takes it: `X | None` becomes Optional[X], a tuple a repeatable list."""
    if name in CLI_TYPES:
        return CLI_TYPES[name]
    if typing.get_origin(annotation) is tuple:
        return list[typing.get_args(annotation)[0]]
    args = typing.get_args(annotation)
    if type(None) in args:
        (inner,) = [arg for arg in args if arg is not type(None)]
        return Optional[inner]
    return annotation


# The options of `dmo train` that `dmo check`'s data checks read: how DATA's columns and labels are taken, and the
# problem (checked with its target, beta and confidence). Check accepts every other option of train, and ignores it.
CHECKED_OPTIONS = (
    "label_col",
    "drop",
    "embedding_col",
    "impute",
    "fold_case",
    "dates",
    "parse_numbers",
    "positive",
    "problem",
    "target",
    "beta",
    "confidence",
    "solver",
    "model",
    "drop_unlabeled",
    "time_col",
    "cv",
    "val",
)
IGNORED_PANEL = "Options of dmo train, accepted and ignored"
# What `dmo train` writes, beside its TrainOptions (declared by the train command itself): a command that takes a
# train command line accepts these too.
TRAIN_OUTPUTS = {"output": ("--output", "-o"), "report": ("--report",)}


# Each generated command's declaration, by command name: what tests/cli/test_option_constraints.py runs every
# constraint's failing values through.
DECLARATIONS: dict[str, type] = {}

# The path parameters that name what a command writes. Every other path parameter of a command (its arguments,
# --val, --adapt, --unlabeled-truth, ...) names what it reads: a new one is an input without a word here.
OUTPUT_PARAMETERS = ("output", "report", "plot", "html")  # html: a page (--html, dmocli/pages/)
# An output that may be the input it names, by design: `dmo threshold MODEL -o MODEL` re-targets a model in place
# (MODEL is read whole before the new file replaces it, atomically).
REPLACES_INPUT: dict[str, dict[str, str]] = {"threshold": {"output": "model"}}


def option_parameters(declaration: type, used: Collection[str] | None = None) -> list[inspect.Parameter]:
    """One keyword parameter per field of `declaration`, with its typer.Option (flags, default, help); with
    `used`, the fields not named there are listed apart in --help, as accepted and ignored."""
    hints = typing.get_type_hints(declaration)
    parameters = []
    for spec in dataclasses.fields(declaration):
        default = [] if spec.default is dataclasses.MISSING or isinstance(spec.default, tuple) else spec.default
        help_text = escape(spec.metadata["help"])  # `dmocli[gbdt]` is an install command, not rich markup
        info = typer.Option(
            default,
            *spec.metadata["flags"],
            help=help_text,
            metavar=spec.metadata.get("metavar"),
            rich_help_panel=None if used is None or spec.name in used else IGNORED_PANEL,
        )
        parameters.append(
            inspect.Parameter(spec.name, KEYWORD, default=info, annotation=_cli_type(spec.name, hints[spec.name]))
        )
    return parameters


def options_from_cli(declaration: type, values: dict[str, Any]) -> Any:
    """The declaration filled from the parsed command line (lists back to tuples, KEY=VALUE lists to dicts; text
    the declaration reads itself, --new-rows and --cv, as given)."""
    values = dict(values)
    hints = typing.get_type_hints(declaration)
    for name, value in values.items():
        if typing.get_origin(hints[name]) is tuple:
            values[name] = tuple(value)
    if "params" in values:
        values["params"] = parse_params(values["params"])
    if "class_target" in values:
        values["class_target"] = parse_class_targets(values["class_target"])
    return declaration(**values)


def takes_options(
    declaration: type,
    command: Callable[..., None] | None = None,
    *,
    used: Collection[str] | None = None,
    check: bool = True,
) -> Any:
    """Turn `command(..., options: DECLARATION)` into a typer command with one option per declared field.

    The generated options take the place of the command's `options` parameter, so --help lists them where the
    command puts that parameter (after DATA in `dmo train`, after --json in `dmo evaluate`). With `check`, every
    declared constraint and rule (the declaration's `RULES`) is checked before the command runs, all refusals in
    one message (train's pipeline checks its own, with the solver's, so `dmo train` passes check=False, and
    `dmo threshold` joins its own to them). `@takes_options(TrainOptions, used=
    CHECKED_OPTIONS)`: a command that takes a whole `dmo train` command line (its -o and --report too), so one
    can be copied into it as is, and uses the options in `used`; --help lists the others apart.
    """
    if command is None:
        return functools.partial(takes_options, declaration, used=used, check=check)
    DECLARATIONS[command.__name__] = declaration
    signature = list(inspect.signature(command, eval_str=True).parameters.values())
    at = [p.name for p in signature].index("options")
    generated = option_parameters(declaration, used)
    names = {p.name for p in generated}
    outputs = [] if used is None else _train_outputs()

    @functools.wraps(command)
    def wrapper(**values: Any) -> None:
        given = dict(values)
        options = options_from_cli(declaration, {name: values.pop(name) for name in names})
        if check:
            refuse(option_errors(options))
        check_paths(command.__name__, parameters, given)  # before any reading or writing
        for parameter in outputs:
            values.pop(parameter.name)
        command(**values, options=options)

    def keyword(parameters: list[inspect.Parameter]) -> list[inspect.Parameter]:
        return [p if isinstance(p.default, typer.models.ArgumentInfo) else p.replace(kind=KEYWORD) for p in parameters]

    parameters = [*keyword(signature[:at]), *generated, *keyword(signature[at + 1 :]), *outputs]
    wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    del wrapper.__wrapped__  # typer must read the signature above, not the wrapped function's
    return wrapper


def path_parameters(parameters: Collection[inspect.Parameter]) -> tuple[list[str], list[str]]:
    """The names of a command's path parameters that it writes and that it reads (the help-only -o and --report
    of a command that takes a train command line are neither: nothing is written there)."""
    paths = [
        p.name
        for p in parameters
        if Path in (p.annotation, *typing.get_args(p.annotation))
        and getattr(p.default, "rich_help_panel", None) != IGNORED_PANEL
    ]
    written = [name for name in paths if name in OUTPUT_PARAMETERS]
    return written, [name for name in paths if name not in written]


def path_label(parameter: inspect.Parameter) -> str:
    """How messages name a path parameter: `-o`, its long flag (`--report`), or an argument's metavar (`MODEL`)."""
    flags = getattr(parameter.default, "param_decls", None) or ()
    return "-o" if "-o" in flags else next((flag for flag in flags if flag.startswith("--")), parameter.name.upper())


def check_paths(command: str, parameters: Collection[inspect.Parameter], values: dict[str, Any]) -> None:
    """Refuse an output that is an input or another output of the same command line (check_distinct), before
    anything is read or written, for every command alike: each command's path parameters are sorted by
    path_parameters, so a new output or input is checked without a line here. An output may be the input
    REPLACES_INPUT pairs it with; standard input and output (`-`) are no files."""
    by_name = {p.name: p for p in parameters}
    written, read = path_parameters(parameters)

    def given(names: list[str]) -> dict[str, Any]:
        return {
            path_label(by_name[name]): values.get(name)
            for name in names
            if values.get(name) is not None and str(values[name]) != "-"
        }

    outputs = given(written)
    for name in written:
        inputs = [source for source in read if source != REPLACES_INPUT.get(command, {}).get(name)]
        check_distinct(given([name]), given(inputs))
    check_distinct(outputs, {})


def _train_outputs() -> list[inspect.Parameter]:
    """-o and --report as `dmo train` takes them, for a command that accepts and ignores them."""
    return [
        inspect.Parameter(
            name,
            KEYWORD,
            default=typer.Option(
                None, *flags, help="Where dmo train writes; ignored here.", rich_help_panel=IGNORED_PANEL
            ),
            annotation=Optional[Path],
        )
        for name, flags in TRAIN_OUTPUTS.items()
    ]

"""The options of `dmo train`, made from TrainOptions' declaration (dmocli/options.py).

typer reads a command's options from its function signature. Writing that
signature by hand repeated every flag, default and help text of TrainOptions
(and they drifted), so `takes_train_options` builds it from the dataclass
fields instead: the command function declares only what is not a training
option (DATA, -o, --report, --json) and receives one TrainOptions.
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

from dmocli.errors import DmoError
from dmocli.options import TrainOptions, read_new_rows

# How the command line spells the fields whose Python type typer cannot take as is: repeatable options are lists,
# paths are Paths (the Python API also takes strings), and --param is a list of KEY=VALUE strings.
CLI_TYPES: dict[str, Any] = {
    "drop": list[str],
    "params": list[str],
    "class_target": list[str],
    "val": Optional[Path],
    "unlabeled_truth": Optional[Path],
    "plot": Optional[Path],
    "new_rows": Optional[str],  # a number of rows, or inf
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
    """The field's type as typer takes it: `X | None` becomes Optional[X]."""
    if name in CLI_TYPES:
        return CLI_TYPES[name]
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
)
IGNORED_PANEL = "Options of dmo train, accepted and ignored"
# What `dmo train` writes, beside its TrainOptions (declared by the train command itself): a command that takes a
# train command line accepts these too.
TRAIN_OUTPUTS = {"output": ("--output", "-o"), "report": ("--report",)}


def option_parameters(used: Collection[str] | None = None) -> list[inspect.Parameter]:
    """One keyword parameter per TrainOptions field, with its typer.Option (flags, default, help); with `used`, the
    fields not named there are listed apart in --help, as accepted and ignored."""
    hints = typing.get_type_hints(TrainOptions)
    parameters = []
    for spec in dataclasses.fields(TrainOptions):
        default = [] if spec.name in ("drop", "params", "class_target") else spec.default
        help_text = escape(spec.metadata["help"])  # `dmocli[gbdt]` is an install command, not rich markup
        info = typer.Option(
            default,
            *spec.metadata["flags"],
            help=help_text,
            metavar=spec.metadata.get("metavar"),
            rich_help_panel=None if used is None or spec.name in used else IGNORED_PANEL,
        )
        parameters.append(
            inspect.Parameter(
                spec.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=info,
                annotation=_cli_type(spec.name, hints[spec.name]),
            )
        )
    return parameters


def options_from_cli(values: dict[str, Any]) -> TrainOptions:
    """TrainOptions from the parsed command line (lists back to the dataclass's types)."""
    values = dict(values)
    if "drop" in values:
        values["drop"] = tuple(values["drop"])
    if "params" in values:
        values["params"] = parse_params(values["params"])
    if "new_rows" in values:
        values["new_rows"] = read_new_rows(values["new_rows"])
    if "class_target" in values:
        values["class_target"] = parse_class_targets(values["class_target"])
    return TrainOptions(**values)


def takes_train_options(command: Callable[..., None] | None = None, *, used: Collection[str] | None = None) -> Any:
    """Turn `command(..., options: TrainOptions)` into a typer command with one option per TrainOptions field.

    `@takes_train_options(used=CHECKED_OPTIONS)`: a command that takes a whole `dmo train` command line (its -o
    and --report too), so one can be copied into it as is, and uses the options in `used`; --help lists the others
    apart. The generated options follow the command's first parameter (DATA) and precede its other ones, as `dmo
    train --help` lists them.
    """
    if command is None:
        return functools.partial(takes_train_options, used=used)
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "options"]
    generated = option_parameters(used)
    names = {p.name for p in generated}
    outputs = [] if used is None else _train_outputs()

    @functools.wraps(command)
    def wrapper(**values: Any) -> None:
        options = options_from_cli({name: values.pop(name) for name in names})
        for parameter in outputs:
            values.pop(parameter.name)
        command(**values, options=options)

    parameters = [own[0], *generated, *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[1:]), *outputs]
    wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    del wrapper.__wrapped__  # typer must read the signature above, not the wrapped function's
    return wrapper


def _train_outputs() -> list[inspect.Parameter]:
    """-o and --report as `dmo train` takes them, for a command that accepts and ignores them."""
    return [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(
                None, *flags, help="Where dmo train writes; ignored here.", rich_help_panel=IGNORED_PANEL
            ),
            annotation=Optional[Path],
        )
        for name, flags in TRAIN_OUTPUTS.items()
    ]

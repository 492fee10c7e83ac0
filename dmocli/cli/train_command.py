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
    "val": Optional[Path],
    "unlabeled_truth": Optional[Path],
    "plot": Optional[Path],
    "new_rows": Optional[str],  # a number of rows, or inf
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


def _cli_type(name: str, annotation: Any) -> Any:
    """The field's type as typer takes it: `X | None` becomes Optional[X]."""
    if name in CLI_TYPES:
        return CLI_TYPES[name]
    args = typing.get_args(annotation)
    if type(None) in args:
        (inner,) = [arg for arg in args if arg is not type(None)]
        return Optional[inner]
    return annotation


# The options of `dmo train` that decide what it makes of DATA's columns and labels: those `dmo check` takes.
COLUMN_OPTIONS = (
    "label_col",
    "drop",
    "embedding_col",
    "impute",
    "positive",
    "problem",
    "solver",
    "model",
    "drop_unlabeled",
)


def option_parameters(only: Collection[str] | None = None) -> list[inspect.Parameter]:
    """One keyword parameter per TrainOptions field (or per field named in `only`), with its typer.Option
    (flags, default, help)."""
    hints = typing.get_type_hints(TrainOptions)
    parameters = []
    for spec in dataclasses.fields(TrainOptions):
        if only is not None and spec.name not in only:
            continue
        default = [] if spec.name in ("drop", "params") else spec.default
        help_text = escape(spec.metadata["help"])  # `dmocli[gbdt]` is an install command, not rich markup
        info = typer.Option(default, *spec.metadata["flags"], help=help_text, metavar=spec.metadata.get("metavar"))
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
    return TrainOptions(**values)


def takes_train_options(command: Callable[..., None] | None = None, *, only: Collection[str] | None = None) -> Any:
    """Turn `command(..., options: TrainOptions)` into a typer command with one option per TrainOptions field
    (`@takes_train_options(only=COLUMN_OPTIONS)`: those fields alone, the others at their defaults).

    The generated options follow the command's first parameter (DATA) and precede its other ones, as `dmo train
    --help` lists them.
    """
    if command is None:
        return functools.partial(takes_train_options, only=only)
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "options"]
    generated = option_parameters(only)
    names = {p.name for p in generated}

    @functools.wraps(command)
    def wrapper(**values: Any) -> None:
        options = options_from_cli({name: values.pop(name) for name in names})
        command(**values, options=options)

    parameters = [own[0], *generated, *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[1:])]
    wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    del wrapper.__wrapped__  # typer must read the signature above, not the wrapped function's
    return wrapper

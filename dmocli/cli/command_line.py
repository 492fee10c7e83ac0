"""The click command a `dmo` process runs, made from the typer app, with two things typer's own lacks.

- Flags (`--json`, `--allow-infeasible`, `--help`) take no value, yet typer's help lists them with a `<bool>`
  type as if they took one; here their type column is left empty.
- click keeps only the last value of a single-valued option given twice, so `--id-col a --id-col b` would
  silently drop `a`; here every such repetition is refused in one message, before the command runs.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import typer

from dmocli.errors import DmoError

HELP_FLAGS = ("-h", "--help")


@cache
def click_command(app: typer.Typer) -> Any:
    """The app's click group, its flags shown without a value type; made once a process, where typer's main
    makes it again on each run (reading every command's signature: 4 to 11 ms), which a library or test calling
    `dmo` in process thousands of times paid each time. A click command keeps no state between runs (each parses
    into a fresh context)."""
    group = typer.main.get_command(app)
    for command in (group, *group.commands.values()):
        _blank_flag_types(command)
    return group


def _blank_flag_types(command: Any) -> None:
    ctx = command.context_class(command, info_name=command.name, help_option_names=list(HELP_FLAGS))
    help_option = command.get_help_option(ctx)  # made on first use, so made here to be changed too
    for param in (*command.params, *([help_option] if help_option is not None else [])):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


def refuse_repeated_options(group: Any, args: list[str]) -> None:
    """Every single-valued option of the command given more than once with different values, refused in one
    message (a repeatable one such as --drop or --param keeps all its values, as before)."""
    if any(arg in HELP_FLAGS for arg in args):
        return
    position = next((i for i, arg in enumerate(args) if not arg.startswith("-")), None)
    command = None if position is None else group.commands.get(args[position])
    if command is None:
        return
    single, takes_value = {}, set()
    for param in command.params:
        if getattr(param, "param_type_name", "") != "option" or param.is_flag:
            continue
        names = [*param.opts, *param.secondary_opts]
        takes_value.update(names)
        if not param.multiple:
            single.update({name: param for name in names})
    given: dict[str, list[tuple[str, str | None]]] = {}
    rest, i = args[position + 1 :], 0
    while i < len(rest) and rest[i] != "--":
        name, value = _split(rest[i], takes_value)
        if name in takes_value and value is None:  # the value is the next argument
            value = rest[i + 1] if i + 1 < len(rest) else None
            i += 1
        if name in single:
            given.setdefault(single[name].name, []).append((name, value))
        i += 1
    repeated = [
        f"{uses[0][0]} is given {len(uses)} times ({', '.join(repr(value) for _, value in uses)}) but takes one "
        "value: give it once"
        for uses in given.values()
        if len({value for _, value in uses}) > 1  # the same value twice loses nothing
    ]
    if repeated:
        raise DmoError("; ".join(repeated))


def _split(arg: str, takes_value: set[str]) -> tuple[str, str | None]:
    """An argument as (option name, attached value): `--id-col=a`, `-oOUT`, or `--id-col` (value follows)."""
    if arg.startswith("--") and "=" in arg:
        name, value = arg.split("=", 1)
        return name, value
    if not arg.startswith("--") and len(arg) > 2 and arg[:2] in takes_value:
        return arg[:2], arg[2:]
    return arg, None

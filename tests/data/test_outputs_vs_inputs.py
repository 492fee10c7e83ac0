"""No output of any command may replace one of its inputs or another of its outputs (issue 45, hostile review 1:
`dmo threshold v.safetensors --prior 0.2 --report v.safetensors` replaced the model with its report).

The cases are generated from the commands themselves: every path parameter of every registered command is an
output (declared.OUTPUT_PARAMETERS) or an input, and every (output, input) and (output, output) pair is given the
same path. A new command, output or input is covered without a line here."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from conftest import run_dmo

from dmocli.cli.app import app
from dmocli.cli.declared import REPLACES_INPUT, path_label, path_parameters


def _commands() -> dict[str, list[inspect.Parameter]]:
    """Each registered command's parameters, as typer reads them (the generated options included)."""
    commands = {}
    for registered in app.registered_commands:
        name = registered.name or registered.callback.__name__
        commands[name] = list(inspect.signature(registered.callback).parameters.values())
    return commands


def _pairs() -> list[tuple[str, str, str]]:
    pairs = []
    for command, parameters in _commands().items():
        written, read = path_parameters(parameters)
        pairs += [(command, output, other) for output in written for other in [*read, *written] if other != output]
    return pairs


PAIRS = _pairs()


def _command_line(command: str, tmp_path: Path, same: tuple[str, str]) -> tuple[list[str], Path]:
    """`dmo COMMAND` with every path parameter given (inputs: existing files, outputs: new names), the two of
    `same` at one path, and that path."""
    parameters = _commands()[command]
    written, read = path_parameters(parameters)
    paths = {name: tmp_path / f"{name}.file" for name in [*written, *read]}
    for name in read:
        paths[name].write_bytes(b"an input that must not change\n")
    paths[same[0]] = paths[same[1]]
    if same[1] in written:  # two outputs at one path: it need not exist
        paths[same[1]].unlink(missing_ok=True)
    arguments = [str(paths[p.name]) for p in parameters if p.name in paths and _is_argument(p)]
    options = [
        item for p in parameters if p.name in paths and not _is_argument(p) for item in (path_label(p), paths[p.name])
    ]
    return [command, *arguments, *map(str, options)], paths[same[1]]


def _is_argument(parameter: inspect.Parameter) -> bool:
    return type(parameter.default).__name__ == "ArgumentInfo"


def test_every_command_that_writes_has_outputs_and_inputs():
    """The generated cases reach every command that writes a file, each with its outputs."""
    commands = {command for command, _, _ in PAIRS}
    assert {"train", "threshold", "evaluate", "predict", "monitor", "subsample", "extract"} <= commands
    assert ("threshold", "report", "model") in PAIRS and ("threshold", "report", "adapt") in PAIRS
    assert ("train", "plot", "val") in PAIRS and ("train", "report", "unlabeled_truth") in PAIRS


@pytest.mark.parametrize(("command", "output", "other"), PAIRS, ids=["-".join(pair) for pair in PAIRS])
def test_an_output_at_an_input_or_another_output_is_refused(command, output, other, tmp_path):
    args, shared = _command_line(command, tmp_path, (output, other))
    before = shared.read_bytes() if shared.exists() else None
    proc = run_dmo(*args)
    in_place = REPLACES_INPUT.get(command, {}).get(output) == other
    if in_place:
        assert "same file" not in proc.stderr, proc.stderr
        return
    assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "the same file" in proc.stderr, proc.stderr
    assert (shared.read_bytes() if shared.exists() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary file left


def test_the_reported_case_keeps_the_model(tmp_path, binary_parquet):
    """The review's case, end to end: the report refused, the model file unchanged, nothing else written."""
    model = tmp_path / "v.safetensors"
    run_dmo("train", binary_parquet, "--problem", "fpor", "--target", "0.6", "-o", model, check=True)
    before = model.read_bytes()
    proc = run_dmo("threshold", model, "--prior", "0.2", "-o", tmp_path / "out.safetensors", "--report", model)
    assert proc.returncode == 2 and "--report" in proc.stderr and "MODEL" in proc.stderr, proc.stderr
    assert model.read_bytes() == before and not (tmp_path / "out.safetensors").exists()
    in_place = run_dmo("threshold", model, "--prior", "0.2", "-o", model)  # re-targeting in place stays allowed
    assert in_place.returncode == 0, in_place.stderr

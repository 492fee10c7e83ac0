"""What `dmo solvers --json` advertises is what `dmo train` accepts: every combination of solver, --engine and
--model, and every `--param` whose declared scope is narrower than its solver, checked against the one option
check of pipelines/train.py. Generated from the declarations, so a new solver, model kind or engine is covered
without an edit here; nothing is trained (the check reads no data)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import signal
import typing

import pytest
from conftest import REPO

from dmocli.engines.choice import ENGINES
from dmocli.errors import DmoError
from dmocli.options import MODEL_CHOICES, PROBLEM_CHOICES, TrainOptions
from dmocli.pipelines.train import check_options
from dmocli.solvers import available, get_solver

SAMPLE = REPO / "sample_data" / "train.parquet"


@pytest.fixture(scope="module")
def advertised() -> dict[str, dict]:
    """`dmo solvers --json`, run once through the real command in this process (what the command sets for the
    whole process, as the `dmo` fixture does, put back afterwards)."""
    from dmocli import errors
    from dmocli.cli.process import main

    previous = signal.getsignal(signal.SIGTERM)
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()) as out:
        patch.setitem(errors._SPELLING, "cli", errors._SPELLING["cli"])
        with pytest.raises(SystemExit) as ended:
            main(["solvers", "--json"])
    signal.signal(signal.SIGTERM, previous)
    assert ended.value.code == 0
    return {record["name"]: record for record in json.loads(out.getvalue())["solvers"]}


def _options(name: str, **given: typing.Any) -> TrainOptions:
    """Options every check passes for solver `name` but the one under test (a problem it solves, a held-out
    split where a default --cv would clash with --engine dask)."""
    problem = "fpor" if "fpor" in get_solver(name).problems else get_solver(name).problems[0]
    given.setdefault("val", "val.parquet")
    return TrainOptions(problem=problem, target=0.8 if problem in ("fpor", "frop") else None, solver=name, **given)


def _refusal(opts: TrainOptions) -> str | None:
    try:
        check_options(opts)
    except DmoError as exc:
        return str(exc)
    return None


def test_the_listing_covers_every_solver_and_only_known_kinds(advertised):
    assert sorted(advertised) == available()
    for record in advertised.values():
        assert set(record["engines"]) <= set(ENGINES) and "local" in record["engines"]
        assert record["engines"]["local"] == record["models"]
        assert all(set(kinds) <= set(MODEL_CHOICES) for kinds in record["engines"].values())
    assert advertised["fofo"]["models"] == ["linear"]  # a streaming solver learns numpy logistic weights only


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("model", MODEL_CHOICES)
@pytest.mark.parametrize("name", available())
def test_train_accepts_exactly_the_advertised_models_on_each_engine(advertised, name, model, engine):
    refusal = _refusal(_options(name, model=model, engine=engine))
    if model in advertised[name]["engines"].get(engine, []):
        assert refusal is None, f"{name} advertises --model {model} on --engine {engine}, yet: {refusal}"
        return
    assert refusal is not None, f"{name} does not advertise --model {model} on --engine {engine}, yet it passed"
    assert "\n" not in refusal and f"--model {model}" in refusal and name in refusal
    assert "; " not in refusal  # one problem: the others of these options pass


@pytest.mark.parametrize("problem", PROBLEM_CHOICES)
@pytest.mark.parametrize("name", available())
def test_train_accepts_exactly_the_advertised_problems(advertised, name, problem):
    record = advertised[name]
    target = 0.8 if problem in ("fpor", "frop") else None
    gain = "tp=50,fp=-5,fn=-amount" if problem == "value" else None
    refusal = _refusal(TrainOptions(problem=problem, target=target, gain=gain, solver=name))
    if problem == "value":  # trained as ofbs, the threshold searched on each held-out row's gains, in memory
        if get_solver(name).streaming:
            assert refusal is not None and "\n" not in refusal and "--problem value" in refusal
        else:
            assert "ofbs" in record["problems"] and refusal is None, refusal
        return
    if problem in record["problems"] or (problem == "multiclass" and record["multiclass"]):
        assert refusal is None, f"{name} advertises --problem {problem}, yet: {refusal}"
        return
    assert refusal is not None and "\n" not in refusal and "; " not in refusal
    assert f"solver {name} " in refusal and "--problem" in refusal


def _changed(spec: dataclasses.Field, annotation: typing.Any) -> str:
    """A valid value other than the default, for a numeric --param."""
    kind = next(kind for kind in typing.get_args(annotation) or (annotation,) if kind is not type(None))
    default = spec.default if spec.default is not None else spec.metadata.get("min", 1)
    return str(default + 2) if kind is int else repr(float(default) * 2 or 1.0)


SCOPED = [
    (name, spec)
    for name in available()
    for spec in dataclasses.fields(get_solver(name).Params)
    if "models" in spec.metadata or "torchrun" in spec.metadata
]


def test_some_parameters_declare_a_narrower_scope():
    assert {(name, spec.name) for name, spec in SCOPED} >= {("ero", "folding"), ("ero", "tree_rounds")}


@pytest.mark.parametrize("name,spec", SCOPED, ids=[f"{name}-{spec.name}" for name, spec in SCOPED])
def test_a_parameter_is_accepted_exactly_on_the_models_it_declares(advertised, name, spec):
    key = spec.name.replace("_", "-")
    listed = next(param for param in advertised[name]["params"] if param["name"] == key)
    assert listed.get("models") == (list(spec.metadata["models"]) if "models" in spec.metadata else None)
    value = _changed(spec, typing.get_type_hints(get_solver(name).Params)[spec.name])
    for model in advertised[name]["models"]:
        refusal = _refusal(_options(name, model=model, val=None, cv=0, params={key: value}))
        if model in listed.get("models", advertised[name]["models"]):
            assert refusal is None, f"--param {key}={value} with --model {model}: {refusal}"
        else:
            assert refusal == (
                f"--param {key} applies to --model {' or '.join(listed['models'])}, not to --model {model}: drop it"
            )


def test_a_one_process_parameter_is_refused_under_torchrun_with_every_other_problem(monkeypatch):
    opts = TrainOptions(problem="frop", target=0.8, solver="ero", folding=3, model="gbdt", cv=1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    message = _refusal(opts)
    assert message is not None and "\n" not in message
    parts = message.split("; ")
    assert parts[0].startswith("--cv 1 leaves no fold")
    assert "--folding applies to --model linear or mlp, not to --model gbdt: drop it" in parts
    assert "--folding holds out rows of one process, not under torchrun: drop it (give --val FILE)" in parts
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert _refusal(TrainOptions(problem="frop", target=0.8, solver="ero", folding=3)) is None


def test_the_command_refuses_an_unadvertised_model_before_reading_data(dmo, tmp_path):
    model = tmp_path / "m.safetensors"
    code, out, err = dmo("train", SAMPLE, "--solver", "fofo", "--model", "mlp", "--cv", "1", "-o", model)
    assert code == 2 and out == "" and not model.exists()
    line = err.strip()
    assert "\n" not in line and "solver fofo does not train --model mlp (solvers that do: " in line
    assert "--cv 1 leaves no fold" in line  # every problem of the command line in the same run


def test_the_listing_for_people_says_the_same(dmo, monkeypatch):
    from dmocli.cli import output

    # one table row per parameter; the console read COLUMNS when first imported, so set its width itself
    monkeypatch.setattr(output.out, "width", 250)
    code, out, _ = dmo("solvers", "ero")
    assert code == 0
    assert "(only --model linear, mlp, without torchrun)" in next(
        line for line in out.splitlines() if " folding " in line
    )
    assert "(only --model gbdt)" in next(line for line in out.splitlines() if " tree-rounds " in line)
    code, out, _ = dmo("solvers", "wce")
    assert code == 0 and "models: linear, mlp, gbdt (gbdt also with --engine dask);" in out
    code, out, _ = dmo("solvers", "fofo")
    assert code == 0 and "models: linear;" in out

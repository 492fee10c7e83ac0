"""The contract every registered solver keeps, checked the same way for each (as scikit-learn's test_common and
river's checks do): a solver joins this suite by being registered in dmocli/solvers/__init__.py.

Checks: its parameters declare help and a type the parser knows and their defaults parse; a bad choice, a value
out of range or an unknown key is refused before any data is read; it fits tiny generated data (binary, and
multi-class where it says it can) to a useful model; the same seed gives the same model; the model file
round-trips to the same scores.
"""

from __future__ import annotations

import dataclasses
import typing

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dmocli import TrainOptions, load_model, train
from dmocli.errors import DmoError
from dmocli.solvers import available, get_solver
from dmocli.solvers.base import InMemorySolver, StreamingSolver

SOLVERS = available()

# What a solver needs beyond its defaults to train on a small plain table, and what keeps the suite quick. A new
# solver that cannot fit plain data with its defaults adds its entry here.
EXTRA_PARAMS: dict[str, dict[str, str]] = {
    "lus": {"gamma": "2"},
    "ero": {"outer": "2", "inner-steps": "30"},
    "sigmoid-f1": {"steps": "300"},
    "lagrangian": {"steps": "300"},
    "adsh": {"epochs": "10", "steps-per-epoch": "50"},
    "fixmatch": {"epochs": "10", "steps-per-epoch": "50"},
}


def _table(n: int, n_classes: int, seed: int, unlabeled: float = 0.0) -> pa.Table:
    """Well separated Gaussian classes (class 1 the smallest of two), some labels missing when asked."""
    rng = np.random.default_rng(seed)
    priors = [0.7, 0.3] if n_classes == 2 else [1.0 / n_classes] * n_classes
    y = rng.choice(n_classes, size=n, p=priors)
    means = rng.normal(scale=3.0, size=(n_classes, 4))
    X = (rng.normal(size=(n, 4)) + means[y]).astype(np.float32)
    labels = pa.array([None if rng.random() < unlabeled else int(v) for v in y], pa.int64())
    return pa.table({**{f"x{i}": X[:, i] for i in range(4)}, "label": labels})


def _options(name: str, n_classes: int = 2, seed: int = 0) -> TrainOptions:
    solver = get_solver(name)
    problem = "multiclass" if n_classes > 2 else ("ofbs" if "ofbs" in solver.problems else solver.problems[0])
    target = 0.5 if problem in ("fpor", "frop") else None
    return TrainOptions(
        problem=problem, target=target, solver=name, seed=seed, params=dict(EXTRA_PARAMS.get(name, {})), device="cpu"
    )


def _unlabeled_share(name: str) -> float:
    return 0.4 if get_solver(name).uses_unlabeled else 0.0


def _write(tmp_path, table: pa.Table, name: str = "data.parquet"):
    path = tmp_path / name
    pq.write_table(table, path)
    return path


def _fit(tmp_path, name: str, n_classes: int = 2, seed: int = 0, out: str = "model.safetensors"):
    data = _write(tmp_path, _table(400, n_classes, 7, _unlabeled_share(name)))
    model, report = train(data, _options(name, n_classes, seed), output=tmp_path / out)
    return data, model, report


@pytest.mark.parametrize("name", SOLVERS)
def test_the_solver_is_one_of_the_two_protocols_and_declares_what_it_solves(name):
    solver = get_solver(name)
    assert isinstance(solver, (InMemorySolver, StreamingSolver))
    assert not (isinstance(solver, InMemorySolver) and isinstance(solver, StreamingSolver))
    assert solver.name == name and solver.summary
    assert set(solver.problems) <= {"fpor", "frop", "ofbs"} and solver.problems


@pytest.mark.parametrize("name", SOLVERS)
def test_parameters_declare_help_and_a_parsable_type_and_the_defaults_parse(name):
    solver = get_solver(name)
    hints = typing.get_type_hints(solver.Params)
    for spec in dataclasses.fields(solver.Params):
        assert spec.metadata.get("help"), f"{name} --param {spec.name} has no help text"
        kinds = set(typing.get_args(hints[spec.name])) - {type(None)} or {hints[spec.name]}
        assert kinds <= {bool, int, float, str}, f"{name} --param {spec.name}: {hints[spec.name]} cannot be parsed"
        choices = spec.metadata.get("choices")
        if choices is not None and spec.default is not None:
            assert spec.default in choices, f"{name} --param {spec.name}: default not among its choices"
    assert solver.parse_params({}) == solver.Params()
    solver.check_params(solver.parse_params({}), "linear")


def _bad_values(name: str) -> list[tuple[str, str, str]]:
    """(key, value, expected message part) for every declared choice and lower bound of the solver, and a key
    it does not have."""
    cases = [("no-such-key", "1", "is not a parameter of solver")]
    for spec in dataclasses.fields(get_solver(name).Params):
        key = spec.name.replace("_", "-")
        if "choices" in spec.metadata:
            cases.append((key, "not-a-choice", f"--param {key}='not-a-choice' is not known (use "))
        elif "min" in spec.metadata:
            cases.append((key, str(spec.metadata["min"] - 1), f"--param {key}="))
        elif spec.metadata.get("positive"):
            cases.append((key, "0", f"--param {key}="))
    return cases


@pytest.mark.parametrize("name", SOLVERS)
def test_a_bad_parameter_is_refused_before_any_data_is_read(name, tmp_path):
    """DATA is not a table at all: a check that waited for the data would fail on reading it instead."""
    garbage = tmp_path / "data.parquet"
    garbage.write_bytes(b"this is not parquet")
    for key, value, message in _bad_values(name):
        opts = _options(name)
        opts.params = {**opts.params, key: value}
        with pytest.raises(DmoError) as caught:
            train(garbage, opts, output=tmp_path / "m.safetensors")
        assert message in str(caught.value) and "cannot read" not in str(caught.value), (key, str(caught.value))
        assert not (tmp_path / "m.safetensors").exists()


@pytest.mark.parametrize("name", SOLVERS)
def test_every_bad_parameter_is_named_in_one_message(name, tmp_path):
    garbage = tmp_path / "data.parquet"
    garbage.write_bytes(b"this is not parquet")
    cases = _bad_values(name)
    opts = _options(name)
    opts.params = {**opts.params, **{key: value for key, value, _ in cases}}
    with pytest.raises(DmoError) as caught:
        train(garbage, opts, output=tmp_path / "m.safetensors")
    for _, _, message in cases:
        assert message in str(caught.value)


@pytest.mark.parametrize("name", SOLVERS)
def test_it_fits_tiny_generated_data_to_a_useful_model(name, tmp_path):
    data, model, report = _fit(tmp_path, name)
    table = pq.read_table(data)
    logits, _ = model.logits(table)
    assert np.isfinite(logits).all()
    labeled = [v for v in table.column("label").to_pylist() if v is not None]
    truth = np.asarray([v for v in table.column("label").to_pylist()], dtype=object)
    decided = model.decide(logits)[truth != None]  # noqa: E711 - an object array compared elementwise
    accuracy = float(np.mean(decided == np.asarray(labeled)))
    assert accuracy > 0.9, f"{name}: accuracy {accuracy:.3f} on well separated classes"
    assert report["solver"] == name and "splits" in report


@pytest.mark.parametrize("name", [name for name in SOLVERS if get_solver(name).multiclass])
def test_a_multiclass_solver_fits_three_classes(name, tmp_path):
    data, model, report = _fit(tmp_path, name, n_classes=3)
    logits, _ = model.logits(pq.read_table(data))
    assert logits.shape[1] == 3 and report["problem"] == "multiclass"
    assert report["splits"]["train"]["balanced_accuracy"] > 0.9


@pytest.mark.parametrize("name", SOLVERS)
def test_the_same_seed_gives_the_same_model(name, tmp_path):
    data, first, _ = _fit(tmp_path, name, out="a.safetensors")
    _, second, _ = _fit(tmp_path, name, out="b.safetensors")
    table = pq.read_table(data)
    np.testing.assert_array_equal(first.logits(table)[0], second.logits(table)[0])
    assert first.threshold == second.threshold


@pytest.mark.parametrize("name", SOLVERS)
def test_the_model_file_round_trips_to_the_same_scores(name, tmp_path):
    data, model, _ = _fit(tmp_path, name)
    loaded = load_model(tmp_path / "model.safetensors")
    table = pq.read_table(data)
    np.testing.assert_array_equal(loaded.logits(table)[0], model.logits(table)[0])
    assert loaded.threshold == model.threshold and loaded.solver == name
    assert loaded.labels.classes == model.labels.classes

"""The model file: safetensors + JSON metadata, no pickle, versioned, exact round trip."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import make_binary_frame
from safetensors import safe_open

from dmocli import TrainOptions, train
from dmocli.errors import DmoError
from dmocli.models.modelfile import FORMAT_VERSION, load_model, read_metadata


@pytest.fixture(scope="module")
def model_and_data(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("modelfile")
    data = tmp_path / "d.parquet"
    make_binary_frame(n=300).to_parquet(data)
    path = tmp_path / "m.safetensors"
    opts = TrainOptions(problem="fpor", target=0.7, model="mlp", width=8, seed=1, params={"max_epochs": "30"})
    model, _ = train(data, opts, output=path)
    return model, path, data


def test_round_trip_gives_identical_logits(model_and_data):
    model, path, data = model_and_data
    table = pq.read_table(data)
    loaded = load_model(path)
    assert np.array_equal(model.logits(table)[0], loaded.logits(table)[0])
    assert loaded.threshold == model.threshold
    assert loaded.problem == model.problem


def test_metadata_has_design_keys(model_and_data):
    _, path, _ = model_and_data
    meta = read_metadata(path)
    for key in (
        "format_version",
        "solver",
        "problem",
        "target",
        "beta",
        "threshold",
        "labels",
        "feature_columns",
        "preprocessing",
        "architecture",
        "info",
    ):
        assert key in meta
    assert meta["format_version"] == FORMAT_VERSION
    assert meta["feature_columns"] == ["f0", "f1", "f2", "f3"]


def test_file_holds_only_tensors_and_json(model_and_data):
    _, path, _ = model_and_data
    raw = path.read_bytes()
    assert b"\x80\x04\x95" not in raw and b"\x80\x02" not in raw[:64]  # no pickle protocol header
    with safe_open(str(path), framework="pt") as handle:
        assert all(isinstance(v, str) for v in handle.metadata().values())
        json.loads(handle.metadata()["dmocli"])


def test_newer_format_version_refused(model_and_data, tmp_path):
    _, path, _ = model_and_data
    from safetensors.torch import load_file, save_file

    with safe_open(str(path), framework="pt") as handle:
        meta = json.loads(handle.metadata()["dmocli"])
    meta["format_version"] = FORMAT_VERSION + 1
    other = tmp_path / "future.safetensors"
    save_file(load_file(str(path)), str(other), metadata={"dmocli": json.dumps(meta)})
    with pytest.raises(DmoError, match="format version"):
        load_model(other)


def test_a_linear_record_leaves_the_mlp_fields_out_and_reads_back():
    from dmocli.models.architecture import Architecture

    linear = Architecture("linear", 5, 1)
    assert linear.to_dict() == {"kind": "linear", "n_inputs": 5, "n_outputs": 1}
    assert Architecture.from_dict(linear.to_dict()) == linear
    older = {"kind": "linear", "n_inputs": 5, "n_outputs": 1, "width": 100, "depth": 2, "batchnorm": True}
    assert Architecture.from_dict(older) == linear  # a file written before this change
    mlp = Architecture("mlp", 5, 1, width=8, depth=3)
    assert Architecture.from_dict(mlp.to_dict()) == mlp and mlp.to_dict()["width"] == 8
    assert "members" not in mlp.to_dict()  # one network: files read as before ensembles
    ensemble = Architecture("linear", 5, 1, members=4)
    assert ensemble.to_dict()["members"] == 4 and Architecture.from_dict(ensemble.to_dict()) == ensemble
    with pytest.raises(DmoError, match="at least 1"):
        Architecture.from_dict({"kind": "linear", "n_inputs": 5, "n_outputs": 1, "members": 0})

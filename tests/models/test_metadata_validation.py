"""Every metadata entry a command reads (the header's and `info`'s) is checked on load (models/file_checks.py):
each is set to a wrong type, an out-of-range value or left without a key it needs, and every command that loads a
model (info, info --features, monitor, threshold, predict, evaluate) exits 2 with one line naming the entry; never
exit 1 (a crash half-way) or 4 (out of memory), never a made-up figure (issue 45, hostile 13)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import make_binary_frame, run_dmo
from safetensors.numpy import save_file

from dmocli.models import modelfile
from dmocli.pipelines.report_parts import CandidateModel, ModelSelectionSection

DELETE = object()  # the entry is removed


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """A linear model moved by `dmo threshold --prior` (its info holds every entry a file can: seed, params, rows,
    summary, calibration, adapted, heldout, profile), given a --model auto section built by the classes that write
    it, and the data the commands read."""
    root = tmp_path_factory.mktemp("metadata")
    frame = make_binary_frame(n=400, seed=3)
    frame.to_parquet(root / "data.parquet")
    frame.drop(columns="label").to_parquet(root / "new.parquet")
    run_dmo("train", root / "data.parquet", "--problem", "ofbs", "--cv", "2", "-o", root / "lin.st", check=True)
    run_dmo("threshold", root / "lin.st", "--prior", "0.3", "-o", root / "adapted.st", check=True)
    selection = ModelSelectionSection(
        rule="the better out-of-fold objective",
        candidates=(
            CandidateModel(model="linear", objective=0.61, feasible=True, threshold=-1.2),
            CandidateModel(model="gbdt", objective=0.58, feasible=True, threshold=-0.9),
        ),
        chosen="linear",
        confidence=0.9,
        confidence_per_candidate=0.95,
    ).to_dict()
    edited(root / "adapted.st", root / "base.st", ("info", "model_selection"), selection["model_selection"])
    return {"base": root / "base.st", "data": root / "data.parquet", "new": root / "new.parquet", "root": root}


def edited(source: Path, target: Path, path: tuple[Any, ...], value: Any) -> Path:
    """`source` with the metadata entry at `path` (keys and list indices) set to `value` (or removed)."""
    stored = modelfile.read_model_file(source)
    meta = json.loads(json.dumps(stored.metadata))
    *parents, last = path
    holder = meta
    for key in parents:
        holder = holder[key]
    if value is DELETE:
        del holder[last]
    else:
        holder[last] = value
    save_file(dict(stored.tensors), str(target), metadata={modelfile.METADATA_KEY: json.dumps(meta)})
    return target


def commands(model: Path, files: dict[str, Path]) -> dict[str, list[Any]]:
    out = files["root"]
    return {
        "info": ["info", model],
        "info --features": ["info", model, "--features"],
        "monitor": ["monitor", model, files["new"]],
        "threshold": ["threshold", model, "--problem", "fpor", "--target", "0.5", "-o", out / "t.st"],
        "predict": ["predict", model, files["data"], "-o", out / "p.parquet"],
        "evaluate": ["evaluate", model, files["data"]],
    }


def test_the_base_file_is_taken_by_every_command(dmo, files):
    """The mutations below start from a file every command takes, whose `dmo info` shows each section."""
    for name, args in commands(files["base"], files).items():
        code, out, err = dmo(*args)
        assert code == 0, (name, err)
        if name == "info":
            assert "adapted: to the positive rate 0.3000" in out and "model auto: linear" in out


PROFILE_X0 = ("info", "profile", "numeric", "f0")
MUTATIONS: list[tuple[tuple[Any, ...], Any, str]] = [
    (("target",), "x", "target"),
    (("target",), 2, "target is 2"),
    (("beta",), -1, "beta is -1"),
    (("solver",), 5, "solver is int"),
    (("decision_rule",), 5, "decision_rule is int"),
    (("dmocli_version",), 5, "dmocli_version is int"),
    (("labels", "column"), 5, "labels.column is int"),
    (("labels", "trim_text"), "no", "labels.trim_text is str"),
    (("labels", "counts"), "x", "labels.counts is str"),
    (("labels", "counts"), [10**400, 1], "labels.counts[0]"),
    (("labels", "counts"), [1], "labels.counts has 1 counts for 2 classes"),
    (("preprocessing", "impute"), 5, "preprocessing.impute is 5"),
    (("info",), "text", "info is"),
    (("info", "seed"), "zero", "info.seed"),
    (("info", "seed"), 1.5, "info.seed"),
    (("info", "confidence"), 1.5, "info.confidence"),
    (("info", "confidence"), "high", "info.confidence"),
    (("info", "confidence"), 0, "info.confidence"),
    (("info", "new_rows"), 0, "info.new_rows"),
    (("info", "new_rows"), 2.5, "info.new_rows"),
    (("info", "new_rows"), 10**400, "info.new_rows"),
    (("info", "certified"), "yes", "info.certified"),
    (("info", "params"), [1], "info.params"),
    (("info", "rows"), -1, "info.rows"),
    (("info", "rows"), "400", "info.rows"),
    (("info", "rows"), 10**400, "info.rows"),
    (("info", "epochs"), -2, "info.epochs"),
    (("info", "threshold_fitted_on"), 5, "info.threshold_fitted_on"),
    (("info", "summary"), [], "info.summary"),
    (("info", "summary", "data"), 3, "info.summary.data"),
    (("info", "summary", "data", "precision"), "high", "info.summary.data.precision"),
    (("info", "calibration", "fitted_on"), DELETE, "info.calibration lacks fitted_on"),
    (("info", "calibration", "method"), 3, "info.calibration.method"),
    (("info", "adapted"), {}, "info.adapted lacks new_rate, training_rate, old_threshold"),
    (("info", "adapted"), "moved", "info.adapted"),
    (("info", "adapted", "new_rate"), 2, "info.adapted.new_rate"),
    (("info", "adapted", "training_rate"), DELETE, "info.adapted lacks training_rate"),
    (("info", "adapted", "old_threshold"), "x", "info.adapted.old_threshold"),
    (("info", "adapted", "carried"), "moved", "info.adapted.carried"),
    (("info", "adapted", "carried"), "share", "info.adapted.expected_share"),
    (("info", "adapted", "expected_share"), 1.5, "info.adapted.expected_share"),
    (("info", "model_selection"), {}, "info.model_selection lacks rule"),
    (("info", "model_selection", "candidates"), "x", "info.model_selection.candidates"),
    (("info", "model_selection", "candidates", 0), {"model": "linear"}, "info.model_selection.candidates[0] lacks"),
    (("info", "model_selection", "candidates", 0, "objective"), "x", "candidates[0].objective"),
    (("info", "model_selection", "chosen"), "mlp", "info.model_selection.chosen 'mlp' is none of its candidates"),
    (("info", "model_selection", "confidence"), 2, "info.model_selection.confidence"),
    (("info", "model_selection", "rule"), DELETE, "info.model_selection lacks rule"),
    ((*PROFILE_X0, "counts", 0), 10**400, "info.profile.numeric.f0.counts[0]"),
    ((*PROFILE_X0, "counts", 0), 1.5, "drift profile (info.profile) is malformed: profile counts must be non-negative"),
    ((*PROFILE_X0, "missing"), -1, "drift profile (info.profile) is malformed: profile counts must be non-negative"),
    ((*PROFILE_X0, "missing"), 2**53 + 1, "info.profile.numeric.f0.missing is about 2**54"),
    ((*PROFILE_X0, "counts"), None, "drift profile (info.profile) is malformed"),
    (("info", "profile", "score", "counts", 1), 10**400, "info.profile.score.counts[1]"),
    (("info", "profile", "numeric"), [], "drift profile (info.profile) is malformed"),
    (("info", "heldout", "rows"), 401, "info.heldout says 401 rows and 54 positives, its curve counts 400 and 54"),
    (("info", "heldout", "positives"), 10**12, "its curve counts 400 and 54"),
    (("info", "heldout", "positives"), -1, "info.heldout.positives"),
    (("info", "heldout", "rows"), DELETE, "info.heldout lacks rows"),
    (("info", "heldout", "certified_rows"), 0, "info.heldout.certified_rows"),
    (("info", "heldout"), None, "info.heldout is NoneType"),
]


@pytest.mark.parametrize(
    "path, value, named", MUTATIONS, ids=[f"{'.'.join(map(str, m[0]))}={m[1]!r:.12}" for m in MUTATIONS]
)
def test_a_malformed_info_entry_is_one_line_and_exit_2_in_every_command(dmo, files, tmp_path, path, value, named):
    model = edited(files["base"], tmp_path / "bad.st", path, value)
    for name, args in commands(model, files).items():
        code, out, err = dmo(*args)
        assert code == 2, (name, code, err)
        assert err.count("\n") == 1 and "corrupt or inconsistent dmo metadata" in err, (name, err)
        assert named in err, (name, err)

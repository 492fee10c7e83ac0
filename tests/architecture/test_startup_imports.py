"""Commands that need no tensors start without torch, and a linear or gbdt model scores to the same bits either way.

Importing torch took most of a `dmo info` call (4.9 of 6.2 s on a loaded machine, issue 45). What a fresh
interpreter imports is the point, so each command runs in a new process and reports whether `torch` reached
`sys.modules`; the models are trained once per module, on small generated data. A loaded linear or gbdt model
scores in numpy (models/stored_network.py): the second half checks, in this process, that its logits and the
CSV `dmo predict` writes are the bits of the torch path (`model.module()`, the network training scored with), and
that a row's logit does not depend on the rows scored with it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import make_binary_frame, make_gaussian_classes, run_dmo

PROBE = """
import sys
sys.argv = ["dmo", *sys.argv[1:]]
from dmocli.cli.entry import main
try:
    main()
    code = 0
except SystemExit as ended:
    code = ended.code
sys.stderr.write(f"\\nexit={code} torch={'torch' in sys.modules}\\n")
"""

LIBRARY = """
import sys
import dmocli
import pandas as pd
model, data = sys.argv[1:]
dmocli.load_model(model)
frame = dmocli.predict(model, pd.read_csv(data).drop(columns="label"))
report = dmocli.evaluate(model, data)
assert len(frame) and report["splits"]
print("torch" in sys.modules)
"""

MODELS = {  # name -> dmo train options: the default --cv ensembles, a single network, a multi-class one
    "linear": ["--problem", "fpor", "--target", "0.5"],
    "gbdt": ["--problem", "fpor", "--target", "0.5", "--model", "gbdt", "--param", "rounds=20"],
    "linear-single": ["--problem", "fpor", "--target", "0.5", "--cv", "0"],
    "linear-3-class": [],
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    """Binary data (numbers and a text column) and a 3-class table, as CSV, and a model of each kind of MODELS."""
    work = tmp_path_factory.mktemp("startup")
    binary = make_binary_frame(n=400, d=4, seed=3)
    binary.insert(2, "kind", np.asarray(["a", "b", "c"], dtype=object)[np.arange(len(binary)) % 3])
    binary.to_csv(work / "binary.csv", index=False)
    make_gaussian_classes(300, seed=3, d=5).to_csv(work / "classes.csv", index=False)
    paths = {"binary": work / "binary.csv", "classes": work / "classes.csv"}
    for name, options in MODELS.items():
        data = paths["classes" if name == "linear-3-class" else "binary"]
        paths[name] = work / f"{name}.safetensors"
        run_dmo("train", data, *options, "-o", paths[name], check=True)
    return paths


def _probe(*args: str | Path, cwd: Path) -> tuple[int, bool, str]:
    """(exit status, whether torch was imported, stderr) of `dmo ARGS` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    last = done.stderr.strip().splitlines()[-1]
    code, torch = (part.split("=", 1)[1] for part in last.split())
    return int(code), torch == "True", done.stderr


COMMANDS = {
    "version": lambda p: ["--version"],
    "info linear": lambda p: ["info", p["linear"]],
    "info gbdt": lambda p: ["info", p["gbdt"]],
    "check": lambda p: ["check", p["binary"]],
    "check --solver ero": lambda p: ["check", p["binary"], "--solver", "ero", "--problem", "fpor", "--target", "0.5"],
    "solvers": lambda p: ["solvers", "--json"],
    "threshold linear": lambda p: ["threshold", p["linear"], "--problem", "fpor", "--target", "0.4", "-o", "t.st"],
    "threshold gbdt": lambda p: ["threshold", p["gbdt"], "--problem", "frop", "--target", "0.6", "-o", "g.st"],
    "predict linear": lambda p: ["predict", p["linear"], p["binary"], "-o", "p.csv"],
    "predict linear --explain": lambda p: ["predict", p["linear"], p["binary"], "--explain", "2", "-o", "x.csv"],
    "predict linear 3-class": lambda p: ["predict", p["linear-3-class"], p["classes"], "-o", "c.csv"],
    "predict gbdt": lambda p: ["predict", p["gbdt"], p["binary"], "-o", "g.parquet"],
    "evaluate linear": lambda p: ["evaluate", p["linear"], p["binary"]],
    "evaluate gbdt": lambda p: ["evaluate", p["gbdt"], p["binary"]],
    "monitor linear": lambda p: ["monitor", p["linear"], p["binary"]],
    "monitor gbdt": lambda p: ["monitor", p["gbdt"], p["binary"]],
    "report linear": lambda p: ["report", p["linear"], "-o", "linear.html"],  # its importance and explanation
    "report gbdt": lambda p: ["report", p["gbdt"], "-o", "gbdt.html"],
    "info linear --features": lambda p: ["info", p["linear"], "--features"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_command_starts_without_torch(command, trained, tmp_path):
    code, torch, stderr = _probe(*COMMANDS[command](trained), cwd=tmp_path)
    assert code == 0, stderr
    assert not torch, f"`dmo {command}` imported torch"


def test_an_mlp_model_still_imports_torch_to_score(trained, tmp_path):
    """The probe sees an import where there is one: an mlp scores through torch."""
    model = tmp_path / "mlp.safetensors"
    run_dmo("train", trained["binary"], "--model", "mlp", "--param", "max-epochs=2", "-o", model, check=True)
    code, torch, stderr = _probe("predict", model, trained["binary"], "-o", "p.csv", cwd=tmp_path)
    assert code == 0 and torch, stderr


@pytest.mark.parametrize("name", ["linear", "gbdt"])
def test_the_library_loads_predicts_and_evaluates_without_torch(name, trained, tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", LIBRARY, str(trained[name]), str(trained["binary"])],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False", f"dmocli.load_model/predict/evaluate of a {name} model imported torch"


def _torch_logits(path: Path, rows: list[np.ndarray]) -> list[np.ndarray]:
    """The torch path: the model's torch module (as training holds it) through networks.logits_of, per batch."""
    import torch

    from dmocli.models.modelfile import load_model
    from dmocli.models.networks import logits_of

    network = load_model(path).module()
    return [logits_of(network, torch.from_numpy(np.ascontiguousarray(batch))).float().numpy() for batch in rows]


@pytest.mark.parametrize("name", list(MODELS))
def test_numpy_scoring_gives_the_bits_of_the_torch_path(name, trained, tmp_path):
    from dmocli.models.modelfile import load_model
    from dmocli.models.stored_network import StoredNetwork
    from dmocli.use.predict import predict

    data = trained["classes" if name == "linear-3-class" else "binary"]
    model = load_model(trained[name])
    assert isinstance(model.network, StoredNetwork)
    features, _ = model.preprocessor.transform(pa.Table.from_pandas(pd.read_csv(data)))
    numpy_logits = model.logits_of_features(features)
    assert isinstance(model.network, StoredNetwork)  # scored without building torch layers
    (torch_logits,) = _torch_logits(trained[name], [features])
    assert numpy_logits.dtype == torch_logits.dtype == np.float32
    assert numpy_logits.tobytes() == torch_logits.tobytes()
    # the CSV dmo predict writes (numpy) is byte for byte the one of the same model scored by torch
    run_dmo("predict", trained[name], data, "-o", tmp_path / "numpy.csv", check=True)
    on_torch = load_model(trained[name])
    on_torch.module()
    predict(on_torch, data, tmp_path / "torch.csv")
    assert (tmp_path / "numpy.csv").read_bytes() == (tmp_path / "torch.csv").read_bytes()
    if model.binary:  # and it holds the logits above, written so that they read back to the same float32
        written = pd.read_csv(tmp_path / "numpy.csv")["logit"].to_numpy(dtype=np.float32)
        assert written.tobytes() == torch_logits.tobytes()


@pytest.mark.parametrize("name", ["linear", "linear-single", "linear-3-class"])
def test_a_rows_logit_does_not_depend_on_the_rows_scored_with_it(name, trained):
    """torch's float32 matmul summed in an order that changed with the batch (scored alone, 93 of 200 rows
    differed in the last bit); a linear layer's logit is now a function of its row, on either path."""
    from dmocli.models.modelfile import load_model

    data = trained["classes" if name == "linear-3-class" else "binary"]
    model = load_model(trained[name])
    features, _ = model.preprocessor.transform(pa.Table.from_pandas(pd.read_csv(data).head(60)))
    features = np.ascontiguousarray(features)
    together = model.logits_of_features(features)
    alone = np.concatenate([model.logits_of_features(features[i : i + 1]) for i in range(len(features))])
    assert alone.tobytes() == together.tobytes()
    torch_alone = np.concatenate(_torch_logits(trained[name], [features[i : i + 1] for i in range(len(features))]))
    assert torch_alone.tobytes() == together.tobytes()

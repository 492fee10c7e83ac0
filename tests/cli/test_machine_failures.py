"""Failures of the machine (disk full, file-size limit, memory): one line naming the cause and what to do, exit 4,
and no output left behind that the others do not match (issue 33). A closed stdout is no machine failure: its
reader went away (tests/cli/test_closed_stdout.py).

The tests with a device as stdout, a closed pipe or a resource limit start `dmo` for real, as those are the point;
a full disk named as an output file fails the same in this process (run_dmo), without a process's start-up.
"""

from __future__ import annotations

import errno
import json
import resource
import subprocess
from pathlib import Path

import pytest
from conftest import dmo_command, make_binary_frame, run_dmo

from dmocli.cli.machine_failures import MACHINE_FAILURE, OUT_OF_MEMORY, machine_failure
from dmocli.data.outputs import atomic_path, outputs_together
from dmocli.errors import DmoError, UnreachableTarget


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("machine") / "data.parquet"
    make_binary_frame(n=300, seed=1).to_parquet(path)
    return path


@pytest.fixture(scope="module")
def model(data, tmp_path_factory) -> Path:
    """A model for the commands that read one, trained once in this process: its training is not the point."""
    path = tmp_path_factory.mktemp("machine") / "m.st"
    run_dmo("train", data, "--problem", "ofbs", "-o", path, check=True)
    return path


def run(args: list, stdout=subprocess.PIPE, limits: dict[int, int] | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        for kind, value in (limits or {}).items():
            resource.setrlimit(kind, (value, value))

    return subprocess.run(
        [*dmo_command(), *map(str, args)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
        preexec_fn=limit,
    )


def assert_machine_failure(proc: subprocess.CompletedProcess, words: str) -> None:
    assert proc.returncode == MACHINE_FAILURE, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_model_written_to_a_full_disk(data):
    assert_machine_failure(run_dmo("train", data, "--problem", "ofbs", "-o", "/dev/full"), "no space left")


def test_a_report_to_a_full_disk_leaves_no_model(data, tmp_path):
    proc = run_dmo("train", data, "--problem", "ofbs", "-o", tmp_path / "m.st", "--report", "/dev/full")
    assert_machine_failure(proc, "no space left")
    assert not (tmp_path / "m.st").exists()


# The process tests that train use the streaming solver fofo: it starts in under a second where wce's process takes
# four (torch, its optimizers and scikit-learn are imported), and the model, report and --json output go through
# the same writers (process.py's outputs_together, atomic_path) whichever solver trained.
FAST = ["--problem", "ofbs", "--solver", "fofo"]


def test_train_json_to_a_full_stdout_leaves_no_model_and_keeps_the_old_one(data, tmp_path):
    model = tmp_path / "m.st"
    model.write_bytes(b"the model of yesterday")
    with open("/dev/full", "w") as full:
        proc = run(["train", data, *FAST, "-o", model, "--report", tmp_path / "r.json", "--json"], full)
    assert_machine_failure(proc, "no space left")
    assert model.read_bytes() == b"the model of yesterday" and not (tmp_path / "r.json").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["m.st"]  # no temporary file left either


def test_info_json_to_a_full_stdout(model):
    with open("/dev/full", "w") as full:
        assert_machine_failure(run(["info", model, "--json"], full), "no space left")


def test_a_file_size_limit(data, tmp_path):
    proc = run(["train", data, *FAST, "-o", tmp_path / "m.st"], limits={resource.RLIMIT_FSIZE: 512})  # 5 KB model
    assert_machine_failure(proc, "file-size limit")
    assert list(tmp_path.iterdir()) == []


def test_out_of_memory_names_the_ways_out(data, tmp_path):
    """An MLP far larger than the memory the process may take (2.5 GB of address space)."""
    args = ["train", data, "--problem", "ofbs", "--model", "mlp", "--width", "4000", "--depth", "20", "--cv", "0"]
    proc = run([*args, "-o", tmp_path / "m.st"], limits={resource.RLIMIT_AS: 2_500_000_000})
    assert_machine_failure(proc, "out of memory")
    assert "--solver fofo" in proc.stderr and "dmo subsample" in proc.stderr


def test_the_causes_are_found_through_wrapping_exceptions():
    full = OSError(errno.ENOSPC, "No space left on device")
    try:
        try:
            raise full
        except OSError as exc:
            raise RuntimeError("writing the model failed") from exc
    except RuntimeError as wrapped:
        assert "no space left" in machine_failure(wrapped)
    assert "file-size limit" in machine_failure(Exception("Error while serializing: File too large (os error 27)"))
    assert machine_failure(MemoryError()) == OUT_OF_MEMORY
    assert machine_failure(RuntimeError("DefaultCPUAllocator: can't allocate memory")) == OUT_OF_MEMORY
    assert machine_failure(ValueError("a bug")) is None
    assert machine_failure(OSError(errno.ENOENT, "No such file")) is None


def test_outputs_together_renames_all_or_none(tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("old")
    with pytest.raises(DmoError):
        with outputs_together():
            with atomic_path(first) as tmp:
                tmp.write_text("new")
            assert first.read_text() == "old"  # held back until the whole block succeeds
            raise DmoError("the second output failed")
    assert first.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
    with outputs_together():
        for path in (first, second):
            with atomic_path(path) as tmp:
                tmp.write_text(json.dumps(path.name))
    assert json.loads(first.read_text()) == "a.txt" and json.loads(second.read_text()) == "b.txt"


def test_a_refused_target_still_writes_its_report(tmp_path):
    report = tmp_path / "r.json"
    with pytest.raises(UnreachableTarget):
        with outputs_together():
            with atomic_path(report) as tmp:
                tmp.write_text("{}")
            raise UnreachableTarget("not reachable")
    assert report.read_text() == "{}"

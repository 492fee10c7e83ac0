"""Where outputs go and which files a DATA folder holds, as shell users and cluster jobs lay them out:
links, named pipes, SIGTERM half-way, Spark's leftovers."""

from __future__ import annotations

import io as stdio
import os
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import dmo_command, make_binary_frame, run_dmo

from dmocli import predict, train
from dmocli.data import outputs, reading, sources
from dmocli.errors import DmoError
from dmocli.options import TrainOptions


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("model")
    data = root / "data.parquet"
    make_binary_frame(n=300).to_parquet(data)
    train(data, TrainOptions(), output=root / "m.safetensors")
    return root / "m.safetensors", data


def test_an_output_link_keeps_the_link_and_replaces_its_target(model, tmp_path):
    trained, data = model
    target, link = tmp_path / "target.parquet", tmp_path / "link.parquet"
    target.write_text("old")
    link.symlink_to(target)
    predict(trained, data, link)
    assert link.is_symlink() and pq.read_table(target).num_rows == 300


def test_a_named_pipe_is_written_into_not_replaced(model, tmp_path):
    trained, data = model
    pipe = tmp_path / "scores"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()))
    reader.start()
    run_dmo("predict", trained, data, "-o", pipe, check=True)
    reader.join(timeout=60)
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)
    assert pq.read_table(stdio.BytesIO(received[0])).num_rows == 300


@pytest.mark.parametrize("stop, word", [(signal.SIGTERM, "terminated"), (signal.SIGINT, "interrupted")])
def test_a_stop_half_way_leaves_no_temporary_file_and_says_so(model, tmp_path, stop, word):
    """SIGTERM (a scheduler, `timeout`) exits 143, Ctrl-C 130, each with one line (typer had ended a Ctrl-C'd
    command silently)."""
    trained, _ = model
    big = tmp_path / "big.parquet"
    make_binary_frame(n=1_500_000).to_parquet(big, row_group_size=50_000)
    out = tmp_path / "out" / "scores.parquet"
    out.parent.mkdir()
    proc = subprocess.Popen(
        [*dmo_command(), "predict", str(trained), str(big), "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_stop_signals,
    )
    deadline = time.monotonic() + 120
    while not any(out.parent.iterdir()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "predict ended before its output was opened; use more rows"
    proc.send_signal(stop)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + stop and stderr.strip() == f"dmo: {word}"
    assert list(out.parent.iterdir()) == []


def _default_stop_signals() -> None:
    """The child starts with Ctrl-C and SIGTERM at their default disposition: a suite run in the background or
    under nohup has SIGINT ignored, the child would inherit that, and Python would then never see the Ctrl-C this
    test sends (the case a user's terminal gives)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _write(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path)


def test_a_data_folder_skips_hidden_and_temporary_files_and_follows_linked_folders(tmp_path):
    frame = make_binary_frame(n=100)
    root = tmp_path / "events"
    _write(frame, root / "part-0.parquet")
    _write(frame, root / "_temporary" / "0" / "_temporary" / "attempt_1" / "part-0.parquet")  # Spark's leftovers
    _write(frame.iloc[:10], root / ".part-1.parquet")
    _write(frame.iloc[:30], tmp_path / "elsewhere" / "part-2.parquet")
    (root / "more").symlink_to(tmp_path / "elsewhere")
    (root / "loop").symlink_to(root)  # read once, not forever
    assert [Path(p).relative_to(root).as_posix() for p in sources.parquet_files(root)] == [
        "more/part-2.parquet",
        "part-0.parquet",
    ]
    assert reading.count_rows(root) == 130
    (root / "gone.parquet").symlink_to(tmp_path / "missing.parquet")
    with pytest.raises(DmoError, match="gone.parquet is a link to a file that does not exist"):
        sources.parquet_files(root)


@pytest.mark.parametrize("name", ["scores.csv", "scores.csv.gz", "scores.tsv"])
def test_predict_writes_csv_where_the_output_is_named_so(model, tmp_path, name):
    import pyarrow.csv as pacsv

    trained, data = model
    predict(trained, data, tmp_path / "scores.parquet")
    predict(trained, data, tmp_path / name)
    parse = pacsv.ParseOptions(delimiter="\t" if name.endswith(".tsv") else ",")
    written = pacsv.read_csv(tmp_path / name, parse_options=parse)
    expected = pq.read_table(tmp_path / "scores.parquet")
    assert written.column_names == expected.column_names and written.num_rows == 300
    assert written.column("decision").to_pylist() == expected.column("decision").to_pylist()


def test_outputs_named_as_another_kind_of_file_are_refused(model, tmp_path):
    trained, data = model
    proc = run_dmo("train", data, "-o", tmp_path / "m.parquet")
    assert proc.returncode == 2 and "name it MODEL.safetensors" in proc.stderr
    proc = run_dmo("subsample", data, "--gamma", "2", "-o", tmp_path / "s.csv")
    assert proc.returncode == 2 and "name it .parquet" in proc.stderr
    proc = run_dmo("evaluate", trained, data, "--plot", tmp_path / "pr.txt")
    assert proc.returncode == 2 and proc.stderr.strip() == (
        f"dmo: error: --plot {tmp_path / 'pr.txt'} is drawn as a PNG image; name it with .png (e.g. pr.png)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_pipe_reader_gets_no_readable_file_from_a_failed_run(model, tmp_path):
    trained, data = model
    folder = tmp_path / "two"
    folder.mkdir()
    frame = pd.read_parquet(data)
    frame.to_parquet(folder / "a.parquet")
    frame.assign(f0=frame["f0"].where(frame.index != 5)).to_parquet(
        folder / "b.parquet"
    )  # a NaN feature: refused half-way
    pipe = tmp_path / "scores.parquet"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()))
    reader.start()
    proc = run_dmo("predict", trained, folder, "-o", pipe)
    reader.join(timeout=60)
    assert proc.returncode == 2 and "missing or infinite" in proc.stderr
    with pytest.raises(Exception):  # the rows of a.parquet went out, but never the footer that makes them a file
        pq.read_table(stdio.BytesIO(received[0]))


def test_a_pipe_whose_reader_leaves_is_one_line(model, tmp_path):
    trained, _ = model
    big = tmp_path / "big.parquet"
    make_binary_frame(n=1_000_000).to_parquet(big, row_group_size=50_000)
    pipe = tmp_path / "scores.parquet"
    os.mkfifo(pipe)

    def read_a_little() -> None:
        with open(pipe, "rb") as stream:
            stream.read(100)

    reader = threading.Thread(target=read_a_little)
    reader.start()
    proc = run_dmo("predict", trained, big, "-o", pipe)
    reader.join(timeout=60)
    assert (
        proc.returncode == 2
        and proc.stderr.strip() == f"dmo: error: the reader of -o {pipe} closed it before the output was complete"
    )


def test_outputs_that_must_be_directories_or_files_refuse_a_pipe(model, tmp_path):
    from dmocli.extract import ExtractOptions, extract

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(DmoError, match="is a device or pipe"):
        outputs.check_parts_output(pipe, {})
    with pytest.raises(DmoError, match="is a device or pipe"):
        extract(tmp_path, pipe, ExtractOptions(kind="image", model=str(tmp_path / "none")))
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)


def test_an_output_where_no_file_can_be_created_is_refused_before_training(model, tmp_path):
    """/proc passes root's permission checks yet takes no new file: refused up front (exit 2, one line), not
    after the training it would waste; a writable folder keeps no trace of the check."""
    _, data = model
    proc = run_dmo("train", data, "-o", "/proc/m.safetensors")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "/proc" in proc.stderr
    assert "choose a writable output path" in proc.stderr
    run_dmo("train", data, "-o", tmp_path / "m.safetensors", check=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


def test_an_output_inside_a_file_is_called_that_not_a_missing_folder(model, tmp_path):
    _, data = model
    (tmp_path / "gen.py").write_text("print('a script')\n")
    proc = run_dmo("train", data, "-o", tmp_path / "gen.py" / "m.safetensors")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "gen.py is a file, not a directory" in proc.stderr and "does not exist" not in proc.stderr
    assert (tmp_path / "gen.py").read_text() == "print('a script')\n"


class _Stopped(Exception):
    pass


def test_a_stop_inside_the_file_creating_lines_is_held_until_they_end():
    """The stop comes from another thread while the main thread is inside the held block (the kernel may hand a
    process's signal to any thread, and Python then runs the handler in the main thread at once): the handler
    must run only when the block ends, and exactly once."""

    def stopped(signum, frame):
        raise _Stopped(signum)

    go = threading.Event()

    def send() -> None:  # a thread started before the block, as pyarrow's and OpenMP's are, with their own masks
        go.wait()
        os.kill(os.getpid(), signal.SIGTERM)
        until = time.monotonic() + 0.3
        while time.monotonic() < until:  # the GIL handed back and forth, as the main thread notices a signal then
            pass

    previous = signal.signal(signal.SIGTERM, stopped)
    sender = threading.Thread(target=send)
    sender.start()
    try:
        with pytest.raises(_Stopped):
            with outputs._stops_deferred():
                go.set()
                deadline = time.monotonic() + 0.5
                while time.monotonic() < deadline:  # bytecodes run: a handler not held would fire here
                    pass
                reached_the_end = True
        sender.join()
        assert reached_the_end
        assert signal.getsignal(signal.SIGTERM) is stopped  # the user's handler is back
    finally:
        signal.signal(signal.SIGTERM, previous)

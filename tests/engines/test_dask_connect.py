"""`--scheduler` addresses that are no working scheduler: a real `dmo` process must say so in one line and end.

Subprocesses, because process exit is the point: a listener that accepts and stays silent once left the
connect thread waiting for ever, and the interpreter joined it at exit. Loopback addresses only.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import dmo_command, make_binary_frame

from dmocli import TrainOptions, train
from dmocli.errors import DmoError

pytest.importorskip("distributed")

from dmocli.engines.dask_cluster import CONNECT_SECONDS, _connect  # noqa: E402 - needs distributed

# Starting and ending a dmo process (torch, distributed): up to 17 s on a 2-core machine under load. The refused
# case is also timed in-process, where it must end within 2 s.
STARTUP_SECONDS = 30


@pytest.fixture(scope="module")
def model_and_data(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("connect")
    data = folder / "data.parquet"
    make_binary_frame(300, seed=1).to_parquet(data)
    model = folder / "m.safetensors"
    train(data, TrainOptions(problem="ofbs", cv=0), output=model)
    return model, data


class SilentListener:
    """A TCP port on 127.0.0.1 that accepts every connection, holds it open and never sends a byte."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"tcp://127.0.0.1:{self.server.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.accepted = threading.Semaphore(0)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.held.append(self.server.accept()[0])
            except OSError:  # closed by close()
                return
            self.accepted.release()

    def close(self) -> None:
        self.server.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent() -> Iterator[SilentListener]:
    listener = SilentListener()
    yield listener
    listener.close()


def _refused_address() -> str:
    """A loopback port that was just free: nothing listens there, so a connect is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{sock.getsockname()[1]}"


def _predict(model_and_data: tuple[Path, Path], scheduler: str, tmp_path: Path) -> list[str]:
    model, data = model_and_data
    return [
        *dmo_command(),
        *("predict", str(model), str(data), "-o", str(tmp_path / "out.parquet")),
        *("--engine", "dask", "--scheduler", scheduler),
    ]


def _run_timed(args: list[str], limit: float) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=limit)
    return proc, time.monotonic() - start


def test_a_silent_scheduler_is_one_error_after_the_connect_limit_and_the_process_exits(
    model_and_data, silent, tmp_path
):
    proc, seconds = _run_timed(_predict(model_and_data, silent.address, tmp_path), CONNECT_SECONDS + 60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"dmo: error: cannot reach the Dask scheduler {silent.address!r}: no answer like a Dask scheduler's within "
        f"{CONNECT_SECONDS} s (check --scheduler ADDRESS; a scheduler listens on port 8786 by default)"
    ]
    assert CONNECT_SECONDS <= seconds < CONNECT_SECONDS + STARTUP_SECONDS
    assert not (tmp_path / "out.parquet").exists()


def test_a_refused_port_is_reported_as_refused_without_waiting(model_and_data, tmp_path):
    address = _refused_address()
    proc, seconds = _run_timed(_predict(model_and_data, address, tmp_path), CONNECT_SECONDS + 60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"dmo: error: cannot reach the Dask scheduler {address!r}: connection refused")
    assert seconds < STARTUP_SECONDS  # process start and end only: distributed had retried it for 30 s
    start = time.monotonic()
    with pytest.raises(DmoError, match="connection refused"):
        _connect(address)
    assert time.monotonic() - start < 2


def test_sigterm_during_the_silent_wait_is_one_line_and_exit_143(model_and_data, silent, tmp_path):
    proc = subprocess.Popen(
        _predict(model_and_data, silent.address, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),  # as a batch scheduler's job starts
    )
    try:
        assert silent.accepted.acquire(timeout=STARTUP_SECONDS + CONNECT_SECONDS), "dmo never connected"
        time.sleep(1)  # past a first probing connection: dmo now waits for the handshake that never comes
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=STARTUP_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM and stderr.strip() == "dmo: terminated"

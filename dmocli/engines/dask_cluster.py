"""The Dask engine of the row-parallel passes (`subsample`, and the scored pass of scoring/scored_pass.py:
`evaluate`, `threshold`, `predict`, `monitor`): the same per-partition work as the local engine, over a cluster.

Optional (`pip install 'dmocli[dask]'`). One partition is one parquet file,
in the local engine's order, read by a worker through the same layout
(dmocli.data.parquet_layout: hive folders, types unified across files, pandas
index columns as plain columns), so every partition holds exactly the rows
and types the local engine reads; Dask's own parquet reader would re-type
hive folders ("007" as 7) and re-order files ("part10" before "part2").
Partitions that travel as pandas frames (`write`, dask.dataframe's
map_partitions) use arrow-backed columns, which convert back losslessly.

The per-partition worker (a pilot, a model) travels once, as one task that
every partition task depends on (a broadcast). A pass that writes rows has
each partition write its own part file and return only its counts; the
output is a directory of parquet parts, renamed into place when every part
succeeded, so it must be on a file system the workers share with the client
(as the data must be).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import threading
import uuid
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dmocli import progress
from dmocli.data import outputs, sources
from dmocli.data.parquet_layout import ParquetLayout, conform, parquet_layout
from dmocli.errors import DmoError, first_line

# Reaching a scheduler, per attempt: TCP, distributed's handshake (which distributed itself waits for without a
# limit: an address that accepts and stays silent held the process for ever) and the client's registration.
CONNECT_SECONDS = 12
PROBE_SECONDS = 5  # a TCP connect to the scheduler's port: a refusal is immediate, a dropped connection never answers
PROBED_SCHEMES = ("tcp", "tls")  # TCP underneath: a plain connect to the port tells refused from listening


def _one_thread() -> None:
    """Dask already runs one task per worker thread; torch's own threads on top would oversubscribe the cores."""
    import torch

    torch.set_num_threads(1)


def _read(entry: tuple[str, str], layout: ParquetLayout, columns: list[str] | None) -> pa.Table:
    """One file (its name in the layout, its absolute path for a worker in another directory) as the local
    engine reads it."""
    name, path = entry
    table = pq.ParquetFile(path, pre_buffer=False).read(columns=layout.file_columns(columns))
    return layout.adapt(table, name, columns)


def _read_frame(entry: tuple[str, str], layout: ParquetLayout, columns: list[str] | None) -> pd.DataFrame:
    """The file as an arrow-backed frame; its pandas metadata ignored, so a stored index stays a column, as
    the local engine reads it."""
    return _read(entry, layout, columns).to_pandas(types_mapper=pd.ArrowDtype, ignore_metadata=True)


def _arrow(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """A partition frame back as arrow, in the layout's order and types (arrow-backed columns: lossless)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    names = [name for name in schema.names if name in table.schema.names]
    return pa.Table.from_arrays(
        [conform(table.column(name), schema.field(name).type) for name in names],
        schema=pa.schema([schema.field(name) for name in names]),
    )


def _call(
    fn: Callable[[pa.Table, int], Any],
    entry: tuple[str, str],
    *,
    part: int,
    layout: ParquetLayout,
    columns: list[str] | None,
) -> Any:
    _one_thread()
    return fn(_read(entry, layout, columns), part)


def _frame_of(
    numbered: tuple[int, tuple[str, str]], fn: Callable[[pa.Table, int], pd.DataFrame], layout: ParquetLayout
) -> pd.DataFrame:
    _one_thread()
    part, entry = numbered
    return fn(_read(entry, layout, None), part)


def _write_partition(
    frame: pd.DataFrame,
    processor: Any,
    *,
    directory: str,
    schema: pa.Schema,
    input_schema: pa.Schema,
    partition_info: dict | None = None,
) -> pd.DataFrame:
    """Process one partition's rows, write them as part-NNNNNN.parquet, return the counts as one row."""
    _one_thread()
    part = partition_info["number"] if partition_info else 0
    table, counts = processor.process(_arrow(frame, input_schema), part)
    pq.write_table(table.cast(schema), os.path.join(directory, f"{outputs.PART_PREFIX}{part:06d}.parquet"))
    return pd.DataFrame({"counts": [json.dumps(counts)]})


def _unreachable(scheduler: str, why: str) -> DmoError:
    return DmoError(f"cannot reach the Dask scheduler {scheduler!r}: {why}")


def _probe(scheduler: str) -> None:
    """Refuse at once a TCP address nothing listens on: distributed retries a refused connection for its whole
    timeout and then reports it as "Timed out", which sends the user looking at the network, not the address."""
    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, location = parse_address(scheduler)
    if scheme not in PROBED_SCHEMES:
        return
    try:
        host, port = parse_host_port(location)
    except ValueError:  # no port, or not host:port: distributed's own connect names what is wrong
        return
    try:
        socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
    except ConnectionRefusedError as exc:
        raise _unreachable(
            scheduler, f"connection refused: nothing listens on port {port} of {host} (check --scheduler ADDRESS)"
        ) from exc
    except TimeoutError as exc:
        raise _unreachable(
            scheduler,
            f"no TCP connection within {PROBE_SECONDS} s (the host is down, or a firewall drops the connection; "
            "check --scheduler ADDRESS)",
        ) from exc


def _client(scheduler: str) -> Any:
    """A client of the scheduler, after the TCP probe."""
    from distributed import Client

    _probe(scheduler)
    return Client(scheduler, timeout=f"{CONNECT_SECONDS}s")


def _in_daemon_thread(fn: Callable[[str], Any], arg: str) -> Future:
    """fn(arg) on a daemon thread, its outcome as a future: a thread stuck on a silent socket is left behind at exit
    (an executor's thread is joined there, which kept the process alive for ever)."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(fn(arg))
        except Exception as exc:  # noqa: BLE001 - handed to the waiting thread, which reports it
            future.set_exception(exc)

    threading.Thread(target=run, name="dmo-dask-connect", daemon=True).start()
    return future


def _client_within_limit(scheduler: str) -> Any:
    """The client, or FutureTimeout after CONNECT_SECONDS. The wait is in the calling (main) thread, so SIGTERM
    and Ctrl-C end it at once."""
    return _in_daemon_thread(_client, scheduler).result(timeout=CONNECT_SECONDS)


def _connect(scheduler: str) -> Any:
    """A client of a running scheduler, or one clear error within CONNECT_SECONDS: an address that refuses, or
    does not answer like a Dask scheduler (a dashboard port, another service, a silent listener), must not hang
    or crash the command."""
    try:
        try:
            return _client_within_limit(scheduler)
        except AssertionError:
            # distributed's client starts its event-loop thread and asserts it is up after 10 s: on a machine
            # busy with other work that can fail once without anything being wrong with the scheduler.
            return _client_within_limit(scheduler)
    except FutureTimeout as exc:
        raise _unreachable(
            scheduler,
            f"no answer like a Dask scheduler's within {CONNECT_SECONDS} s "
            "(check --scheduler ADDRESS; a scheduler listens on port 8786 by default)",
        ) from exc
    except DmoError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the other end sent, it is not a scheduler we can use
        raise _unreachable(scheduler, f"{type(exc).__name__}: {first_line(exc)} (check --scheduler ADDRESS)") from exc


class DaskEngine:
    """Row-parallel passes over a parquet file or directory, one file per partition, on Dask workers."""

    name = "dask"

    def __init__(self, data: str | Path, scheduler: str | None, workers: int):
        try:
            import dask.dataframe as dd
            from distributed import Client, LocalCluster
        except ImportError as exc:
            raise DmoError("--engine dask needs Dask: pip install 'dmocli[dask]' (or use --engine local)") from exc
        files = sources.parquet_files(data)  # not None: EngineChoice.check refused other data
        self.layout = parquet_layout(data, files)
        self.schema = self.layout.schema
        self.entries = [(name, str(Path(name).resolve())) for name in files]
        self.dd = dd
        self.cluster = None
        if scheduler:
            self.client = _connect(scheduler)
        else:
            self.cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.ERROR,
            )
            self.client = Client(self.cluster)

    def map(self, fn: Callable[[pa.Table, int], Any], columns: list[str] | None) -> list[Any]:
        """fn(partition as arrow, partition number) on the workers; the results come back in partition order.
        fn is sent once and shared by every partition task (it may hold a model)."""
        import dask

        shipped = dask.delayed(fn, pure=True)
        layout = dask.delayed(self.layout, pure=True)
        tasks = [
            dask.delayed(_call)(shipped, entry, part=i, layout=layout, columns=columns)
            for i, entry in enumerate(self.entries)
        ]
        return self._run(tasks)

    def first_rows(self) -> list[int]:
        """Each partition's (parquet file's) first row in the data, from the files' metadata: nothing is read."""
        counts = [pq.ParquetFile(path).metadata.num_rows for _, path in self.entries]
        return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist() if counts else []

    def _run(self, tasks: list[Any]) -> list[Any]:
        """Compute the tasks on the cluster, advancing a progress line as each partition finishes; the results in
        the tasks' order. The first failed task raises its error here, without waiting for the others, as a
        synchronous compute would."""
        from distributed import as_completed

        futures = self.client.compute(tasks)
        with progress.task("dask", total=len(futures), unit="partitions") as bar:
            for future in as_completed(futures):
                if future.status == "error":
                    break
                bar.advance(1)
        return list(self.client.gather(futures))

    def frame(self, fn: Callable[[pa.Table, int], pd.DataFrame], meta: pd.DataFrame) -> Any:
        """A dask DataFrame with one partition per file: fn(the file's rows as arrow, partition number) on the
        worker that holds the partition (`meta`: an empty frame of fn's columns). fn travels with every
        partition task: keep it small (a preprocessor, not a model)."""
        numbered = list(enumerate(self.entries))
        return self.dd.from_map(_frame_of, numbered, fn=fn, layout=self.layout, meta=meta, enforce_metadata=False)

    def write(
        self,
        processor: Any,
        output: Path,
        *,
        schema: pa.Schema,
        columns: list[str] | None = None,
        check: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> list[dict[str, Any]]:
        """processor.process(partition, number) -> (rows, JSON counts) on the workers, by dask.dataframe's
        map_partitions; each partition's rows become OUTPUT/part-NNNNNN.parquet in `schema`. `check(counts)`
        may refuse the result before the directory is renamed into place."""
        import dask

        target = Path(output).resolve()  # the workers' working directory is not ours
        staging = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
        staging.mkdir()
        try:
            shipped = dask.delayed(processor, pure=True)  # one task: the pilot or model is sent once, then shared
            names = [name for name in self.schema.names if columns is None or name in columns]
            frame_meta = (
                pa.schema([self.schema.field(name) for name in names])
                .empty_table()
                .to_pandas(types_mapper=pd.ArrowDtype, ignore_metadata=True)
            )
            frames = self.dd.from_map(
                _read_frame, self.entries, layout=self.layout, columns=columns, meta=frame_meta, enforce_metadata=False
            )
            meta = pd.DataFrame({"counts": pd.Series([], dtype=object)})
            counted = frames.map_partitions(
                _write_partition, shipped, directory=str(staging), schema=schema, input_schema=self.schema, meta=meta
            )
            counts = [json.loads(text) for part in self._run(counted.to_delayed()) for text in part["counts"]]
            if check is not None:
                check(counts)
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            os.replace(staging, target)
        finally:
            if staging.exists():
                shutil.rmtree(staging)
        return counts

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

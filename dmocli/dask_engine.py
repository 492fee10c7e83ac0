"""The Dask engine of the row-parallel passes (`subsample`, `evaluate`, `threshold`, `predict`): the same
per-partition work as the local engine, over a cluster.

Optional (`pip install 'dmocli[dask]'`). Partitions of the parquet dataset
are read by the workers; the per-partition worker (a pilot, a model) travels
once, as one task that every partition task depends on (a broadcast). A pass
that writes rows has each partition write its own part file and return only
its counts; the output is a directory of parquet parts, renamed into place
when every part succeeded, so it must be on a file system the workers share
with the client (as the data must be).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from . import io
from .errors import DmoError
from .parquet_layout import HIVE_NULL, conform, parquet_layout


def _arrow(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """A partition as arrow in the types the local engine reads (dmocli.parquet_layout): Dask reads each
    file in its own types and partition folders as categoricals."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    names = [name for name in schema.names if name in table.schema.names]  # the layout's order too
    return pa.Table.from_arrays([conform(table.column(name), schema.field(name).type) for name in names],
                                schema=pa.schema([schema.field(name) for name in names]))


def _one_thread() -> None:
    """Dask already runs one task per worker thread; torch's own threads on top would oversubscribe the cores."""
    import torch

    torch.set_num_threads(1)


def _call(fn: Callable[[pa.Table, int], Any], frame: pd.DataFrame, part: int, columns: list[str] | None,
          schema: pa.Schema) -> Any:
    _one_thread()
    return fn(_arrow(frame if columns is None else frame[columns], schema), part)


def _write_partition(frame: pd.DataFrame, processor: Any, directory: str, schema: pa.Schema, input_schema: pa.Schema,
                     columns: list[str] | None, partition_info: dict | None = None) -> pd.DataFrame:
    """Process one partition's rows, write them as part-NNNNNN.parquet, return the counts as one row."""
    _one_thread()
    part = partition_info["number"] if partition_info else 0
    table, counts = processor.process(_arrow(frame if columns is None else frame[columns], input_schema), part)
    pq.write_table(table.cast(schema), os.path.join(directory, f"{io.PART_PREFIX}{part:06d}.parquet"))
    return pd.DataFrame({"counts": [json.dumps(counts)]})


class DaskEngine:
    """Row-parallel passes with dask.dataframe over a parquet file or directory."""

    name = "dask"

    def __init__(self, data: str | Path, scheduler: str | None, workers: int):
        try:
            import dask.dataframe as dd
            from distributed import Client, LocalCluster
        except ImportError as exc:
            raise DmoError("--engine dask needs Dask: pip install 'dmocli[dask]' (or use --engine local)") from exc
        files = io.parquet_files(data)  # not None: EngineChoice.check refused other data
        layout = parquet_layout(data, files)
        if layout.has_null_partition:
            raise DmoError(f"--engine dask cannot read a null partition folder ({HIVE_NULL}) of {data}; "
                           "use --engine local")
        self.files = files
        self.schema = layout.schema
        self.dd = dd
        self.cluster = None
        try:
            if scheduler:
                self.client = Client(scheduler, timeout="30s")
            else:
                self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                            dashboard_address=None, silence_logs=logging.ERROR)
                self.client = Client(self.cluster)
        except (OSError, TimeoutError) as exc:
            raise DmoError(f"cannot reach the Dask scheduler {scheduler!r}: {exc} (check --scheduler ADDRESS)") from exc

    def _frame(self):
        """All columns in every pass: the partitioning (hence each row's random draws) must not change between passes."""
        return self.dd.read_parquet(self.files)

    def map(self, fn: Callable[[pa.Table, int], Any], columns: list[str] | None) -> list[Any]:
        """fn(partition as arrow, partition number) on the workers; the results come back in partition order.
        fn is sent once and shared by every partition task (it may hold a model)."""
        import dask

        shipped = dask.delayed(fn, pure=True)
        tasks = [dask.delayed(_call)(shipped, part, i, columns, self.schema)
                 for i, part in enumerate(self._frame().to_delayed())]
        return list(self.client.compute(tasks, sync=True))

    def write(self, processor: Any, output: Path, schema: pa.Schema, columns: list[str] | None = None,
              check: Callable[[list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]]:
        """processor.process(partition, number) -> (rows, JSON counts) on the workers; each partition's rows
        become OUTPUT/part-NNNNNN.parquet in `schema`. `check(counts)` may refuse the result before the
        directory is renamed into place."""
        import dask

        target = Path(output)
        staging = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
        staging.mkdir()
        try:
            shipped = dask.delayed(processor, pure=True)  # one task: the pilot or model is sent once, then shared
            meta = pd.DataFrame({"counts": pd.Series([], dtype=object)})
            frame = self._frame().map_partitions(_write_partition, shipped, str(staging), schema, self.schema,
                                                 columns, meta=meta)
            rows = self.client.compute(frame, sync=True)
            counts = [json.loads(text) for text in rows["counts"]]
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

"""The Dask engine of `dmo subsample`: the same per-partition work as the local engine, over a cluster.

Optional (`pip install 'dmocli[dask]'`). Partitions of the parquet dataset
are read by the workers; the pilot travels once, as one task that every
partition task depends on (a broadcast), and each partition writes its own
part file of accepted rows and returns only its counts. The output is a
directory of parquet parts, renamed into place when every part succeeded, so
it must be on a file system the workers share with the client.
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
from .subsample import refuse_empty


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


def _write_partition(frame: pd.DataFrame, sampler: Any, directory: str, schema: pa.Schema, input_schema: pa.Schema,
                     partition_info: dict | None = None) -> pd.DataFrame:
    """Accept one partition's rows, write them as part-NNNNN.parquet, return the counts as one row."""
    _one_thread()
    part = partition_info["number"] if partition_info else 0
    table, counts = sampler.process(_arrow(frame, input_schema), part)
    pq.write_table(table.cast(schema), os.path.join(directory, f"part-{part:06d}.parquet"))
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
        files = io.parquet_files(data)
        if files is None:
            raise DmoError("--engine dask reads parquet (a file or a directory of .parquet files); convert the CSV first")
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
        """fn(partition as arrow, partition number) on the workers; the (small) results come back in order."""
        import dask

        tasks = [dask.delayed(_call)(fn, part, i, columns, self.schema) for i, part in enumerate(self._frame().to_delayed())]
        return list(self.client.compute(tasks, sync=True))

    def write(self, sampler: Any, output: Path, schema: pa.Schema) -> list[dict[str, Any]]:
        import dask

        target = Path(output)
        staging = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
        staging.mkdir()
        try:
            shipped = dask.delayed(sampler, pure=True)  # one task: the pilot is sent once, then shared
            meta = pd.DataFrame({"counts": pd.Series([], dtype=object)})
            frame = self._frame().map_partitions(_write_partition, shipped, str(staging), schema, self.schema, meta=meta)
            rows = self.client.compute(frame, sync=True)
            counts = [json.loads(text) for text in rows["counts"]]
            refuse_empty(counts)
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

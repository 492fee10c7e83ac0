"""The output table and its checkpoints: resumable, never half-written, deterministic order.

While a job runs, finished rows go to shard files in a hidden folder beside
the output (`.NAME.partial/`), each written atomically every
`--checkpoint-every` items and when the job is interrupted. At the end the
shards (plus, with --resume, the previous output) are merged, sorted by key
and written atomically to the output; then the folder is removed. A job
killed at any moment leaves the old output and complete shards, which
`--resume` reads to skip the items already done. The extraction settings
are stored in the parquet metadata so that a resume with other settings is
refused instead of mixing incompatible features.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dmocli.data import outputs, sinks
from dmocli.errors import DmoError

META_KEY = b"dmocli.extract"
SHARD_GLOB = "shard-*.parquet"


def feature_array(values: np.ndarray) -> pa.FixedSizeListArray:
    """float32 [n, dim] -> fixed_size_list<float32>[dim] without a copy per row."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])


def make_schema(
    key_name: str,
    key_type: pa.DataType,
    *,
    label_type: pa.DataType,
    dim: int,
    columns: list[str],
    settings: dict[str, Any],
) -> pa.Schema:
    fields = [pa.field(key_name, key_type, nullable=False), pa.field("label", label_type)]
    fields += [pa.field(c, pa.list_(pa.float32(), dim), nullable=False) for c in columns]
    return pa.schema(fields, metadata={META_KEY: json.dumps(settings, sort_keys=True).encode()})


def _settings_of(schema: pa.Schema) -> dict[str, Any] | None:
    raw = (schema.metadata or {}).get(META_KEY)
    return json.loads(raw) if raw else None


class Store:
    """Checkpointed writer of one extraction's output."""

    def __init__(self, output: Path, schema: pa.Schema, resume: bool, checkpoint_every: int):
        self.output = Path(output)
        self.schema = schema
        self.key_name = schema.names[0]
        self.partial = self.output.parent / f".{self.output.name}.partial"
        self.resume = resume
        self.checkpoint_every = max(1, int(checkpoint_every))
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._shards = 0
        if not resume:
            self._clear_partial()

    # ---- what is already done --------------------------------------------------
    def _check(self, path: Path, schema: pa.Schema) -> None:
        want, have = _settings_of(self.schema), _settings_of(schema)
        if have != want:
            if have is None:
                raise DmoError(f"--resume: {path} was not written by dmo extract; remove it or drop --resume")
            diff = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
            raise DmoError(
                f"--resume: {path} was extracted with other settings ({', '.join(diff)}); "
                "rerun with the same options, or without --resume to start over"
            )

    def _previous(self) -> list[Path]:
        files = sorted(self.partial.glob(SHARD_GLOB)) if self.partial.is_dir() else []
        return ([self.output] if self.output.is_file() else []) + files

    def done_keys(self) -> pa.Array:
        """Keys already in the output or in checkpoints (only with --resume)."""
        if not self.resume:
            return pa.array([], self.schema.field(self.key_name).type)
        parts = []
        for path in self._previous():
            try:
                schema = pq.read_schema(path)
                self._check(path, schema)
                parts.append(pq.read_table(path, columns=[self.key_name]).column(0).combine_chunks())
            except (pa.ArrowInvalid, OSError) as exc:
                raise DmoError(
                    f"--resume: cannot read {path} ({str(exc).splitlines()[0]}); remove it or drop --resume"
                ) from exc
        if not parts:
            return pa.array([], self.schema.field(self.key_name).type)
        return pa.concat_arrays(parts)

    # ---- writing ---------------------------------------------------------------
    def add(self, keys: pa.Array, labels: pa.Array, features: dict[str, np.ndarray]) -> None:
        arrays = [keys, labels.cast(self.schema.field("label").type)]
        arrays += [feature_array(features[name]) for name in self.schema.names[2:]]
        self._pending.append(pa.RecordBatch.from_arrays(arrays, schema=self.schema))
        self._pending_rows += len(keys)
        if self._pending_rows >= self.checkpoint_every:
            self.checkpoint()

    def checkpoint(self) -> None:
        """Write the rows held in memory as one shard (atomically)."""
        if not self._pending_rows:
            return
        self.partial.mkdir(exist_ok=True)
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        self._shards += 1
        with outputs.renamed_at_once():  # a checkpoint: --resume starts from it after a failed run
            sinks.write_parquet(self.partial / f"shard-{time.time_ns():020d}-{self._shards:06d}.parquet", table)
        self._pending, self._pending_rows = [], 0

    def finish(self) -> int:
        """Merge everything into the output, sorted by key, atomically; returns its row count."""
        self.checkpoint()
        pieces = [
            pq.read_table(p) for p in (self._previous() if self.resume else sorted(self.partial.glob(SHARD_GLOB)))
        ]
        pieces = [p.replace_schema_metadata(self.schema.metadata).cast(self.schema) for p in pieces]
        table = pa.concat_tables(pieces) if pieces else self.schema.empty_table()
        table = table.take(pc.sort_indices(table, [(self.key_name, "ascending")]))
        keys = table.column(0).to_numpy(zero_copy_only=False)
        if keys.size > 1:
            first = np.concatenate([[True], keys[1:] != keys[:-1]])
            if not first.all():  # a crash after the last merge but before its shards were removed
                table = table.filter(pa.array(first))
        sinks.write_parquet(self.output, table.replace_schema_metadata(self.schema.metadata))
        self._clear_partial()
        return table.num_rows

    def _clear_partial(self) -> None:
        if not self.partial.is_dir():
            return
        strangers = [p for p in self.partial.iterdir() if not p.match(SHARD_GLOB) and not p.name.startswith(".shard-")]
        if strangers:
            raise DmoError(f"{self.partial} holds files dmo did not write ({strangers[0].name}); remove the folder")
        shutil.rmtree(self.partial)

"""Where a row-parallel pass runs: in this process (`local`) or on a Dask cluster (`dask`).

subsample, evaluate, threshold, predict and monitor read their data once per pass and
treat every batch alike, so the same per-batch work can run on Dask workers,
partition by partition (an existing engine for row-parallel passes,
no home-made cluster code). This module holds the choice and its checks; the
Dask side is in dask_cluster.py (imported only when chosen: it needs
`pip install 'dmocli[dask]'` and imports pandas).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from dmocli.command_options import ENGINES
from dmocli.data import sources
from dmocli.errors import DmoError

if TYPE_CHECKING:
    from dmocli.engines.dask_cluster import DaskEngine


@dataclass(frozen=True)
class EngineChoice:
    """`--engine`, `--scheduler` and `--workers` of a command."""

    name: str = "local"
    scheduler: str | None = None  # a running scheduler's address; None: a local cluster of `workers` processes
    workers: int = 2

    @property
    def is_dask(self) -> bool:
        return self.name == "dask"

    def check(self, data: str | Path) -> None:
        """Refuse a choice that cannot run, before any data is read or a cluster started."""
        if self.name not in ENGINES:
            raise DmoError(f"--engine {self.name!r} is not known (use {' or '.join(ENGINES)})")
        if self.scheduler and not self.is_dask:
            raise DmoError("--scheduler names a Dask scheduler; add --engine dask")
        if self.workers < 1:
            raise DmoError(f"--workers {self.workers} must be at least 1")
        if self.is_dask and sources.is_stdin(data):
            raise DmoError(
                "--engine dask reads parquet files the workers can reach, not standard input; "
                "use --engine local (the default) for `-`"
            )
        if self.is_dask and sources.parquet_files(data) is None:
            raise DmoError(
                f"--engine dask reads parquet (a file or a directory of .parquet files), not {data}; "
                "convert it first, or use --engine local"
            )

    @contextmanager
    def dask(self, data: str | Path) -> Iterator[DaskEngine]:
        """The Dask engine over `data`, closed (with its local cluster) on exit."""
        from dmocli.engines.dask_cluster import DaskEngine

        engine = DaskEngine(data, self.scheduler, self.workers)
        try:
            yield engine
        finally:
            engine.close()


LOCAL = EngineChoice()

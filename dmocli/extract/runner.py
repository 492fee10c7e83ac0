"""`dmo extract`: items -> backbone -> pooled features -> checkpointed parquet, with a JSON report."""

from __future__ import annotations

import os
import time
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from dmocli.command_options import ExtractOptions
from dmocli.data import outputs
from dmocli.errors import DmoError
from dmocli.extract.backbones import Backbone, load_backbone
from dmocli.extract.deps import require
from dmocli.extract.items import Items, discover, walk_warnings
from dmocli.extract.store import Store, make_schema
from dmocli.extract.views import View, parse_views
from dmocli.models.networks import resolve_device
from dmocli.options import option_errors, refuse
from dmocli.report import envelope, write_report

DTYPES = {
    "fp32": None,
    "float32": None,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
}
Progress = Callable[[int], None]


def resolve_dtype(name: str, device: torch.device, kind: str) -> torch.dtype | None:
    """The autocast dtype, or None for plain float32. `auto` is bf16 on CUDA for images only: text in bf16 ran
    slower than in fp32 on an H100 (586 to 3,372 against 4,967 to 10,527 sentences/s, docs/gpu.md)."""
    if name == "auto":
        if kind == "image" and device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return None
    if name not in DTYPES:
        raise DmoError(f"--dtype {name!r} is not known (use auto, fp32, bf16 or fp16)")
    return DTYPES[name]


def default_workers() -> int:
    return max(1, min(8, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)))


class Runner:
    """One extraction: holds the backbone, device, dtype and store while items stream through."""

    def __init__(
        self,
        backbone: Backbone,
        *,
        device: torch.device,
        dtype: torch.dtype | None,
        store: Store,
        batch_size: int,
        progress: Progress | None,
    ):
        self.backbone, self.device, self.dtype, self.store = backbone, device, dtype, store
        self.batch_size = batch_size
        self.progress = progress or (lambda n: None)
        self.columns = store.schema.names[2:]
        self.skipped: list[dict[str, str]] = []
        self.extracted = 0

    def run(self, todo: Items, *, kind: str, views: list[View], workers: int, seed: int) -> None:
        """Extract every item of `todo`; on any interruption the finished rows are checkpointed first, for
        --resume (Ctrl-C, SIGTERM from a batch scheduler, errors)."""
        try:
            with torch.inference_mode():
                if len(todo) and kind == "image":
                    self.images(todo, views, workers, seed)
                elif len(todo):
                    self.texts(todo)
        except BaseException:
            self.store.checkpoint()
            raise

    def _autocast(self):
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def _emit(self, items: Items, rows: np.ndarray, feats: torch.Tensor) -> None:
        """feats [n, n_columns, dim] for items[rows] -> the store."""
        arr = feats.cpu().numpy()
        idx = pa.array(rows, pa.int64())
        self.store.add(items.keys.take(idx), items.labels.take(idx), {c: arr[:, j] for j, c in enumerate(self.columns)})
        self.extracted += len(rows)

    def images(self, items: Items, views: list, workers: int, seed: int) -> None:
        from dmocli.extract.imaging import ImageDataset, Normalizer, collate

        spec = self.backbone.image_spec
        data = ImageDataset(items.files, items.keys.to_pylist(), spec=spec, views=views, seed=seed)
        loader = torch.utils.data.DataLoader(
            data,
            batch_size=self.batch_size,
            shuffle=False,
            num_workers=workers,
            collate_fn=collate,
            pin_memory=self.device.type == "cuda",
            prefetch_factor=4 if workers else None,
        )
        norm = Normalizer(spec, self.device)
        for index, pixels, failed in loader:
            for i, error in failed:
                self.skipped.append({items.key_name: items.keys[i].as_py(), "error": error})
            if pixels is not None:
                n, v = pixels.shape[:2]
                x = norm(pixels.to(self.device, non_blocking=True).flatten(0, 1))
                with self._autocast():
                    feats = self.backbone.embed(x)
                self._emit(items, index.numpy(), feats.view(n, v, -1))
            self.progress(len(index) + len(failed))

    def texts(self, items: Items) -> None:
        tok, limit = self.backbone.tokenizer, self.backbone.max_length
        chunk = max(self.batch_size, self.store.checkpoint_every)
        for start in range(0, len(items), chunk):
            texts = items.texts[start : start + chunk]
            # longest first, by characters (as sentence-transformers does): batches of similar length pad little
            order = np.argsort(-np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), kind="stable")
            outs = []
            for b in range(0, len(order), self.batch_size):
                sel = order[b : b + self.batch_size]
                enc = tok([texts[i] for i in sel], padding=True, truncation=True, max_length=limit, return_tensors="pt")
                ids = enc["input_ids"].to(self.device, non_blocking=True)
                mask = enc["attention_mask"].to(self.device, non_blocking=True)
                with self._autocast():
                    outs.append(self.backbone.embed(ids, mask))
                self.progress(len(sel))
            feats = torch.empty(len(order), outs[0].shape[-1], dtype=torch.float32, device=outs[0].device)
            feats[torch.as_tensor(order, device=feats.device)] = torch.cat(outs)
            self._emit(items, np.arange(start, start + len(texts)), feats.unsqueeze(1))


def _settings(backbone: Backbone, items: Items, columns: list[str], seed: int) -> dict[str, Any]:
    """What makes two extractions' features comparable (checked on --resume)."""
    settings = {
        "kind": items.kind,
        "model": backbone.name,
        "library": backbone.library,
        "pooling": backbone.pooling,
        "normalize": backbone.normalize,
        "dim": backbone.dim,
        "columns": columns,
    }
    if backbone.image_spec is not None:
        settings["image"] = backbone.image_spec.to_dict()
    if items.kind == "text":
        settings["max_length"] = backbone.max_length
    if len(columns) > 1:
        settings["seed"] = seed
    return settings


def extract(
    source: str | Path,
    output: str | Path,
    opts: ExtractOptions,
    report_path: str | Path | None = None,
    *,
    progress: Callable[[int], Progress] | None = None,
) -> dict[str, Any]:
    """Extract features of SOURCE into OUTPUT (parquet); returns the report.

    `progress(total)` is called once with the number of items to process and
    returns a callback that receives the count of items finished after each
    batch (the CLI draws a progress bar with it).
    """
    t0 = time.perf_counter()
    source, output = Path(source), Path(output)
    _check_outputs(source, output, report_path)
    refuse(option_errors(opts))  # every declared constraint (dmocli/command_options.py), in one message
    workers = default_workers() if opts.workers is None else opts.workers
    views = parse_views(opts.views)
    device = resolve_device(opts.device)
    items = discover(source, opts.kind, opts.text_col, opts.label_col)
    dtype = resolve_dtype(opts.dtype, device, items.kind)
    if views and items.kind != "image":
        raise DmoError("--views (augmented copies) applies to images only; drop it for text")
    if items.kind == "image":
        require("PIL", "image decoding")
    backbone = _backbone(opts, items.kind, device)
    columns = ["features"] + [v.column for v in views]
    store, todo = _open_store(output, items, backbone=backbone, columns=columns, opts=opts)
    runner = Runner(
        backbone,
        device=device,
        dtype=dtype,
        store=store,
        batch_size=opts.batch_size,
        progress=progress(len(todo)) if progress else None,
    )
    t1 = time.perf_counter()
    runner.run(todo, kind=items.kind, views=views, workers=workers, seed=opts.seed)
    seconds = time.perf_counter() - t1
    skipped = items.skipped + runner.skipped
    if not runner.extracted and len(items) == len(todo):  # nothing new, nothing resumed: an empty table is no use
        _refuse_nothing_read(source, skipped)
    rows = store.finish()
    report = envelope(
        "extract",
        source=str(source),
        output=str(output),
        kind=items.kind,
        backbone=backbone.name,
        library=backbone.library,
        dim=backbone.dim,
        pooling=backbone.pooling,
        normalize=backbone.normalize,
        columns=columns,
        key=items.key_name,
        device=str(device),
        dtype=str(dtype or torch.float32).removeprefix("torch."),
        batch_size=opts.batch_size,
        workers=workers if items.kind == "image" else 0,
        seed=opts.seed,
        n_items=len(items) + len(items.skipped),
        n_rows=rows,
        n_extracted=runner.extracted,
        n_resumed=len(items) - len(todo),
        n_skipped=len(skipped),
        skipped=skipped,
        n_walk_skipped=len(items.walk_skipped),
        walk_skipped=items.walk_skipped,
        warnings=walk_warnings(items.walk_skipped),
        extract_seconds=round(seconds, 3),
        items_per_second=round(runner.extracted / seconds, 2) if seconds > 0 and runner.extracted else None,
        wall_seconds=round(time.perf_counter() - t0, 3),
        options=asdict(opts),
    )
    if report_path is not None:
        write_report(report_path, report)
    return report


def _check_outputs(source: Path, output: Path, report_path: str | Path | None) -> None:
    """A text table given as SOURCE must not be replaced by its own features, nor the output by the report. A
    parquet output inside an image or .txt folder is allowed: extract reads only images or .txt files there."""
    outputs.check_outputs({"-o": output, "--report": report_path}, {"SOURCE": source if source.is_file() else None})
    outputs.refuse_csv_output(output, "the feature table")
    if outputs.is_special(output):  # its checkpoints live in a folder beside the output, which /dev is not for
        raise DmoError(f"-o {output} is a device or pipe; extract writes a parquet file (and checkpoints beside it)")


def _backbone(opts: ExtractOptions, kind: str, device: torch.device) -> Backbone:
    """The backbone of --model on `device`, refused when its feature size cannot be told (no column width)."""
    backbone = load_backbone(
        opts.model, kind, pooling=opts.pooling, normalize=opts.normalize, max_length=opts.max_length
    )
    backbone.model.to(device)
    if backbone.dim == 0:
        raise DmoError(f"cannot tell the feature size of {backbone.name}")
    return backbone


def _refuse_nothing_read(source: Path, skipped: list[dict[str, Any]]) -> None:
    """No item could be read and none was resumed: say so with the first item's error, writing nothing."""
    first = skipped[0] if skipped else {}
    example = f", e.g. {next(iter(first.values()))}: {str(first.get('error', ''))[:80]}" if first else ""
    raise DmoError(
        f"no item of {source} could be read ({len(skipped)} skipped{example}); nothing was written "
        "(check the files, or --text-col for a table)"
    )


def _open_store(
    output: Path, items: Items, *, backbone: Backbone, columns: list[str], opts: ExtractOptions
) -> tuple[Store, Items]:
    """The output's store (what it holds already, with --resume) and the items it
    does not hold yet."""
    schema = make_schema(
        items.key_name,
        items.keys.type,
        label_type=items.labels.type,
        dim=backbone.dim,
        columns=columns,
        settings=_settings(backbone, items, columns, opts.seed),
    )
    store = Store(output, schema, opts.resume, opts.checkpoint_every)
    done = store.done_keys()
    todo = items.take(np.flatnonzero(~pc.is_in(items.keys, value_set=done).to_numpy(zero_copy_only=False)))
    return store, todo

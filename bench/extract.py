"""Benchmark of `dmo extract`: images/s and sentences/s next to their ceilings.

Images: a DINOv2-small-shaped model (random weights; speed does not depend
on them) on generated 224x224 JPEGs. Three figures per (dtype, batch size):
the bare forward pass on pre-decoded tensors (ceiling 1), the decode+resize
rate of the DataLoader worker pool alone (ceiling 2), and the full pipeline
(`dmocli.extract.extract`, model loading excluded). Text: a MiniLM-sized
BERT (6 layers, 384 wide) saved as a sentence-transformers checkpoint; bare
forward at 128 tokens, the full `extract` pipeline, and
`SentenceTransformer.encode` on the same model and sentences.

    python bench/extract.py                      # CPU defaults: fewer images, batch 32
    python bench/extract.py --device cuda --batch-sizes 64,256 --dtypes fp32,bf16 --pipeline-images 2000

Prints a table and writes bench/results/extract.json.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import torch
from _common import print_table, write_results

from dmocli.extract import ExtractOptions, extract  # noqa: E402
from dmocli.extract.backbones import load_backbone  # noqa: E402
from dmocli.extract.imaging import ImageDataset, collate  # noqa: E402
from dmocli.extract.runner import DTYPES, default_workers  # noqa: E402
from dmocli.models.networks import resolve_device  # noqa: E402

WORDS = [f"w{i}" for i in range(2000)] + "the a of and to in is was for on that with as by at it from".split()


def make_jpegs(folder: Path, n: int, size: int = 224, seed: int = 0) -> list[Path]:
    """Smooth random colour pictures (JPEG-realistic, unlike white noise), 10 class folders."""
    from PIL import Image

    files = sorted(folder.rglob("*.jpg"))
    if len(files) >= n:
        return files[:n]
    rng = np.random.default_rng(seed)
    for i in range(n):
        low = rng.random((8, 8, 3)) * 255
        img = Image.fromarray(low.astype(np.uint8)).resize((size, size), Image.BICUBIC)
        arr = np.asarray(img).astype(np.int16) + rng.integers(-12, 13, (size, size, 3))
        path = folder / f"c{i % 10}" / f"{i:05d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(path, quality=90)
    return sorted(folder.rglob("*.jpg"))[:n]


def subset_folder(files: list[Path], root: Path, folder: Path, k: int) -> Path:
    """A folder of symlinks to the first k pictures (the pipeline run on CPU is forward-bound and slow)."""
    if folder.exists() and len(list(folder.rglob("*.jpg"))) == k:
        return folder
    for f in files[:k]:
        link = folder / f.relative_to(root)
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(f)
    return folder


def dinov2_small(path: Path) -> Path:
    import transformers

    if not (path / "config.json").exists():
        torch.manual_seed(0)
        cfg = transformers.Dinov2Config(
            hidden_size=384,
            num_hidden_layers=12,
            num_attention_heads=6,
            intermediate_size=1536,
            patch_size=14,
            image_size=518,
        )
        transformers.Dinov2Model(cfg).save_pretrained(path)
        proc = getattr(transformers, "BitImageProcessorPil", None) or transformers.BitImageProcessor
        proc(
            size={"shortest_edge": 256},
            crop_size={"height": 224, "width": 224},
            do_center_crop=True,
            image_mean=[0.485, 0.456, 0.406],
            image_std=[0.229, 0.224, 0.225],
            resample=3,
        ).save_pretrained(path)
    return path


def minilm_sized(path: Path, max_len: int) -> Path:
    """Random BERT of all-MiniLM-L6-v2's shape, saved as a sentence-transformers checkpoint (mean + normalize)."""
    import transformers
    from sentence_transformers import (
        SentenceTransformer,
        models,  # deprecated alias, kept for sentence-transformers < 6
    )

    if not (path / "modules.json").exists():
        torch.manual_seed(0)
        base = path.parent / (path.name + "-base")
        base.mkdir(parents=True, exist_ok=True)
        vocab = base / "vocab.txt"
        vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS))
        transformers.BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(base)
        transformers.BertModel(
            transformers.BertConfig(
                vocab_size=len(WORDS) + 5,
                hidden_size=384,
                num_hidden_layers=6,
                num_attention_heads=12,
                intermediate_size=1536,
                max_position_embeddings=512,
            )
        ).save_pretrained(base)
        st = SentenceTransformer(
            modules=[
                models.Transformer(str(base), max_seq_length=max_len),
                models.Pooling(384, "mean"),
                models.Normalize(),
            ],
            device="cpu",
        )
        st.save(str(path))
    return path


def timed_rate(fn, n_per_call: int, seconds: float, min_calls: int = 2) -> float:
    """Items/s of `fn` after one warm-up call, over at least `min_calls` calls and `seconds`."""
    fn()
    calls, t0 = 0, time.perf_counter()
    while calls < min_calls or time.perf_counter() - t0 < seconds:
        fn()
        calls += 1
    return calls * n_per_call / (time.perf_counter() - t0)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def image_forward_rate(model_dir: Path, device: torch.device, dtype: str, batch: int, seconds: float) -> float:
    bb = load_backbone(str(model_dir), "image")
    bb.model.to(device)
    x = torch.randn(batch, 3, 224, 224, device=device)
    ac = DTYPES[dtype]

    @torch.inference_mode()
    def step() -> None:
        with torch.autocast(device.type, dtype=ac, enabled=ac is not None):
            bb.embed(x).cpu()
        sync(device)

    return timed_rate(step, batch, seconds)


def decode_rate(files: list[Path], model_dir: Path, workers: int, batch: int) -> float:
    spec = load_backbone(str(model_dir), "image").image_spec
    keys = [f.name for f in files]
    loader = torch.utils.data.DataLoader(
        ImageDataset(files, keys, spec=spec, views=[], seed=0),
        batch_size=batch,
        num_workers=workers,
        collate_fn=collate,
        prefetch_factor=4 if workers else None,
    )
    t0 = time.perf_counter()
    n = sum(len(index) for index, _, _ in loader)
    return n / (time.perf_counter() - t0)


def text_forward_rate(
    model_dir: Path, device: torch.device, dtype: str, batch: int, tokens: int, seconds: float
) -> float:
    bb = load_backbone(str(model_dir), "text")
    bb.model.to(device)
    ids = torch.randint(5, len(WORDS) + 5, (batch, tokens), device=device)
    mask = torch.ones_like(ids)
    ac = DTYPES[dtype]

    @torch.inference_mode()
    def step() -> None:
        with torch.autocast(device.type, dtype=ac, enabled=ac is not None):
            bb.embed(ids, mask).cpu()
        sync(device)

    return timed_rate(step, batch, seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--n-images", type=int, default=2000, help="JPEGs generated (decode ceiling runs on all)")
    ap.add_argument(
        "--pipeline-images",
        type=int,
        default=None,
        help="images through the full pipeline (default: all on GPU, 192 on CPU)",
    )
    ap.add_argument("--batch-sizes", default=None, help="default: 64,256 on GPU, 32 on CPU")
    ap.add_argument("--dtypes", default=None, help="default: fp32,bf16 on GPU, fp32 on CPU")
    ap.add_argument("--workers", type=int, default=None, help="decode processes (default: one per core, at most 8)")
    ap.add_argument("--n-texts", type=int, default=None, help="sentences (default: 2000 on GPU, 500 on CPU)")
    ap.add_argument("--text-tokens", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=15.0, help="minimum timing window of each bare forward figure")
    ap.add_argument("--skip-text", action="store_true")
    ap.add_argument("--tmp", type=Path, default=Path("/tmp/dmo-bench-extract"))
    args = ap.parse_args()

    device = resolve_device(args.device)
    gpu = device.type == "cuda"
    batches = [int(b) for b in (args.batch_sizes or ("64,256" if gpu else "32")).split(",")]
    dtypes = (args.dtypes or ("fp32,bf16" if gpu else "fp32")).split(",")
    workers = default_workers() if args.workers is None else args.workers
    n_texts = args.n_texts or (2000 if gpu else 500)
    n_pipe = min(args.pipeline_images or (args.n_images if gpu else 192), args.n_images)
    args.tmp.mkdir(parents=True, exist_ok=True)
    files = make_jpegs(args.tmp / "jpegs", args.n_images)
    pipe_dir = (
        subset_folder(files, args.tmp / "jpegs", args.tmp / f"jpegs-{n_pipe}", n_pipe)
        if n_pipe < len(files)
        else args.tmp / "jpegs"
    )
    dino = dinov2_small(args.tmp / "dinov2-small-random")
    rows = []
    for dtype in dtypes:
        for batch in batches:
            fwd = image_forward_rate(dino, device, dtype, batch, args.seconds)
            dec = decode_rate(files, dino, workers, batch)
            out = args.tmp / "features.parquet"
            rep = extract(
                pipe_dir,
                out,
                ExtractOptions(
                    model=str(dino),
                    device=str(device),
                    dtype=dtype,
                    batch_size=batch,
                    workers=workers,
                    checkpoint_every=1 << 30,
                ),
            )
            pipe = rep["items_per_second"]
            ceiling = min(fwd, dec)
            rows.append(
                {
                    "task": "image",
                    "dtype": dtype,
                    "batch": batch,
                    "forward_per_s": fwd,
                    "decode_per_s": dec,
                    "pipeline_per_s": pipe,
                    "pipeline_items": rep["n_extracted"],
                    "binding": "forward" if fwd < dec else "decode",
                    "fraction_of_ceiling": pipe / ceiling,
                }
            )
            print(rows[-1], flush=True)
    if not args.skip_text:
        from sentence_transformers import SentenceTransformer

        st_dir = minilm_sized(args.tmp / "minilm-sized-random", args.text_tokens)
        rng = np.random.default_rng(0)
        sentences = [" ".join(rng.choice(WORDS, int(rng.integers(5, 120)))) for _ in range(n_texts)]
        csv = args.tmp / "sentences.csv"
        pd.DataFrame({"text": sentences}).to_csv(csv, index=False)
        st = SentenceTransformer(str(st_dir), device=str(device))
        for dtype in dtypes:
            for batch in batches:
                fwd = text_forward_rate(st_dir, device, dtype, batch, args.text_tokens, args.seconds)
                out = args.tmp / "sentences.parquet"
                rep = extract(
                    csv,
                    out,
                    ExtractOptions(
                        model=str(st_dir), device=str(device), dtype=dtype, batch_size=batch, checkpoint_every=1 << 30
                    ),
                )
                ac = DTYPES[dtype]
                with torch.autocast(device.type, dtype=ac, enabled=ac is not None):
                    st.encode(sentences[:batch], batch_size=batch)  # warm-up
                    sync(device)
                    t0 = time.perf_counter()
                    theirs = st.encode(sentences, batch_size=batch, convert_to_numpy=True)
                    sync(device)
                    st_rate = len(sentences) / (time.perf_counter() - t0)
                col = pq.read_table(out).column("features").combine_chunks()
                ours = col.values.to_numpy().reshape(len(col), -1)
                rows.append(
                    {
                        "task": "text",
                        "dtype": dtype,
                        "batch": batch,
                        "forward_per_s": fwd,
                        "pipeline_per_s": rep["items_per_second"],
                        "sentence_transformers_per_s": st_rate,
                        "pipeline_items": rep["n_extracted"],
                        "binding": f"forward@{args.text_tokens}tok",
                        "fraction_of_ceiling": rep["items_per_second"] / fwd,
                        "max_abs_diff_vs_st": float(np.abs(ours - theirs).max()),
                    }
                )
                print(rows[-1], flush=True)
    path = write_results(
        "extract",
        {
            "device": str(device),
            "device_name": torch.cuda.get_device_name(device) if gpu else platform.processor() or "cpu",
            "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "workers": workers,
            "n_images": len(files),
            "text_tokens": args.text_tokens,
            "n_texts": n_texts,
            "torch": torch.__version__,
            "rows": rows,
        },
    )
    print(f"\n{device}, {os.cpu_count()} cores, {workers} decode workers, torch {torch.__version__}")
    print_table(
        rows,
        [
            "task",
            "dtype",
            "batch",
            "pipeline_items",
            "forward_per_s",
            "decode_per_s",
            "pipeline_per_s",
            "sentence_transformers_per_s",
            "fraction_of_ceiling",
            "binding",
        ],
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""`dmo extract` end to end on tiny random DINOv2/BERT models built here (offline, CPU in float32;
tests/engines/test_cuda.py checks the CUDA path against CPU runs of its own).

The expensive parts (building models, the `dmo extract` subprocesses) run
once per module; each test checks one property of their outputs against an
independent computation (the Hugging Face processor and model called
directly, a fresh run, a resumed run).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_dmo

transformers = pytest.importorskip("transformers", reason='needs the extract extra: pip install "dmocli[extract]"')
torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image", reason='needs the extract extra: pip install "dmocli[extract]"')

from dmocli.errors import DmoError  # noqa: E402
from dmocli.extract import ExtractOptions, extract  # noqa: E402
from dmocli.extract.items import EMPTY_TEXT  # noqa: E402

WORDS = "the a cat dog sat on mat good bad movie great terrible film plot actor very not".split()
CLASSES = {"cat": 5, "dog": 4, "unlabeled": 3}


def _build_models(root: Path) -> tuple[Path, Path]:
    """A 2-layer DINOv2 (28x28 input, patch 14) and a 2-layer BERT with a word-level vocab, randomly initialised."""
    torch.manual_seed(0)
    dino = root / "dino"
    cfg = transformers.Dinov2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=28, patch_size=14
    )
    transformers.Dinov2Model(cfg).save_pretrained(dino)
    proc_cls = getattr(transformers, "BitImageProcessorPil", None) or transformers.BitImageProcessor
    proc_cls(
        size={"shortest_edge": 32},
        crop_size={"height": 28, "width": 28},
        do_center_crop=True,
        image_mean=[0.485, 0.456, 0.406],
        image_std=[0.229, 0.224, 0.225],
    ).save_pretrained(dino)
    bert = root / "bert"
    bert.mkdir()
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS))
    transformers.BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(bert)
    transformers.BertModel(
        transformers.BertConfig(
            vocab_size=len(WORDS) + 5,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    ).save_pretrained(bert)
    return dino, bert


def _make_images(folder: Path, seed: int = 0) -> None:
    """Class subfolders of small random JPEG/PNG pictures of varied sizes, one loose file, one corrupt file.

    Each picture is its own colour plus noise, not pure noise: a flipped or
    shifted copy of pure noise shares nothing with the original that even a
    trained network could see, so "a view stays closer to its own image"
    would hold or fail by the luck of the random weights.
    """
    rng = np.random.default_rng(seed)
    for cls, n in CLASSES.items():
        (folder / cls).mkdir(parents=True)
        for i in range(n):
            h, w = int(rng.integers(30, 80)), int(rng.integers(30, 80))
            pixels = rng.integers(0, 256, 3)[None, None, :] + rng.normal(0.0, 40.0, (h, w, 3))
            Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(folder / cls / f"img{i}.jpg")
    Image.fromarray(rng.integers(0, 256, (40, 60), dtype=np.uint8), "L").save(folder / "loose.png")
    (folder / "cat" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG")


def build_env(root: Path) -> dict[str, Path]:
    """The tiny models, the image folder and a text CSV under root (tests/engines/test_cuda.py uses it too)."""
    dino, bert = _build_models(root)
    _make_images(root / "imgs")
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(WORDS, int(rng.integers(1, 20)))) for _ in range(40)]
    pd.DataFrame({"text": texts, "label": (rng.random(40) < 0.3).astype(int)}).to_csv(root / "texts.csv", index=False)
    return {"root": root, "dino": dino, "bert": bert, "imgs": root / "imgs", "texts": root / "texts.csv"}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_env(tmp_path_factory.mktemp("extract"))


@pytest.fixture(scope="module")
def image_run(env: dict[str, Path]) -> dict:
    """The real CLI on the image folder, with two decode workers, augmented views and a report.

    On CPU in float32, so the checks below can ask for the reference model's
    numbers (tests/engines/test_cuda.py checks the CUDA path).
    """
    out, report = env["root"] / "img.parquet", env["root"] / "img-report.json"
    run_dmo(
        "extract",
        env["imgs"],
        "-o",
        out,
        "--model",
        env["dino"],
        "--views",
        "weak:1,strong:2",
        "--batch-size",
        "3",
        "--workers",
        "2",
        "--device",
        "cpu",
        "--report",
        report,
        check=True,
    )
    return {"table": pq.read_table(out), "report": json.loads(report.read_text()), "path": out}


@pytest.fixture(scope="module")
def text_run(env: dict[str, Path]) -> dict:
    """The library call behind the CLI (the CLI itself is run on images above; each dmo process costs seconds)."""
    out = env["root"] / "txt.parquet"
    report = extract(env["texts"], out, ExtractOptions(device="cpu", model=str(env["bert"]), batch_size=8))
    return {"table": pq.read_table(out), "report": report}


def _features(table: pa.Table, column: str = "features") -> np.ndarray:
    col = table.column(column).combine_chunks()
    return col.values.to_numpy().reshape(len(col), -1)


# ---- images -----------------------------------------------------------------------------
def test_image_output_schema_labels_and_order(image_run: dict) -> None:
    table = image_run["table"]
    assert table.schema.names == [
        "path",
        "label",
        "features",
        "features_weak_0",
        "features_strong_0",
        "features_strong_1",
    ]
    assert pa.types.is_fixed_size_list(table.schema.field("features").type)
    assert table.schema.field("features").type.value_type == pa.float32()
    assert table.schema.field("features").type.list_size == 32
    paths = table.column("path").to_pylist()
    assert paths == sorted(paths) and len(paths) == sum(CLASSES.values()) + 1  # corrupt file left out
    assert "cat/broken.jpg" not in paths
    labels = dict(zip(paths, table.column("label").to_pylist()))
    assert labels["cat/img0.jpg"] == "cat" and labels["dog/img3.jpg"] == "dog"
    assert labels["loose.png"] is None and labels["unlabeled/img0.jpg"] is None
    assert np.isfinite(_features(table)).all()


def test_corrupt_image_is_skipped_and_reported(image_run: dict) -> None:
    report = image_run["report"]
    assert report["n_skipped"] == 1 and report["skipped"][0]["path"] == "cat/broken.jpg"
    assert report["skipped"][0]["error"]
    assert report["n_rows"] == report["n_extracted"] == sum(CLASSES.values()) + 1


def test_the_report_validates_against_the_shipped_schema(env: dict[str, Path], image_run: dict) -> None:
    """`dmo extract --report` follows dmocli/schema/report.schema.json, as every command's report does
    (tests/test_report_schema.py checks the others); the backbone is named under `backbone`, not `model`."""
    from jsonschema import Draft202012Validator

    from dmocli.report import report_schema

    report = image_run["report"]
    assert list(Draft202012Validator(report_schema()).iter_errors(report)) == []
    assert report["command"] == "extract" and report["backbone"] and "model" not in report


def test_features_match_the_hugging_face_processor_and_model(env: dict[str, Path], image_run: dict) -> None:
    """Independent check: AutoImageProcessor + Dinov2Model called directly give the same CLS vectors."""
    # The PIL processor, whose resize dmocli's decoding follows: transformers 5 picks the torchvision one
    # when torchvision is installed, and its antialiased resize differs at the 1e-3 level.
    backend = {"backend": "pil"} if int(transformers.__version__.split(".")[0]) >= 5 else {"use_fast": False}
    proc = transformers.AutoImageProcessor.from_pretrained(str(env["dino"]), local_files_only=True, **backend)
    model = transformers.AutoModel.from_pretrained(str(env["dino"]), local_files_only=True).eval()
    paths = image_run["table"].column("path").to_pylist()
    images = [Image.open(env["imgs"] / p).convert("RGB") for p in paths]
    with torch.inference_mode():
        expected = model(**proc(images, return_tensors="pt")).last_hidden_state[:, 0].numpy()
    np.testing.assert_allclose(_features(image_run["table"]), expected, rtol=1e-4, atol=1e-4)


def test_views_are_distinct_augmented_copies(image_run: dict) -> None:
    base = _features(image_run["table"])
    weak, s0, s1 = (
        _features(image_run["table"], c) for c in ("features_weak_0", "features_strong_0", "features_strong_1")
    )
    for view in (weak, s0, s1):
        assert view.shape == base.shape and np.isfinite(view).all()
        assert not np.allclose(view, base)
    assert not np.allclose(s0, s1)
    # an augmented copy stays closer to its own image than to other images, on average
    dist = np.linalg.norm(weak[:, None] - base[None], axis=-1)
    assert np.diag(dist).mean() < dist[~np.eye(len(dist), dtype=bool)].mean()


def test_in_process_run_is_identical_to_the_cli_run(env: dict[str, Path], image_run: dict, tmp_path: Path) -> None:
    """Determinism across processes and worker counts (2 workers in the CLI run, 0 here), views included."""
    out = tmp_path / "again.parquet"
    extract(
        env["imgs"],
        out,
        ExtractOptions(device="cpu", model=str(env["dino"]), views="weak:1,strong:2", batch_size=5, workers=0),
    )
    again = pq.read_table(out)
    assert again.column("path").to_pylist() == image_run["table"].column("path").to_pylist()
    for col in ("features", "features_weak_0", "features_strong_0", "features_strong_1"):
        np.testing.assert_array_equal(_features(again, col), _features(image_run["table"], col))


def test_train_accepts_the_output(image_run: dict, tmp_path: Path) -> None:
    model = tmp_path / "m.safetensors"
    proc = run_dmo("train", image_run["path"], "--drop-unlabeled", "--positive", "cat", "-o", model, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["splits"]["train"]["n"] == CLASSES["cat"] + CLASSES["dog"]
    assert model.is_file()


# ---- resume -----------------------------------------------------------------------------
def test_resume_after_an_interrupted_run(env: dict[str, Path], image_run: dict, tmp_path: Path) -> None:
    """Stop a run after 6 items (as Ctrl-C or SIGTERM would), then --resume: same table as one full run.

    The 6 items are cat/broken.jpg (unreadable: not saved, so retried on resume) and 5 good pictures.
    """
    out = tmp_path / "r.parquet"
    opts = ExtractOptions(
        device="cpu", model=str(env["dino"]), views="weak:1,strong:2", batch_size=2, workers=0, checkpoint_every=2
    )

    def stop_after_six(total: int):
        done = [0]

        def advance(n: int) -> None:
            done[0] += n
            if done[0] >= 6:
                raise KeyboardInterrupt

        return advance

    with pytest.raises(KeyboardInterrupt):
        extract(env["imgs"], out, opts, progress=stop_after_six)
    assert not out.exists()
    shards = list((tmp_path / ".r.parquet.partial").glob("shard-*.parquet"))
    assert sum(pq.read_metadata(s).num_rows for s in shards) == 5
    opts.resume = True
    report = extract(env["imgs"], out, opts)
    assert report["n_resumed"] == 5 and report["n_extracted"] == report["n_rows"] - 5
    assert not (tmp_path / ".r.parquet.partial").exists()
    resumed, full = pq.read_table(out), image_run["table"]
    assert resumed.column("path").to_pylist() == full.column("path").to_pylist()
    for col in full.schema.names[2:]:
        np.testing.assert_array_equal(_features(resumed, col), _features(full, col))


def test_resume_adds_only_new_items_and_refuses_other_settings(
    env: dict[str, Path], image_run: dict, tmp_path: Path
) -> None:
    out = tmp_path / "r.parquet"
    out.write_bytes(image_run["path"].read_bytes())
    imgs = tmp_path / "imgs"
    _make_images(imgs)
    Image.fromarray(np.full((50, 50, 3), 200, np.uint8)).save(imgs / "dog" / "new.jpg")
    opts = ExtractOptions(device="cpu", model=str(env["dino"]), views="weak:1,strong:2", workers=0, resume=True)
    report = extract(imgs, out, opts)
    assert report["n_extracted"] == 1 and report["n_resumed"] == image_run["table"].num_rows
    table = pq.read_table(out)
    assert "dog/new.jpg" in table.column("path").to_pylist()
    assert table.column("path").to_pylist() == sorted(table.column("path").to_pylist())
    with pytest.raises(DmoError, match="other settings"):
        extract(imgs, out, ExtractOptions(device="cpu", model=str(env["dino"]), pooling="mean", workers=0, resume=True))


# ---- text -------------------------------------------------------------------------------
def test_text_output_rows_labels_and_masked_mean(env: dict[str, Path], text_run: dict) -> None:
    """Length-sorted padded batches give each sentence its own unpadded masked mean."""
    table = text_run["table"]
    frame = pd.read_csv(env["texts"])
    assert table.schema.names == ["row", "label", "features"]
    assert table.column("row").to_pylist() == list(range(len(frame)))
    assert table.column("label").to_pylist() == frame["label"].tolist()
    tok = transformers.AutoTokenizer.from_pretrained(str(env["bert"]), local_files_only=True)
    model = transformers.AutoModel.from_pretrained(str(env["bert"]), local_files_only=True).eval()
    with torch.inference_mode():
        expected = np.stack(
            [model(**tok(t, return_tensors="pt")).last_hidden_state[0].mean(0).numpy() for t in frame["text"]]
        )
    np.testing.assert_allclose(_features(table), expected, rtol=1e-4, atol=1e-5)
    assert text_run["report"]["pooling"] == "mean" and text_run["report"]["key"] == "row"


def test_text_folder_cls_pooling_and_l2_norm(env: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    for cls in ("pos", "neg"):
        (folder / cls).mkdir(parents=True)
        for i in range(3):
            (folder / cls / f"{i}.txt").write_text(" ".join(WORDS[i : i + 4 + (cls == "pos")]))
    (folder / "pos" / "bad.txt").write_bytes(b"\xff\xfe\xfa not utf-8")
    (folder / "pos" / "blank.txt").write_text("\n  \n")
    out = tmp_path / "docs.parquet"
    report = extract(folder, out, ExtractOptions(device="cpu", model=str(env["bert"]), pooling="cls", normalize=True))
    table = pq.read_table(out)
    assert table.column("path").to_pylist() == [f"{c}/{i}.txt" for c in ("neg", "pos") for i in range(3)]
    assert table.column("label").to_pylist() == ["neg"] * 3 + ["pos"] * 3
    np.testing.assert_allclose(np.linalg.norm(_features(table), axis=1), 1.0, rtol=1e-5)
    assert report["skipped"] == [
        {"path": "pos/bad.txt", "error": report["skipped"][0]["error"]},
        {"path": "pos/blank.txt", "error": EMPTY_TEXT},
    ]


def test_jsonl_table_without_labels_and_null_text(env: dict[str, Path], tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    src.write_text('{"body": "good movie"}\n{"body": null}\n{"body": "bad plot"}\n{"body": " \\t"}\n')
    out = tmp_path / "t.parquet"
    report = extract(src, out, ExtractOptions(device="cpu", model=str(env["bert"]), text_col="body"))
    table = pq.read_table(out)
    assert table.column("row").to_pylist() == [0, 2] and table.column("label").null_count == 2
    # blank text is skipped like null text (a CSV reader may write an empty cell as either)
    assert report["skipped"] == [{"row": "1", "error": "null text"}, {"row": "3", "error": EMPTY_TEXT}]


def test_a_source_with_no_readable_item_writes_nothing(env: dict[str, Path], tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    src.write_text('{"text": null}\n{"text": null}\n')
    out = tmp_path / "t.parquet"
    with pytest.raises(DmoError, match="no item .* could be read .2 skipped, e.g. 0: null text"):
        extract(src, out, ExtractOptions(device="cpu", model=str(env["bert"])))
    assert not out.exists()


# ---- errors -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, message",
    [
        (["--views", "weak:1"], "images only"),
        (["--text-col", "nope"], "no text column 'nope'"),
        (["--dtype", "fp8"], "--dtype"),
        (["--max-length", 2], "--max-length 2"),
    ],
)
def test_text_usage_errors(env: dict[str, Path], tmp_path: Path, args: list[str], message: str) -> None:
    opts = dict(views=None, text_col="text", dtype="auto")
    opts.update({a.lstrip("-").replace("-", "_"): v for a, v in zip(args[::2], args[1::2])})
    with pytest.raises(DmoError, match=message):
        extract(env["texts"], tmp_path / "x.parquet", ExtractOptions(device="cpu", model=str(env["bert"]), **opts))
    assert not (tmp_path / "x.parquet").exists()


def test_pickle_only_checkpoint_is_refused(env: dict[str, Path], tmp_path: Path) -> None:
    model_dir = tmp_path / "bin-model"
    model_dir.mkdir()
    for f in env["bert"].iterdir():
        if f.suffix != ".safetensors":
            (model_dir / f.name).write_bytes(f.read_bytes())
    (model_dir / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(DmoError, match="never unpickles"):
        extract(env["texts"], tmp_path / "x.parquet", ExtractOptions(device="cpu", model=str(model_dir)))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_sentence_transformers_checkpoint_matches_encode(env: dict[str, Path], tmp_path: Path) -> None:
    """A checkpoint saved by the installed sentence-transformers: pooling/normalization read from modules.json."""
    st = pytest.importorskip("sentence_transformers", reason="sentence-transformers not installed")
    from sentence_transformers import models

    model = st.SentenceTransformer(
        modules=[
            models.Transformer(str(env["bert"]), max_seq_length=16),
            models.Pooling(32, "cls"),
            models.Normalize(),
        ],
        device="cpu",
    )
    model.save(str(tmp_path / "st"))
    out = tmp_path / "st.parquet"
    report = extract(env["texts"], out, ExtractOptions(device="cpu", model=str(tmp_path / "st"), batch_size=8))
    assert report["pooling"] == "cls" and report["normalize"] is True
    texts = pd.read_csv(env["texts"])["text"].tolist()
    np.testing.assert_allclose(_features(pq.read_table(out)), model.encode(texts, batch_size=8), atol=1e-5)

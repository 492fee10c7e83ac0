"""`dmo extract` failures that must be clear exit-2 messages, with or without the optional extra installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_dmo

from dmocli.errors import DmoError


def _image_folder(root: Path) -> Path:
    folder = root / "imgs" / "a"
    folder.mkdir(parents=True)
    (folder / "x.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # never decoded: the command fails before
    return root / "imgs"


def test_missing_model_folder(tmp_path: Path) -> None:
    proc = run_dmo("extract", _image_folder(tmp_path), "-o", tmp_path / "f.parquet", "--model", str(tmp_path / "nope"))
    assert proc.returncode == 2, proc.stderr
    assert "no such folder" in proc.stderr and "--model /path/to/folder" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "f.parquet").exists()


def test_a_text_table_is_never_replaced_by_its_own_features(tmp_path: Path) -> None:
    texts = tmp_path / "texts.csv"
    texts.write_text("text,label\nhello,a\nworld,b\n")
    before = texts.read_bytes()
    for args in (["-o", texts], ["-o", tmp_path / "f.parquet", "--report", tmp_path / "f.parquet"]):
        proc = run_dmo("extract", texts, *args, "--model", str(tmp_path / "nope"))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "same file" in proc.stderr and "choose another" in proc.stderr or "different paths" in proc.stderr
    assert texts.read_bytes() == before and not (tmp_path / "f.parquet").exists()


def test_hub_name_not_in_the_offline_cache() -> None:
    pytest.importorskip("huggingface_hub", reason='needs the extract extra: pip install "dmocli[extract]"')
    from dmocli.extract.backbones import resolve_model_dir

    with pytest.raises(DmoError, match="not in the local Hugging Face cache") as info:
        resolve_model_dir("dmocli-tests/no-such-model")
    assert "hf download dmocli-tests/no-such-model" in str(info.value) and "--model /path/to/folder" in str(info.value)


def _run_without(modules: list[str], code: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter where importing `modules` fails, as if they were not installed."""
    block = "; ".join(f"sys.modules[{m!r}] = None" for m in modules)
    return subprocess.run(
        [sys.executable, "-c", f"import sys; {block}; {code}"], capture_output=True, text=True, timeout=120
    )


def test_core_imports_and_extract_fails_clearly_without_the_extra(tmp_path: Path) -> None:
    extras = ["transformers", "timm", "PIL", "huggingface_hub"]
    args = [str(_image_folder(tmp_path)), "-o", str(tmp_path / "f.parquet"), "--model", "org/model"]
    proc = _run_without(
        extras,
        "import dmocli.cli.process, dmocli.pipelines.train, dmocli.use.apply, dmocli.extract; print('ok'); "
        f"dmocli.cli.process.main(['extract', *{args!r}])",
    )
    assert proc.stdout.strip() == "ok", proc.stderr
    assert proc.returncode == 2, proc.stderr
    assert 'pip install "dmocli[extract]"' in proc.stderr and "Traceback" not in proc.stderr


def test_augmentations_are_seeded_per_item_and_view() -> None:
    Image = pytest.importorskip("PIL.Image", reason='needs the extract extra: pip install "dmocli[extract]"')
    from dmocli.extract.augment import augment
    from dmocli.extract.views import View, parse_views

    assert parse_views("weak:1,strong:2") == [View("weak", 0), View("strong", 0), View("strong", 1)]
    with pytest.raises(DmoError, match="unknown policy 'medium'"):
        parse_views("medium:2")
    img = Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8))
    a = np.asarray(augment(img, View("strong", 0), 0, "x.jpg"))
    assert a.shape == (32, 32, 3)
    assert np.array_equal(a, np.asarray(augment(img, View("strong", 0), 0, "x.jpg")))
    others = [np.asarray(augment(img, View("strong", 0), 0, f"{k}.jpg")) for k in range(5)]
    assert not all(np.array_equal(a, o) for o in others)


# ---- the folder walk: symlink loops, links to other folders, names that are not UTF-8 -------------------------
BAD_FILE, BAD_DIR = os.fsdecode(b"bad\xff.png"), os.fsdecode(b"odd\xfe")


def _png(path: Path, shade: int) -> None:
    Image = pytest.importorskip("PIL.Image", reason='needs the extract extra: pip install "dmocli[extract]"')
    Image.fromarray(np.full((30, 30, 3), shade, np.uint8)).save(path)


def _tangled_folder(root: Path) -> Path:
    """cat/ and dog/ with 3 images each, a link to a folder outside (2 images), and what the walk must leave out:
    a loop to the root, a loop to its own folder, a second link to the outside folder, a file and a folder whose
    names are not UTF-8."""
    imgs, birds = root / "imgs", root / "outside" / "birds"
    for folder, n in ((imgs / "cat", 3), (imgs / "dog", 3), (birds, 2)):
        folder.mkdir(parents=True)
        for i in range(n):
            _png(folder / f"i{i}.png", 40 * i)
    os.symlink(imgs, imgs / "cat" / "loop")
    os.symlink(imgs / "dog", imgs / "dog" / "again")
    os.symlink(birds, imgs / "birds")
    os.symlink(birds, imgs / "cat" / "birds_too")
    try:
        _png(imgs / "dog" / BAD_FILE, 200)
        (imgs / BAD_DIR).mkdir()
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    _png(imgs / BAD_DIR / "i0.png", 100)
    return imgs


WALKED = {"cat/birds_too": "birds", "cat/loop": ".", "dog/again": "dog"}  # link -> where its folder was walked


@pytest.fixture(scope="module")
def tangled(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One in-process extraction of the tangled folder with a tiny random DINOv2 (offline, CPU)."""
    pytest.importorskip("transformers", reason='needs the extract extra: pip install "dmocli[extract]"')
    import pyarrow.parquet as pq
    from test_extract import _build_models

    from dmocli.extract import ExtractOptions, extract

    root = tmp_path_factory.mktemp("tangled")
    dino, _ = _build_models(root)
    imgs = _tangled_folder(root)
    report = extract(imgs, root / "f.parquet", ExtractOptions(model=str(dino), device="cpu", workers=0))
    return {"root": root, "imgs": imgs, "dino": dino, "report": report, "table": pq.read_table(root / "f.parquet")}


def test_each_real_folder_is_walked_once_with_its_own_label(tangled: dict) -> None:
    """A loop used to repeat the images (6 real ones gave 246 rows) and relabel them `cat`; a link to a folder
    not walked otherwise is still followed, under the link's name."""
    rows = dict(zip(tangled["table"].column("path").to_pylist(), tangled["table"].column("label").to_pylist()))
    counts = {"cat": 3, "dog": 3, "birds": 2}
    assert rows == {f"{c}/i{i}.png": c for c, n in counts.items() for i in range(n)}
    assert tangled["report"]["n_rows"] == tangled["report"]["n_items"] == 8


def test_what_the_walk_left_out_is_reported(tangled: dict) -> None:
    from jsonschema import Draft202012Validator

    from dmocli.report import report_schema

    report = tangled["report"]
    assert list(Draft202012Validator(report_schema()).iter_errors(report)) == []
    walked = {s["path"]: s.get("same_as") for s in report["walk_skipped"] if s["reason"].startswith("folder already")}
    assert walked == WALKED
    not_utf8 = [s["path"] for s in report["walk_skipped"] if s["reason"] == "name is not valid UTF-8"]
    assert not_utf8 == ["dog/bad\\xff.png", "odd\\xfe"]
    assert report["n_walk_skipped"] == 5 and report["n_skipped"] == 0
    loops, names = report["warnings"]  # the CLI prints each as a `dmo: warning:` line on stderr
    assert loops.startswith("left out 3 path(s), folder already walked")
    assert "cat/birds_too, cat/loop, dog/again" in loops
    assert names.startswith("left out 2 path(s), name is not valid UTF-8: dog/bad\\xff.png, odd\\xfe")


def test_the_cli_warns_on_stderr_and_exits_0(tangled: dict) -> None:
    """The exit status and stderr are the process's: a name that is not UTF-8 used to end the run with exit 1."""
    out = tangled["root"] / "cli.parquet"
    proc = run_dmo(
        "extract", tangled["imgs"], "-o", out, "--model", tangled["dino"], "--device", "cpu", "--workers", "0"
    )
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("dmo: warning: left out")]
    assert len(warnings) == 2 and "cat/loop" in warnings[0] and "dog/bad\\xff.png" in warnings[1], proc.stderr
    assert "wrote 8 rows" in proc.stdout


def test_a_text_folder_with_a_loop_is_walked_once(tmp_path: Path) -> None:
    from dmocli.extract.items import discover

    for cls in ("pos", "neg"):
        (tmp_path / cls).mkdir()
        (tmp_path / cls / "a.txt").write_text(f"a {cls} text")
    os.symlink(tmp_path, tmp_path / "pos" / "up")
    items = discover(tmp_path, "auto", "text", None)
    assert items.kind == "text" and items.keys.to_pylist() == ["neg/a.txt", "pos/a.txt"]
    assert items.labels.to_pylist() == ["neg", "pos"]
    assert [(s["path"], s["same_as"]) for s in items.walk_skipped] == [("pos/up", ".")]


def test_a_folder_whose_only_image_has_a_bad_name_says_why(tmp_path: Path) -> None:
    from dmocli.extract.items import image_folder

    (tmp_path / "cat").mkdir()
    try:
        _png(tmp_path / "cat" / BAD_FILE, 0)
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    with pytest.raises(DmoError, match=r"no image files .* cat/bad\\xff.png: name is not valid UTF-8"):
        image_folder(tmp_path)


def test_a_folder_that_cannot_be_listed_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """os.walk dropped such a folder without a word. Listing is refused by a stand-in for os.scandir: a chmod 0
    folder can still be listed by root, which runs the tests in some containers."""
    from dmocli.extract.items import discover

    for cls in ("pos", "neg"):
        (tmp_path / cls).mkdir()
        (tmp_path / cls / "a.txt").write_text(f"a {cls} text")
    scandir = os.scandir

    def refuse_neg(path: str) -> object:
        if Path(path).name == "neg":
            raise PermissionError(13, "Permission denied", path)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse_neg)
    items = discover(tmp_path, "text", "text", None)
    assert items.keys.to_pylist() == ["pos/a.txt"]
    assert items.walk_skipped == [
        {"path": "neg", "reason": "folder cannot be listed", "error": "PermissionError: Permission denied"}
    ]

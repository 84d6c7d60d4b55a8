"""The whole book builds for a model chosen by one setting, $BERT_ATTENTION_MODEL: here a tiny random
BERT (2 layers x 4 heads) with a real WordPiece vocabulary, on the small configuration, and every page
names the model analysed."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.book


@pytest.fixture(scope="module")
def small_bert_dir(tmp_path_factory) -> Path:
    """2 layers x 4 heads, hidden size 32, random weights, with the default model's uncased vocabulary."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from helpers.core.models import default_model_path

    directory = tmp_path_factory.mktemp("small-random-bert")
    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=512)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def test_book_builds_for_the_model_in_the_environment(small_bert_dir, tmp_path):
    src = tmp_path / "book"
    src.mkdir()
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, src / name)
    for folder in ("book", "notebooks", "benchmarks"):  # the Performance chapter runs the benchmark scripts
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "_build", "results"))
    env = {**os.environ, "BERT_ATTENTION_MODEL": str(small_bert_dir), "BERT_ATTENTION_SMALL": "1",
           "BERT_ATTENTION_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1",
           "BOOK_ASSETS_DIR": str(ROOT / ".book_assets")}
    jb = Path(sys.executable).with_name("jupyter-book")
    done = subprocess.run([str(jb), "build", str(src), "-W", "-n", "--keep-going"], env=env,
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    html = src / "_build" / "html"
    name = str(small_bert_dir)
    size = re.compile(r"2 layers x 4 heads")
    pages = [html / "book" / "intro.html", *sorted((html / "notebooks").glob("0*.html")), html / "notebooks" / "results_at_a_glance.html"]
    assert len(pages) >= 8
    for page in pages:
        text = " ".join(re.sub(r"<[^>]+>", " ", page.read_text()).split())  # the words a reader sees
        assert name in text and size.search(text), f"{page.name} does not name the model analysed"
        # the default's own description (name, size, architecture) must not appear: it is not the model analysed
        assert "all-MiniLM-L6-v2 (6 layers x 12 heads, BertModel" not in text, f"{page.name} names the default model"

"""One small build of the whole book, shared by the book tests: the any-model test reads every page of
it, the browser test opens its chapter 1 in Chromium. It is built for a tiny random BERT (2 layers x 4
heads, the default's vocabulary) chosen by ``$BERT_ATTENTION_MODEL``, in the small configuration, with
the book's own JavaScript when ``.book_assets`` is installed. Building it once (not once per test file)
keeps the test command within its time."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
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


def build_small_book(model_dir: Path, src: Path) -> Path:
    """``_build/html`` of the whole book for ``model_dir``, small configuration, built in ``src`` as
    ``scripts/build_book.sh`` builds: the pages executed two at a time into jupyter-book's cache, then rendered
    (warnings as errors), every page found executed."""
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, src / name)
    for folder in ("book", "notebooks", "benchmarks"):  # the Performance chapter runs the benchmark scripts
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "_build", "latest"))
    env = {**os.environ, "BERT_ATTENTION_MODEL": str(model_dir), "BERT_ATTENTION_SMALL": "1",
           "BERT_ATTENTION_CACHE": str(src / "cache"), "HF_HUB_OFFLINE": "1",
           "BOOK_ASSETS_DIR": str(ROOT / ".book_assets")}
    executed = subprocess.run([sys.executable, str(ROOT / "scripts" / "execute_book.py"), "--book", str(src), "--jobs", "2"],
                              env=env, capture_output=True, text=True, timeout=1500)
    assert executed.returncode == 0 and "0 failed" in executed.stdout, executed.stdout[-4000:] + executed.stderr[-4000:]
    jb = Path(sys.executable).with_name("jupyter-book")
    done = subprocess.run([str(jb), "build", str(src), "-W", "-n", "--keep-going"], env=env,
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    log = done.stdout + done.stderr
    # jupyter-book found every page executed: it rendered them without running any again
    assert "Executing notebook" not in log and log.count("Using cached notebook") == len(list((src / "notebooks").glob("*.ipynb"))), log[-4000:]
    return src / "_build" / "html"


@pytest.fixture(scope="session")
def small_book(small_bert_dir, tmp_path_factory) -> Path:
    """``_build/html`` of the whole book for :func:`small_bert_dir`, small configuration (built once)."""
    return build_small_book(small_bert_dir, tmp_path_factory.mktemp("book"))


@pytest.fixture(scope="session")
def small_decoder_dir(tmp_path_factory) -> Path:
    """The sinks chapter's tiny random Llama (4 layers x 4 heads, byte-level BPE, BOS ``<s>``), built as the chapter
    builds its stand-in (:func:`helpers.sinks.decoder.random_decoder_dir`)."""
    from helpers.sinks.decoder import random_decoder_dir

    return random_decoder_dir(tmp_path_factory.mktemp("decoder-cache"))


@pytest.fixture(scope="session")
def small_decoder_book(small_decoder_dir, tmp_path_factory) -> Path:
    """``_build/html`` of the whole book for :func:`small_decoder_dir`, a decoder, small configuration."""
    return build_small_book(small_decoder_dir, tmp_path_factory.mktemp("decoder-book"))

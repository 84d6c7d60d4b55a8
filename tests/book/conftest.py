"""The small builds of the whole book, shared by the book tests; each is built once (not once per test file), which
keeps the test command within its time:

- ``small_book``: the offline default model (the book's own), in the small configuration, with the book's own
  JavaScript when ``.book_assets`` is installed. Building it executes every chapter with the default model, as the
  chapter notebooks' own test once did (nbmake, now retired: the same execution twice cost about 5 minutes of the
  suite), and renders them with warnings as errors; the browser test opens its chapter 2 in Chromium, and the
  CI-sized comparison reads the analyses it left in its cache.
- ``small_decoder_book``: a tiny random decoder chosen by ``$BERT_ATTENTION_MODEL``, the model any reader may set:
  the decoder test and the any-model test read every page of it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def build_small_book(model_dir: Path | None, src: Path) -> Path:
    """``_build/html`` of the whole book for ``model_dir`` (``None``: the offline default), small configuration, built
    in ``src`` (its analysis cache in ``src / "cache"``) as
    ``scripts/build_book.sh`` builds: the pages executed two at a time into jupyter-book's cache, then rendered
    (warnings as errors), every page found executed."""
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, src / name)
    for folder in ("book", "notebooks", "benchmarks"):  # the Performance chapter runs the benchmark scripts
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "_build", "latest"))
    env = {**os.environ, "BERT_ATTENTION_SMALL": "1", "BERT_ATTENTION_CACHE": str(src / "cache"), "HF_HUB_OFFLINE": "1",
           "BOOK_ASSETS_DIR": str(ROOT / ".book_assets")}
    env.pop("BERT_ATTENTION_MODEL", None)  # the default, unless a model is given
    if model_dir is not None:
        env["BERT_ATTENTION_MODEL"] = str(model_dir)
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
def small_book(tmp_path_factory) -> Path:
    """``_build/html`` of the whole book for the offline default model, small configuration (built once); its
    analysis cache is ``small_book.parents[1] / "cache"``."""
    return build_small_book(None, tmp_path_factory.mktemp("book"))


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

"""Shared fixtures: a tiny random BERT saved to disk (no download), a toy treebank, an isolated cache."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
TOY_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "'", "s", "the", "a", "cat", "dog", "sat",
    "on", "mat", "un", "##aff", "##able", "sit", "is", "big", "##gest",
]


RUN_TEMP_GB = 5  # what a whole run writes under pytest's base temporary folder (measured: 4.5 GB)


def pytest_sessionstart(session) -> None:
    """Say how much space is free where the run writes (even under ``-q``): a disk that fills mid-run fails
    tests at random with ``OSError`` (errno 28), far from the cause; this line at the top of the log names it."""
    given = session.config.getoption("basetemp", None)
    where = Path(given).resolve().parent if given else Path(tempfile.gettempdir())
    free = shutil.disk_usage(where).free / 1e9
    line = f"temporary files: {where}, {free:.1f} GB free (a whole run writes about {RUN_TEMP_GB} GB there)"
    if free < RUN_TEMP_GB + 1:
        line += "; WARNING: too little space, free some or point TMPDIR at a larger disk"
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


def pytest_configure(config) -> None:
    """No test and no chapter notebook touches the network or the user's cache: set here, before anything
    runs (the kernels and commands tests start inherit it), one analysis cache per process (per xdist worker),
    which the tests that share their inputs read and fill (the small book builds keep caches of their own)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    factory = getattr(config, "_tmp_path_factory", None)  # pytest's own temporary folders (kept as it keeps them)
    os.environ["BERT_ATTENTION_CACHE"] = str(factory.mktemp("cache") if factory is not None
                                             else Path(tempfile.mkdtemp(prefix="bert-attention-cache-")))


# Tests run on two processes (pytest-xdist, ``--dist loadgroup``, in scripts/test.sh). Items that share work run on
# one of them, in collection order: the tests of the small book build (:func:`tests.book.conftest.small_book`, the
# default model: it executes every chapter, and the CI-sized comparison reads the analyses it cached), and of the
# decoder's (:func:`tests.book.conftest.small_decoder_book`).
SHARED_WORK = {
    "small-book": lambda item: "small_book" in getattr(item, "fixturenames", ()),
    "decoder-book": lambda item: "small_decoder_book" in getattr(item, "fixturenames", ()),
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the marks into groups
def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        for group, shares in SHARED_WORK.items():
            if shares(item):
                item.add_marker(pytest.mark.xdist_group(group))
                break


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer, 4-head random BERT with a toy WordPiece vocabulary, saved with save_pretrained."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    directory = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = BertTokenizer(vocab={w: i for i, w in enumerate(TOY_VOCAB)}, do_lower_case=True)
    config = BertConfig(vocab_size=len(TOY_VOCAB), hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_lm(tiny_model_dir):
    from helpers import load_model

    return load_model(str(tiny_model_dir))


@pytest.fixture
def toy_conllu() -> Path:
    return FIXTURES / "toy.conllu"


def write_toy_data(root: Path, *, treebanks: bool = True) -> Path:
    """Toy corpora shaped like ``../shared/data`` under ``root/data``: two GUM documents with OntoGUM
    coreference (``GUM_dev_coref`` in dev, ``GUM_toy_coref`` in test) and, with ``treebanks``, the toy
    treebank as GUM_a (train: unlisted), GUM_b (dev), GUM_c (test) and as UD English EWT dev."""
    data = root / "data"
    (data / "gum" / "dep").mkdir(parents=True)
    (data / "gum" / "ontogum").mkdir(parents=True)
    for name in ("GUM_dev_coref", "GUM_toy_coref"):
        shutil.copy(FIXTURES / "coref_toy.conllu", data / "gum" / "dep" / f"{name}.conllu")
        shutil.copy(FIXTURES / "coref_toy.conll", data / "gum" / "ontogum" / f"{name}.conll")
    dev, test = ["GUM_dev_coref"], ["GUM_toy_coref"]
    if treebanks:
        for name in ("GUM_a", "GUM_b", "GUM_c"):  # documents with paragraphs (segments)
            shutil.copy(FIXTURES / "toy.conllu", data / "gum" / "dep" / f"{name}.conllu")
        dev, test = ["GUM_b", *dev], ["GUM_c", *test]
        (data / "ud-english-ewt").mkdir()
        shutil.copy(FIXTURES / "toy.conllu", data / "ud-english-ewt" / "en_ewt-ud-dev.conllu")
    listing = lambda names: "".join(f"  * {n}\n" for n in names)  # noqa: E731
    (data / "gum" / "splits.md").write_text(f"## dev\n\n{listing(dev)}\n## test\n\n{listing(test)}")
    return data


@pytest.fixture
def toy_data(tmp_path) -> Path:
    """:func:`write_toy_data` in this test's temporary folder (treebanks and coreference)."""
    return write_toy_data(tmp_path)


@pytest.fixture
def toy_coref_data(tmp_path) -> Path:
    """:func:`write_toy_data` with the two coreference documents only."""
    return write_toy_data(tmp_path, treebanks=False)


@pytest.fixture
def shared_data() -> Path:
    """The real corpora, or skip when this machine has none."""
    from helpers.config import DataNotFoundError, data_dir

    try:
        return data_dir()
    except DataNotFoundError as err:
        pytest.skip(str(err))


@pytest.fixture(scope="session")
def tiny_bpe_model_dir(tmp_path_factory) -> Path:
    """A 2-layer random RoBERTa with a byte-level BPE vocabulary trained here on a few sentences."""
    import json

    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer

    directory = tmp_path_factory.mktemp("tiny-roberta")
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["the cat sat on the mat", "a dog sat", "the dog is big"] * 20, vocab_size=290,
                            min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                            show_progress=False)
    bpe.save_model(str(directory))
    vocab = json.loads((directory / "vocab.json").read_text())
    merges = [tuple(line.split()) for line in (directory / "merges.txt").read_text().splitlines()[1:] if line]
    tokenizer = RobertaTokenizer(vocab=vocab, merges=merges)
    config = RobertaConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=32, max_position_embeddings=66, pad_token_id=1)
    torch.manual_seed(0)
    RobertaModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


SPLITS = "# Splits\n\n## dev\n\n  * GUM_b\n\n## test\n\n  * GUM_c\n  * GUM_reddit_x\n\n## test2\n\n  * GENTLE_d\n"


@pytest.fixture
def fake_data(tmp_path, toy_conllu):
    """A data dir shaped like ../shared/data with four one-file GUM documents."""
    dep = tmp_path / "gum" / "dep"
    dep.mkdir(parents=True)
    for name in ("GUM_a", "GUM_b", "GUM_c", "GENTLE_d"):
        shutil.copy(toy_conllu, dep / f"{name}.conllu")
    (tmp_path / "gum" / "splits.md").write_text(SPLITS)
    return tmp_path

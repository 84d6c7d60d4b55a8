"""The whole book builds for a model chosen by one setting, $BERT_ATTENTION_MODEL: here the tiny random decoder
(4 layers x 4 heads) of the shared ``small_decoder_book`` build of ``tests/book/conftest.py`` (small configuration,
warnings as errors), and every page names the model analysed, never the default."""
from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.book


def test_book_builds_for_the_model_in_the_environment(small_decoder_dir, small_decoder_book):
    html = small_decoder_book
    name = str(small_decoder_dir)
    size = re.compile(r"4 layers x 4 heads")
    pages = [html / "book" / "intro.html", *sorted((html / "notebooks").glob("0*.html")), html / "notebooks" / "results_at_a_glance.html"]
    assert len(pages) >= 8
    for page in pages:
        text = " ".join(re.sub(r"<[^>]+>", " ", page.read_text()).split())  # the words a reader sees
        assert name in text and size.search(text), f"{page.name} does not name the model analysed"
        # the default's own description (name, size, architecture) must not appear: it is not the model analysed
        assert "all-MiniLM-L6-v2 (6 layers x 12 heads, BertModel" not in text, f"{page.name} names the default model"

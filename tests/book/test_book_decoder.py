"""The whole book builds for a decoder: the sinks chapter's tiny random Llama (4 layers x 4 heads, BOS ``<s>``) as
the book's model, on the small configuration (``small_decoder_book`` of ``tests/book/conftest.py``: every page
executed, rendered with warnings as errors). Each section chapter says at its top that the model is a decoder read
under its causal mask, and what that changes there; chapter 3 says why it draws no next-token or [SEP] panel."""
from __future__ import annotations

import html as entities
import re

import pytest

pytestmark = pytest.mark.book

SECTION_CHAPTERS = ("03_surface", "04_syntax", "04_coref", "05_probe", "06_cluster", "07_norms")


def words(page) -> str:
    """The words a reader sees on ``page``, with the renderer's curly apostrophe undone (’ for '); an option such as
    ``--no-bos`` must reach the page as written (``_config.yml``'s ``smartquotes_action`` leaves dashes alone)."""
    text = entities.unescape(" ".join(re.sub(r"<[^>]+>", " ", page.read_text()).split()))
    return text.replace("’", "'")


def test_the_whole_book_builds_for_a_decoder(small_decoder_dir, small_decoder_book):
    from helpers.section import CAUSAL_MASK
    from helpers.results import SECTIONS

    pages = small_decoder_book / "notebooks"
    causal = {s.chapter: s.causal for s in SECTIONS}
    for chapter in SECTION_CHAPTERS:
        text = words(pages / f"{chapter}.html")
        assert str(small_decoder_dir) in text, f"{chapter} does not name the model analysed"
        assert "is a decoder (its inputs start with BOS)" in text and CAUSAL_MASK in text, chapter
        definition = causal[chapter].split("<")[0][:120]  # (the page's text is read with its tags, and any "<", removed)
        assert definition in text, f"{chapter} does not say what its section is under a causal mask"
    surface = words(pages / "03_surface.html")
    # Figure 1's next-token and [SEP] panels, and the [SEP]-from-[SEP] scatter: each replaced by why
    assert surface.count("Not drawn for this model") == 3
    maps = words(pages / "02_attention_maps.html")
    assert "<s>" in maps and "Not drawn" not in maps  # the decoder's BOS token labels its first position

"""Every {ref} in the book's pages and chapters resolves, checked without building the book.

Sphinx gives a bare ``{ref}`label``` its text from the title the label stands on, so a label placed before a
paragraph (not a heading) can only be linked with explicit text, ``{ref}`text <label>```; a bare link to it fails
the build with "A title or caption not found" (chapter 10 did, and only the slow book test noticed)."""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LABEL = re.compile(r"^\(([A-Za-z0-9_.:-]+)\)=\s*$")
REF = re.compile(r"\{ref\}`([^`]*)`")
EXPLICIT = re.compile(r"^(?P<text>.*\S)\s*<(?P<label>[^<>]+)>$", re.S)


def page_texts(root: Path = ROOT) -> dict[str, str]:
    """The Markdown of book/*.md and of every notebook's markdown cells, by file name."""
    texts = {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in sorted((root / "book").glob("*.md"))}
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        texts[str(path.relative_to(root))] = "\n\n".join(
            "".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return texts


def labels(texts: dict[str, str]) -> dict[str, bool]:
    """Each ``(label)=`` target, and whether it stands on a heading (the next non-blank line starts with '#')."""
    found: dict[str, bool] = {}
    for text in texts.values():
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = LABEL.match(line)
            if m:
                following = next((l for l in lines[i + 1:] if l.strip()), "")
                found[m.group(1)] = following.lstrip().startswith("#")
    return found


def broken_references(texts: dict[str, str]) -> list[str]:
    """``file: {ref}`...` (why)`` for every link that would not resolve to a titled target."""
    targets = labels(texts)
    broken = []
    for name, text in texts.items():
        for m in REF.finditer(text):
            body = m.group(1)
            explicit = EXPLICIT.match(body)
            label = explicit.group("label") if explicit else body
            if label not in targets:
                broken.append(f"{name}: {m.group(0)} (no label {label!r})")
            elif not explicit and not targets[label]:
                broken.append(f"{name}: {m.group(0)} (the label is not on a heading: give the link its text)")
    return broken


def test_every_reference_resolves():
    assert not broken_references(page_texts()), broken_references(page_texts())


def test_a_bare_link_to_a_paragraph_label_is_caught():
    texts = {"a.md": "(sec-a)=\n## A\n\n(para-b)=\n**B.** text\n",
             "b.md": "{ref}`sec-a`, {ref}`text <para-b>`, {ref}`para-b`, {ref}`missing`"}
    assert broken_references(texts) == [
        "b.md: {ref}`para-b` (the label is not on a heading: give the link its text)",
        "b.md: {ref}`missing` (no label 'missing')"]

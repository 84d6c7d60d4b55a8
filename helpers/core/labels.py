"""Head labels: code is 0-based ``(layer, head)``, every text and figure is 1-based ``"L-H"`` as in the paper.

>>> from helpers.core.labels import head_label, parse_head_label
>>> head_label(7, 10)          # code (7, 10) is the paper's determiner head 8-11
'8-11'
>>> parse_head_label("8-11")
(7, 10)
"""
from __future__ import annotations

import re


def head_label(layer: int, head: int) -> str:
    """1-based ``"layer-head"`` from 0-based indices."""
    return f"{layer + 1}-{head + 1}"


def parse_head_label(label: str) -> tuple[int, int]:
    """0-based ``(layer, head)`` from a 1-based ``"layer-head"`` label."""
    match = re.fullmatch(r"\s*(\d+)-(\d+)\s*", label)
    if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise ValueError(f"head label {label!r}: expected 1-based 'layer-head', e.g. '8-11'")
    return int(match.group(1)) - 1, int(match.group(2)) - 1


def heads_phrase(labels: list[str], *, most: int = 12) -> str:
    """A list of head labels as words: ``"no head"``, ``"1 head: 1-12"``, ``"3 heads: 1-2, 2-5, 4-1"``
    (at most ``most`` labels, then ``"..."``)."""
    if not labels:
        return "no head"
    shown = ", ".join(labels[:most]) + (", ..." if len(labels) > most else "")
    return f"{len(labels)} head{'s' if len(labels) != 1 else ''}: {shown}"

"""How verdicts are shown wherever several are: each verdict's colour, its coloured mark where a page cannot colour a
cell, a legend, and the tally sentence ("13 reproduced, 5 partly, 0 inconclusive, 2 not reproduced").

Light on purpose (it imports :mod:`helpers.claims` only), so that ``scripts/readme_tables.py`` writes the README's
table with the same colours and counts as the book's pages.

>>> verdict_tally(["reproduced", "partly", "reproduced", "not applicable"])
'2 reproduced, 1 partly, 0 inconclusive, 0 not reproduced, 1 not applicable'
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

from helpers.claims import INCONCLUSIVE, NOT_APPLICABLE, NOT_REPRODUCED, PARTLY, REPRODUCED, VERDICTS

# Each verdict's colour, wherever verdicts are shown in colour (the comparison chapter's table, results at a glance):
# green reproduced, orange partly, blue inconclusive, red not reproduced, grey not applicable.
VERDICT_COLOURS = {REPRODUCED: "#c7e9c0", PARTLY: "#fdd0a2", INCONCLUSIVE: "#c6dbef", NOT_REPRODUCED: "#fcbba1",
                   NOT_APPLICABLE: "#e0e0e0"}
# The square of the same colour, where a page cannot colour a cell (GitHub drops a README's inline styles).
VERDICT_MARKS = {REPRODUCED: "\U0001F7E9", PARTLY: "\U0001F7E7", INCONCLUSIVE: "\U0001F7E6",
                 NOT_REPRODUCED: "\U0001F7E5", NOT_APPLICABLE: "\u2B1C"}  # 🟩 🟧 🟦 🟥 ⬜


def verdict_legend_html() -> str:
    """One line naming each verdict on its colour (:data:`VERDICT_COLOURS`), for a coloured table's reader."""
    from html import escape

    return "<p>" + " ".join(f'<span style="background:{colour};padding:0 0.4em">{escape(v)}</span>'
                            for v, colour in VERDICT_COLOURS.items()) + "</p>"


def verdict_tally(verdicts: Iterable[str]) -> str:
    """How many of each verdict: every one of :data:`helpers.claims.VERDICTS`, zeros included, in their order, then
    "not applicable" where there is any. Raises on a string that is no verdict."""
    counts = Counter(verdicts)
    unknown = sorted(set(counts) - {*VERDICTS, NOT_APPLICABLE})
    if unknown:
        raise ValueError(f"verdicts {unknown} are not among {(*VERDICTS, NOT_APPLICABLE)}")
    shown = [*VERDICTS, *([NOT_APPLICABLE] if counts[NOT_APPLICABLE] else [])]
    return ", ".join(f"{counts[v]} {v}" for v in shown)


JUDGED_AGAIN = re.compile(r"judged on the measured sink instead \(([\w-]+)\)")  # a premise row's pointer to its row


def tally_sentence(rows: Iterable[dict], model: str) -> str:
    """``"Of the paper's 20 claims tested on MODEL (22 verdicts: 2 judged again on the model's measured sink): 12
    reproduced, ..."`` for claim rows (JSON: ``id``, ``verdict``, ``reason``). A row that a not-applicable row names as
    its claim judged on the model's measured sink is a verdict, not another claim of the paper; without such rows
    the parenthesis is left out. The tally is :func:`verdict_tally` of every row."""
    rows = list(rows)
    again = {m.group(1) for r in rows for m in [JUDGED_AGAIN.search(r.get("reason") or "")] if m}
    again &= {r["id"] for r in rows}
    claims = len(rows) - len(again)
    extra = f" ({len(rows)} verdicts: {len(again)} judged again on the model's measured sink)" if again else ""
    return f"Of the paper's {claims} claims tested on {model}{extra}: {verdict_tally(r['verdict'] for r in rows)}."

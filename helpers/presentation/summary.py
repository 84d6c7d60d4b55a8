""""Results at a glance": every claim in one table, each linked to the chapter that tests it.
"""
from __future__ import annotations

from helpers.claims import Claim
from helpers.presentation.verdicts import tally_sentence
from helpers.results import section_of


def chapter_of(claim: Claim) -> str:
    """The chapter notebook that states ``claim`` (its section's record's)."""
    return section_of(claim).chapter


def claims_html(claims: list[Claim]) -> str:
    """The claims as an HTML table, after a legend of the verdicts' colours, with bold verdicts on their colour
    (:data:`helpers.presentation.verdicts.VERDICT_COLOURS`) and links to the chapters' pages."""
    from html import escape

    import pandas as pd

    from helpers.presentation.verdicts import VERDICT_COLOURS, verdict_legend_html

    return verdict_legend_html() + pd.DataFrame([
        {"section": escape(c.section), "claim": escape(c.claim), "paper": escape(c.paper), "ours": escape(c.ours),
         "verdict": f'<span style="background:{VERDICT_COLOURS[c.verdict]};padding:0 0.3em"><b>{c.verdict}</b></span>',
         "chapter": f'<a href="{chapter_of(c)}.html">{escape(chapter_of(c).split("_", 1)[1].replace("_", " "))}</a>'}
        for c in claims]).to_html(escape=False, index=False)


def tally_text(claims: list[Claim], model: str) -> str:
    """``"Of the paper's 20 claims tested on MODEL (22 verdicts: 2 judged again on the model's measured sink): 12
    reproduced, ..."`` (:func:`helpers.presentation.verdicts.tally_sentence`), the README's sentence."""
    return tally_sentence([c.to_json() for c in claims], model)

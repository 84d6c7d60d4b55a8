""""Results at a glance": every claim in one table, each linked to the chapter that tests it.
"""
from __future__ import annotations

from helpers.claims import Claim
from helpers.results import section_of


def chapter_of(claim: Claim) -> str:
    """The chapter notebook that states ``claim`` (its section's record's)."""
    return section_of(claim).chapter


def claims_html(claims: list[Claim]) -> str:
    """The claims as an HTML table with bold verdicts and links to the chapters' pages."""
    from html import escape

    import pandas as pd

    return pd.DataFrame([{"section": escape(c.section), "claim": escape(c.claim), "paper": escape(c.paper),
                          "ours": escape(c.ours), "verdict": f"<b>{c.verdict}</b>",
                          "chapter": f'<a href="{chapter_of(c)}.html">'
                                     f'{escape(chapter_of(c).split("_", 1)[1].replace("_", " "))}</a>'}
                         for c in claims]).to_html(escape=False, index=False)

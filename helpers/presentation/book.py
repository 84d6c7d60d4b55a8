"""Small helpers for chapter notebooks: computed values into prose with ``glue``.

>>> glue_text("n_heads", lm.n_heads)                   # in a notebook cell    # doctest: +SKIP

then write ``{glue:}`n_heads``` in a Markdown cell. Values are shown as plain text (a string
glued with ``myst_nb.glue`` would keep its quotes).
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

from helpers.claims import FIELDS, Claim


def claims_table(claims: Iterable[Claim], *, columns: Sequence[str] = ("section", "claim", "paper", "ours", "verdict")):
    """The claims as a pandas DataFrame indexed by id, for a chapter's summary (no NaN: missing is "—")."""
    import pandas as pd

    frame = pd.DataFrame([c.to_json() for c in claims], columns=list(FIELDS)).set_index("id")
    return frame[list(columns)].fillna(MISSING)


def glue_claims(claims: Iterable[Claim]) -> None:
    """Glue each claim's fields for prose, without display: ``{glue:}`det-head.verdict``` (and
    ``.ours``, ``.paper``, ``.claim``)."""
    from helpers.presentation.book import glue_text

    for c in claims:
        for field in ("claim", "paper", "ours", "verdict"):
            glue_text(f"{c.id}.{field}", getattr(c, field))


class _Text(str):
    """A string whose repr is itself, so glued text renders without quotes."""

    def __repr__(self) -> str:
        return str(self)


def glue_text(name: str, value, fmt: str | None = None) -> None:
    """Glue ``value`` (formatted with ``fmt`` when given) under ``name``, without displaying it."""
    from myst_nb import glue

    glue(name, _Text(format(value, fmt) if fmt else str(value)), display=False)


MISSING = "—"  # a cell with nothing to show (never "NaN")


def default(function, parameter: str):
    """The default of ``function``'s keyword ``parameter``, so that prose states a rule's number from the
    code that applies it: ``glue_text("min_words", default(example_sentence, "min_words"))``."""
    import inspect

    return inspect.signature(function).parameters[parameter].default


def _cell(value) -> str:

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    text = str(value).replace("\n", " ").replace("|", "\\|")
    return text if text.strip() else MISSING


def table(frame, *, name: str, caption: str, index: bool = True):
    """A DataFrame as a table the book numbers: a MyST ``{table}`` directive named ``name`` (refer to it
    with ``{numref}`name```), missing values shown as "—".

    The cell that displays it needs the metadata ``{"mystnb": {"markdown_format": "myst"}}`` so that
    the book parses the directive (in Jupyter it shows as a plain Markdown table).
    """
    from IPython.display import Markdown

    frame = frame.reset_index() if index else frame
    header = [_cell(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return Markdown(f"```{{table}} {caption}\n:name: {name}\n\n" + "\n".join(lines) + "\n```\n")

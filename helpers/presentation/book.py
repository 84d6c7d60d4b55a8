"""Small helpers for chapter notebooks: computed values into prose with ``glue``.

>>> glue_text("n_heads", lm.n_heads)                   # in a notebook cell    # doctest: +SKIP

then write ``{glue:}`n_heads``` in a Markdown cell. Values are shown as plain text (a string
glued with ``myst_nb.glue`` would keep its quotes).
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

from helpers.claims import FIELDS, RULE_FIELDS, Claim


def claims_table(claims: Iterable[Claim], *, columns: Sequence[str] = ("section", "claim", "paper", "ours", "verdict")):
    """The claims as a pandas DataFrame indexed by id, for a chapter's summary (no NaN: missing is "—").

    ``columns`` are fields of a claim's JSON (:data:`helpers.claims.FIELDS`, then the rule's,
    :data:`helpers.claims.RULE_FIELDS`: ``"rule"``, ``"interval"``, ``"null"``, ...); a pair (``interval``,
    ``range``) is shown ``"[lo, hi]"`` and the numbers of the rule to 3 significant digits, a list of verdicts
    (``parts``) joined by commas; a row without the field shows "—"."""
    import pandas as pd

    unknown = [c for c in columns if c not in (*FIELDS, *RULE_FIELDS) or c == "id"]
    if unknown:
        raise ValueError(f"claims_table: columns {unknown} are not fields of a claim (one of "
                         f"{[f for f in (*FIELDS, *RULE_FIELDS) if f != 'id']})")
    frame = pd.DataFrame([{k: _rule_cell(k, v) for k, v in c.to_json().items()} for c in claims],
                         columns=[*FIELDS, *RULE_FIELDS], dtype=object).set_index("id")
    return frame[list(columns)].fillna(MISSING)


def _rule_cell(key: str, value):
    """A rule's field as a table shows it (see :func:`claims_table`); the claim's own fields unchanged."""
    if value is None or key in FIELDS:
        return value
    if key in ("interval", "range"):
        return f"[{value[0]:.3g}, {value[1]:.3g}]"
    if key == "parts":
        return ", ".join(value)
    if key == "part_rows":
        return ", ".join(f"{p.get('name')}: {p['verdict']}" for p in value)
    return format(value, ".3g") if isinstance(value, float) else value


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

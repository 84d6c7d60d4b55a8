"""Small helpers for chapter notebooks: computed values into prose with ``glue``.

>>> glue_text("n_heads", lm.n_heads)                   # in a notebook cell    # doctest: +SKIP

then write ``{glue:}`n_heads``` in a Markdown cell. Values are shown as plain text (a string
glued with ``myst_nb.glue`` would keep its quotes).
"""
from __future__ import annotations


class _Text(str):
    """A string whose repr is itself, so glued text renders without quotes."""

    def __repr__(self) -> str:
        return str(self)


def glue_text(name: str, value, fmt: str | None = None) -> None:
    """Glue ``value`` (formatted with ``fmt`` when given) under ``name``, without displaying it."""
    from myst_nb import glue

    glue(name, _Text(format(value, fmt) if fmt else str(value)), display=False)

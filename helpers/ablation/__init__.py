"""Do the heads matter? Heads and sink terms removed (chapter 11; book/methods.md, §Removing heads).

The Python API: ``from helpers.ablation import head_effects`` (:func:`helpers.ablation.effects.head_effects`: the
single-head effects, importance and the sink tests of a model on a list of word lists), imported when first asked
for, so that reading the chapter's claims or statistics does not load torch.
"""
from __future__ import annotations

__all__ = ["head_effects"]


def __getattr__(name: str):
    if name == "head_effects":
        from helpers.ablation.effects import head_effects

        return head_effects
    raise AttributeError(f"module 'helpers.ablation' has no attribute {name!r}")

"""What the chapters show beside their figures: each table and paragraph a chapter builds from its section's
results, so that a chapter cell calls one function here and shows what it returns.

Nothing here computes a statistic: every number comes from a section's report (or the result its record's
run returns), and is only rounded, formatted and labelled here. Tables are pandas DataFrames for
:func:`helpers.presentation.book.table`; text is for :func:`helpers.presentation.book.glue_text`.

>>> table(example_heads(report.figure1.heads), name="tbl-surface-example-heads", caption="...")  # doctest: +SKIP
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from helpers.core.labels import head_label

if TYPE_CHECKING:  # annotations only: importing this module stays cheap
    import pandas as pd


# ------------------------------------------------------------------------------- §3 surface


def example_heads(heads: dict[str, tuple[int, int]]) -> "pd.DataFrame":
    """Figure 1's heads as a table ``pattern | head``: ``heads`` maps each pattern to its 0-based
    ``(layer, head)`` (:func:`helpers.surface.run.figure1_heads`), shown 1-based ``layer-head``."""
    import pandas as pd

    return pd.DataFrame([(name, head_label(*lh)) for name, lh in heads.items()], columns=["pattern", "head"])


FITTED_HEAD = "fitted"  # how the §3 masked-LM report's "source" starts when the head was fitted by us


def mlm_source(mlm: dict) -> str:
    """The sentence naming the masked-LM head the §3 gradients come from (``mlm``: the §3 report's
    ``mlm``, :func:`helpers.surface.mlm.mlm_head`'s report)."""
    return "This model's head: " + mlm["source"] + "."


def mlm_note(mlm: dict) -> str:
    """The paragraph after :func:`mlm_source`: for a head we fitted, how it was fitted and how well it
    predicts held-out tokens (its loss against unigram frequencies), and what its gradients mean; for the
    checkpoint's own head, that the loss is the model's pre-training loss."""
    if not mlm["source"].startswith(FITTED_HEAD):
        return "The gradients are those of the model's own pre-training masked-LM loss, as in the paper."
    return (f"The checkpoint has no masked-LM head, so we fitted a small one (dense, GELU, layer norm, "
            f"scores against the frozen input embeddings) on {mlm['train_tokens']} masked tokens of other "
            f"GUM training segments, keeping the encoder frozen. Its held-out loss is {mlm['heldout_loss']:.2f} "
            f"nats per token against {mlm['heldout_unigram_loss']:.2f} for unigram frequencies. It is a probe "
            f"fitted by us, not the model's own pre-training objective, so these gradients show how much "
            f"attention weights matter for recovering masked words from this encoder, not what the model "
            f"was trained on.")

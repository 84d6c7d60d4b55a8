"""What the chapters show, built in :mod:`helpers.presentation.chapters` and :mod:`helpers.presentation.performance`
from their sections' results: each table and paragraph against an obvious computation written here on small
constructed inputs, and the section reports' parts that the chapters read (computed once, the numbers the
chapters showed when they computed them)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.presentation import chapters


# ------------------------------------------------------------------------------- §3 surface


def test_example_heads_are_labelled_one_based():
    frame = chapters.example_heads({"attends broadly": (0, 2), "attends to [SEP]": (3, 0)})
    assert frame.columns.tolist() == ["pattern", "head"]
    assert frame.values.tolist() == [["attends broadly", "1-3"], ["attends to [SEP]", "4-1"]]


FITTED = {"source": "fitted on the frozen encoder", "train_tokens": 1234, "heldout_loss": 3.14159,
          "heldout_unigram_loss": 6.5}


def test_the_masked_lm_paragraph_of_a_fitted_head_states_its_fit():
    assert chapters.mlm_source(FITTED) == "This model's head: fitted on the frozen encoder."
    note = chapters.mlm_note(FITTED)
    assert "on 1234 masked tokens" in note and "held-out loss is 3.14 nats" in note and "against 6.50 for unigram" in note
    assert note.startswith("The checkpoint has no masked-LM head") and note.endswith("not what the model was trained on.")


def test_the_masked_lm_paragraph_of_the_models_own_head_says_so():
    own = {"source": "the checkpoint's own masked-LM head"}
    assert chapters.mlm_source(own) == "This model's head: the checkpoint's own masked-LM head."
    assert chapters.mlm_note(own) == "The gradients are those of the model's own pre-training masked-LM loss, as in the paper."


def test_figure1_is_the_models_own_attention_on_the_example_segment(tiny_lm, toy_data, tmp_path):
    """The §3 report's Figure 1 example: the heads with the largest statistics, and the segment's maps equal to the
    model's own attention output (both float32 passes over the same ids: equal up to float32 rounding)."""
    import torch

    from helpers.context import RunContext
    from helpers.surface.section import SECTION

    report = SECTION.run(tiny_lm, RunContext(data_dir=toy_data, cache_dir=tmp_path), n_segments=3, max_length=60)
    fig = report.figure1
    for name, statistic in (("attends broadly", "entropy"), ("attends to the next token", "next"),
                            ("attends to [SEP]", "sep"), ("attends to periods and commas", "punct")):
        values = report.stats.per_head[statistic]
        assert values[fig.heads[name]] == values.max(), name
    ids = report.batch.examples[fig.position].input_ids
    assert fig.tokens == tiny_lm.tokenizer.convert_ids_to_tokens(ids.tolist())
    with torch.no_grad():
        out = tiny_lm.model(input_ids=torch.as_tensor(ids)[None], output_attentions=True)
    expected = torch.stack(out.attentions)[:, 0].numpy()  # [layer, head, query, key]
    assert fig.attn.shape == expected.shape == (tiny_lm.n_layers, tiny_lm.n_heads, len(ids), len(ids))
    np.testing.assert_allclose(fig.attn, expected, rtol=1e-5, atol=1e-6)
    assert report.figure1 is fig  # a part: computed once

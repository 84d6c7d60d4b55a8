"""The loss the interventions are measured by, one value per segment (definitions: book/methods.md, §Removing heads).

- A decoder (``lm.causal``): its own next-token loss, the mean cross-entropy over positions ``0..n-2`` of a segment
  (position ``t`` predicts token ``t + 1``), with the model's own head.
- An encoder: a masked-LM loss on BERT-style masking (15 %; 80/10/10; :func:`helpers.core.masked_lm.masked_examples`),
  drawn once per segment from ``seed`` and reused by every intervention, so every difference compares the same
  prediction problems. The head is the checkpoint's own masked-LM head where it has one, else the frozen head fitted
  for the gradient analysis (§3.2): the caller passes it (the surface report's ``mlm_head``).

:class:`Segments` holds the model inputs, the labels and the sink positions; :func:`row_losses` is the loss of any
rows (copies of segments) under the interventions of :mod:`helpers.ablation.interventions`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn

from helpers.core.encoding import Encoded, EncodedBatch
from helpers.core.extract import at_least_float32, model_inputs
from helpers.core.models import LoadedModel
from helpers.core.masked_lm import masked_examples
from helpers.surface.stats import token_masks

IGNORE = -100
LOGIT_ROWS = 2048  # positions whose vocabulary-sized logits are computed at once (a 49k vocabulary: 400 MB)


@dataclass
class Segments:
    """Segments ready for the loss: ``examples`` (the model inputs: an encoder's with its masking applied),
    ``labels`` (per segment ``[token]``, :data:`IGNORE` where nothing is predicted), ``sinks`` (per sink kind, per
    segment ``[token]`` bool: an encoder's ``"sep"`` and ``"cls"``, a decoder's ``"bos"``, its first position),
    ``tokens`` (per segment, the model's token strings of the unmasked input), ``kind`` (what the loss is, said
    wherever a number appears) and ``head`` (an encoder's masked-LM head; ``None`` for a decoder)."""

    examples: list[Encoded]
    labels: list[np.ndarray]
    sinks: dict[str, list[np.ndarray]]
    tokens: list[list[str]]
    kind: str
    head: nn.Module | None

    def __len__(self) -> int:
        return len(self.examples)


def loss_kind(lm: LoadedModel, head_source: str | None = None) -> str:
    """What the loss is: ``"next-token loss (the model's own head)"`` for a decoder; ``"masked-LM loss (HEAD)"`` for
    an encoder, ``HEAD`` saying whose head scores it (``head_source``; without it, only the caller knows whose head
    it was given, so the label says just that)."""
    if lm.causal:
        return "next-token loss (the model's own head)"
    return f"masked-LM loss ({head_source or 'a masked-LM head passed by the caller'})"


def prepare(lm: LoadedModel, batch: EncodedBatch | Sequence[Encoded], *, head: nn.Module | None = None,
            seed: int = 0, head_source: str | None = None) -> Segments:
    """:class:`Segments` of ``batch``'s examples (in their order). An encoder needs ``head`` (its masked-LM head);
    its masking is drawn from ``seed``, once."""
    examples = list(getattr(batch, "examples", batch))
    if not examples:
        raise ValueError("no segment to score: the corpus gave no usable segment")
    originals = [ex.input_ids for ex in examples]
    if lm.causal:
        inputs = examples
        labels = []
        for ex in examples:
            lab = np.full(len(ex), IGNORE, dtype=np.int64)
            lab[:-1] = ex.input_ids[1:]
            labels.append(lab)
        masks = [token_masks(lm.tokenizer, ids, causal=True) for ids in originals]
        sinks = {"bos": [m["cls"] for m in masks]}
    else:
        if head is None:
            raise ValueError(f"{lm.label}: an encoder's loss needs its masked-LM head (the checkpoint's, or the "
                             "gradient analysis's fitted head: the surface section report's mlm_head)")
        order = {ex.index: k for k, ex in enumerate(examples)}
        masked = sorted(masked_examples(lm, examples, seed=seed), key=lambda pair: order[pair[0].index])
        inputs = [ex for ex, _ in masked]
        labels = [lab.astype(np.int64) for _, lab in masked]
        masks = [token_masks(lm.tokenizer, ids) for ids in originals]
        sinks = {"sep": [m["sep"] for m in masks], "cls": [m["cls"] for m in masks]}
    tokens = [lm.tokenizer.convert_ids_to_tokens(ids.tolist()) for ids in originals]
    return Segments(inputs, labels, sinks, tokens, loss_kind(lm, head_source), None if lm.causal else head)


def padded(values: Sequence[np.ndarray], width: int, fill) -> torch.Tensor:
    """``[len(values), width]``: each row's values, then ``fill``."""
    out = np.full((len(values), width), fill, dtype=np.asarray(values[0]).dtype)
    for b, v in enumerate(values):
        out[b, : len(v)] = v
    return torch.from_numpy(out)


def row_losses(lm: LoadedModel, segments: Segments, rows: Sequence[int], *,
               given: Sequence[int] | None = None) -> torch.Tensor:
    """The loss of each row ``[len(rows)]`` (``rows``: indices into ``segments``; a segment may repeat), float32 or
    wider, on ``lm.device``: run inside :func:`~helpers.ablation.interventions.intervene` to apply interventions (one
    per row). ``given``: the segments the model is given when ``intervene``'s ``shared`` repeats them into ``rows``
    inside the model. Autograd follows only if the caller enables it."""
    chosen = [segments.examples[r] for r in (rows if given is None else given)]
    inputs = model_inputs(lm, chosen)
    if lm.causal:
        inputs["use_cache"] = False
    width = inputs["input_ids"].shape[1]
    labels = padded([segments.labels[r] for r in rows], width, IGNORE).to(lm.device)
    hidden = at_least_float32(lm.model(**inputs).last_hidden_state)         # [row, token, hidden]
    scored = labels != IGNORE
    where = scored.nonzero()                                                # [n, 2]: row, token
    if lm.causal:
        out = lm.language_model.get_output_embeddings()
        project = (lambda h: nn.functional.linear(h, out.weight.to(h.dtype),
                                                  None if out.bias is None else out.bias.to(h.dtype)))
    else:
        head = segments.head.to(lm.device)
        dtype = next(head.parameters()).dtype
        project = (lambda h: head(h.to(dtype)).to(h.dtype))
    states, targets = hidden[scored], labels[scored]                         # [n, hidden], [n]: row-major, as where
    per_token = torch.cat([nn.functional.cross_entropy(project(states[i:i + LOGIT_ROWS]), targets[i:i + LOGIT_ROWS],
                                                       reduction="none")
                           for i in range(0, len(targets), LOGIT_ROWS)]) if len(targets) else hidden.new_zeros(0)
    sums = hidden.new_zeros(len(rows)).index_add(0, where[:, 0], per_token)
    counts = scored.sum(1).to(sums.dtype)
    return sums / counts.clamp(min=1)

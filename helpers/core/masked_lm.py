"""BERT-style masking for a masked-LM loss, and the checkpoint's own masked-LM head: what every masked-LM loss of
the package is made of (the gradient analysis of §3.2, the head fitted for a model without one, the ablation
chapter's loss).

Masking is BERT's: 15% of the non-special tokens are chosen; of those 80% become the mask token, 10% a random token
and 10% stay unchanged (at least one token is chosen).

>>> masked = masked_examples(lm, batch.examples, seed=0)        # [(Encoded with masked ids, labels)]  # doctest: +SKIP
>>> head = pretrained_head(lm)                                  # None for a checkpoint without one    # doctest: +SKIP
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from torch import nn

from helpers.core.encoding import Encoded
from helpers.core.models import LoadedModel, quiet_transformers

MASK_RATE = 0.15    # share of a segment's (non-special) tokens chosen for the loss, as in BERT
MASK_BELOW = 0.8    # a chosen token becomes the mask token when its roll is below this (80%),
RANDOM_BELOW = 0.9  # a random token below this (10%), and stays unchanged otherwise (10%)


def bert_mask(input_ids: np.ndarray, special: np.ndarray, rng: np.random.Generator, *, mask_id: int,
              vocab_size: int, rate: float = MASK_RATE) -> tuple[np.ndarray, np.ndarray]:
    """``(masked ids, labels)``; labels are -100 except at the chosen positions (at least one)."""
    ids = np.array(input_ids, copy=True)
    candidates = np.flatnonzero(~special)
    if candidates.size == 0:
        raise ValueError("nothing to mask: every token is special")
    k = max(1, int(round(rate * candidates.size)))
    chosen = rng.choice(candidates, size=k, replace=False)
    labels = np.full_like(ids, -100)
    labels[chosen] = ids[chosen]
    roll = rng.random(k)
    ids[chosen[roll < MASK_BELOW]] = mask_id
    random_pos = chosen[(roll >= MASK_BELOW) & (roll < RANDOM_BELOW)]
    ids[random_pos] = rng.integers(0, vocab_size, size=random_pos.size)
    return ids, labels


def masked_examples(lm: LoadedModel, examples: Sequence[Encoded], *, seed: int) -> list[tuple[Encoded, np.ndarray]]:
    """Each example with BERT-style masked ids (as a new :class:`Encoded`) and its labels, seeded."""
    tok = lm.tokenizer
    if tok.mask_token_id is None:
        raise ValueError(f"{lm.label}: the tokenizer has no mask token, so there is no masked-LM loss")
    rng = np.random.default_rng(seed)
    special_ids = set(tok.all_special_ids)
    out = []
    for ex in sorted(examples, key=lambda e: e.index):
        special = np.isin(ex.input_ids, list(special_ids))
        ids, labels = bert_mask(ex.input_ids, special, rng, mask_id=tok.mask_token_id, vocab_size=len(tok))
        out.append((Encoded(ex.index, ids, ex.word_of_token, ex.n_words, ex.words), labels))
    return out


def pretrained_head(lm: LoadedModel) -> nn.Module | None:
    """The checkpoint's own masked-LM head, or ``None`` when the checkpoint has none (or is random-init)."""
    if lm.random_init:
        return None
    from transformers import AutoModelForMaskedLM

    try:
        with quiet_transformers():
            full, info = AutoModelForMaskedLM.from_pretrained(lm.source, local_files_only=True, output_loading_info=True)
    except (OSError, ValueError):
        return None
    head_missing = [k for k in info.get("missing_keys", []) if not k.startswith(full.base_model_prefix)]
    if head_missing:
        return None
    for name in ("cls", "lm_head"):  # BERT-style and RoBERTa-style heads map hidden states to logits
        if hasattr(full, name):
            return getattr(full, name).float().eval()  # float32, as the hidden states it scores are cast to
    return None

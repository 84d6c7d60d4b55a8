"""Batched, length-bucketed attention extraction, streamed example by example.

Every map is ``[layer, head, query, key]``; rows sum to 1 over ``key``. Token-level maps cover
every token including the special ones; word-level maps use the layout
``[CLS], w_1, ..., w_n, [SEP]`` (see :mod:`helpers.core.wordlevel`).

>>> from helpers import load_model
>>> from helpers.core.encoding import encode_words
>>> from helpers.core.extract import iter_attention
>>> lm = load_model()
>>> batch = encode_words(lm.tokenizer, [["A", "cat", "sat", "."]])
>>> for example, attn in iter_attention(lm, batch, level="word"):
...     print(attn.shape)          # [layer, head, word, word] with [CLS] and [SEP]
(6, 12, 6, 6)

Examples come out in bucket order (sorted by length), each with its :class:`Encoded` record, so
consumers that reduce statistics never need the whole corpus in memory.
"""
from __future__ import annotations

from typing import Iterator, Literal, Sequence

import numpy as np
import torch

from helpers.core.encoding import Encoded, EncodedBatch
from helpers.core.errors import no_attention
from helpers.core.models import LoadedModel
from helpers.core.wordlevel import WordMode, batched_matrices, word_level_batch

Level = Literal["token", "word"]
LEVELS: tuple[str, ...] = ("token", "word")


def convert(x: np.ndarray | torch.Tensor, dtype) -> np.ndarray:
    """``x`` as a numpy array of ``dtype`` (float16 <-> float32 through torch: about 5x faster than numpy's
    ``astype``, bit for bit the same). Already ``dtype`` on the CPU: a view, no copy."""
    dtype = np.dtype(dtype)
    t = torch.from_numpy(x) if isinstance(x, np.ndarray) else x.detach()
    return t.to("cpu", _TORCH_DTYPES.get(dtype, t.dtype)).numpy().astype(dtype, copy=False)


_TORCH_DTYPES = {np.dtype(np.float16): torch.float16, np.dtype(np.float32): torch.float32,
                 np.dtype(np.float64): torch.float64}


def torch_dtype(dtype) -> torch.dtype:
    """The torch dtype of a numpy floating ``dtype`` (float16, float32 or float64)."""
    return _TORCH_DTYPES[np.dtype(dtype)]


def bucket(examples: Sequence[Encoded], *, batch_size: int) -> list[list[Encoded]]:
    """Sort examples by length and cut them into batches of at most ``batch_size`` (little padding)."""
    if batch_size < 1:
        raise ValueError(f"--batch-size {batch_size}: must be at least 1")
    ordered = sorted(examples, key=lambda e: (len(e), e.index))
    return [ordered[i : i + batch_size] for i in range(0, len(ordered), batch_size)]


# Bytes of float32 attention one forward pass may return, ``[batch, layer, head, query, key]``: the
# default model's at 32 examples of 128 tokens (6 x 12 x 128 x 128 x 4 x 32 = 144 MiB). The pass holds
# it about twice (the model's per-layer tuple and its stack), so a 12 x 12 model at 128 tokens, or any
# model at 512, would hold 2 to 32 times the default's; :func:`forward_parts` cuts such batches.
FORWARD_ATTENTION_BYTES = 6 * 12 * 128 * 128 * 4 * 32


def forward_parts(lm: LoadedModel, group: Sequence[Encoded]) -> list[Sequence[Encoded]]:
    """``group`` (one length bucket) cut into forward passes whose attention stays within
    :data:`FORWARD_ATTENTION_BYTES`, in order; one part when it already does (always, for the default
    model in the usual batches of 32 at 128 tokens or fewer). Examples are independent, so the cut changes no map beyond float
    round-off; both engines cut the same way, so their maps stay identical."""
    n = max(len(e) for e in group)
    per_example = lm.n_layers * lm.n_heads * n * n * 4
    size = max(1, FORWARD_ATTENTION_BYTES // per_example)
    return [group[i : i + size] for i in range(0, len(group), size)]


def model_inputs(lm: LoadedModel, examples: Sequence[Encoded]) -> dict[str, torch.Tensor]:
    """Padded ``input_ids``, ``attention_mask`` and (all-zero) ``token_type_ids`` for a batch."""
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    n = max(len(e) for e in examples)
    ids = torch.full((len(examples), n), pad, dtype=torch.long)
    mask = torch.zeros((len(examples), n), dtype=torch.long)
    for b, ex in enumerate(examples):
        ids[b, : len(ex)] = torch.from_numpy(ex.input_ids)
        mask[b, : len(ex)] = 1
    inputs = {"input_ids": ids.to(lm.device), "attention_mask": mask.to(lm.device)}
    if "token_type_ids" in getattr(lm.tokenizer, "model_input_names", ()):
        inputs["token_type_ids"] = torch.zeros_like(inputs["input_ids"])
    return inputs


HALF_DTYPES = (torch.float16, torch.bfloat16)


def at_least_float32(t: torch.Tensor) -> torch.Tensor:
    """``t`` in float32 when it is in half precision (a model loaded with ``--dtype bfloat16`` or ``float16``), else
    ``t`` itself (float32 or float64: no copy, no rounding): what a model gives is cast here, once, before any
    statistic is computed from it."""
    return t.float() if t.dtype in HALF_DTYPES else t


def forward_attentions(lm: LoadedModel, examples: Sequence[Encoded]) -> torch.Tensor:
    """Token-level attention of a padded batch, ``[batch, layer, head, query, key]``, float32 whatever the weights'
    dtype (``--dtype``: cast here, once, as the model gives them; every statistic is computed in float32 or wider).

    Rows of padding queries are meaningless; slice ``[:n, :n]`` per example.
    """
    with torch.inference_mode():
        out = lm.model(**model_inputs(lm, examples), output_attentions=True)
    if not getattr(out, "attentions", None) or out.attentions[0] is None:
        raise no_attention(lm.label)
    return at_least_float32(torch.stack(out.attentions, dim=1))


def batch_maps(
    lm: LoadedModel, examples: Sequence[Encoded], *, level: Level = "token", word_mode: WordMode = "mean"
) -> list[torch.Tensor]:
    """Per-example maps ``[layer, head, n, n]`` (float32, on the model's device) for one batch."""
    if level not in LEVELS:
        raise ValueError(f"--level {level!r}: choose one of {', '.join(LEVELS)}")
    attn = forward_attentions(lm, examples)
    if level == "token":
        return [attn[b, :, :, : len(ex), : len(ex)] for b, ex in enumerate(examples)]
    words = padded_word_maps(attn, examples, word_mode=word_mode)
    return [words[b, :, :, : ex.n_positions, : ex.n_positions] for b, ex in enumerate(examples)]


def padded_word_maps(attn: torch.Tensor, examples: Sequence[Encoded], *, word_mode: WordMode = "mean") -> torch.Tensor:
    """Word-level maps ``[batch, layer, head, position, position]`` of a padded token-level batch ``attn``, right-padded
    (example ``b``'s map is the corner ``[:n_positions, :n_positions]``), on ``attn``'s device."""
    if any(ex.word_of_token is None for ex in examples):
        raise ValueError("word-level maps need pre-split words (encode with encode_words)")
    R, S = batched_matrices([ex.word_of_token for ex in examples], attn.shape[-1], mode=word_mode, device=attn.device)
    return word_level_batch(attn, R, S)


def iter_attention(
    lm: LoadedModel,
    batch: EncodedBatch | Sequence[Encoded],
    *,
    level: Level = "token",
    word_mode: WordMode = "mean",
    batch_size: int = 32,
    progress: bool = False,
    dtype=np.float32,
) -> Iterator[tuple[Encoded, np.ndarray]]:
    """Stream ``(example, attn [layer, head, n, n])`` over a corpus, in length-bucket order."""
    from tqdm.auto import tqdm

    examples = batch.examples if isinstance(batch, EncodedBatch) else list(batch)
    bar = tqdm(total=len(examples), desc=f"{level}-level attention", unit="ex", disable=not progress)
    try:
        for group in bucket(examples, batch_size=batch_size):
            for part in forward_parts(lm, group):
                maps = batch_maps(lm, part, level=level, word_mode=word_mode)
                for ex, attn in zip(part, maps):
                    yield ex, convert(attn, dtype)
                del maps
                bar.update(len(part))
    finally:
        bar.close()


def attention_for(
    lm: LoadedModel, batch: EncodedBatch, *, level: Level = "token", word_mode: WordMode = "mean", batch_size: int = 32
) -> list[np.ndarray]:
    """All maps of a small batch, in the batch's order (convenience for examples and views)."""
    by_index = {ex.index: attn for ex, attn in iter_attention(lm, batch, level=level, word_mode=word_mode, batch_size=batch_size)}
    return [by_index[ex.index] for ex in batch.examples]


# ------------------------------------------------------------------------------ batches on the device


class MapBatch:
    """One forward pass's maps as the model made them, on its device: ``weights`` (and ``norms``, or ``None``; a pass
    asked for norms alone has ``norms`` and ``weights`` ``None``)
    ``[batch, layer, head, query, key]`` right-padded to the longest input, ``lengths`` ``[batch]`` (a CPU int64
    tensor: each map's positions, its tokens or, for word-level maps, ``n_positions``; rows and columns from
    ``lengths[b]`` on are padding and must contribute nothing) and ``examples``
    (the :class:`Encoded` inputs, in the pass's order). What batched accumulators take
    (``update``, on the route: :func:`helpers.pipeline.route.reduce_maps`), so the maps never leave the device.

    ``items()`` gives the per-example view ``(example, weights [layer, head, n, n][, norms])`` of the old stream."""

    __slots__ = ("examples", "weights", "norms", "lengths")

    def __init__(self, examples: Sequence[Encoded], weights: torch.Tensor | None, norms: torch.Tensor | None = None,
                 lengths: Sequence[int] | None = None):
        self.examples = list(examples)
        self.weights, self.norms = weights, norms
        sizes = [len(ex) for ex in self.examples] if lengths is None else list(lengths)
        self.lengths = torch.tensor(sizes, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.examples)

    def items(self) -> Iterator[tuple]:
        """``(example, weights[, norms])`` per example (``(example, norms)`` for norms alone), each sliced to its
        length (views, on the device)."""
        for b, ex in enumerate(self.examples):
            n = int(self.lengths[b])
            yield (ex, *(m[b, :, :, :n, :n] for m in (self.weights, self.norms) if m is not None))

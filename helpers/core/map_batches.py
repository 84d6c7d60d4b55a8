"""A corpus's maps one forward pass at a time, left on the model's device (:func:`iter_map_batches`): the stream of
the statistics (:func:`helpers.pipeline.route.reduce_maps`). Apart from :mod:`helpers.core.extract` because a
pass may give the norms too (:mod:`helpers.core.norm_maps`, which itself builds on ``extract``).

>>> for mb in iter_map_batches(lm, batch, maps="weights+norms"):   # doctest: +SKIP
...     mb.weights.shape                                          # [batch, layer, head, query, key]
"""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from helpers.core.encoding import Encoded, EncodedBatch
from helpers.core.extract import LEVELS, Level, MapBatch, bucket, convert, forward_attentions, forward_parts, padded_word_maps
from helpers.core.models import LoadedModel
from helpers.core.norm_maps import forward_weights_and_norms
from helpers.core.wordlevel import WordMode


def iter_map_batches(lm: LoadedModel, batch: EncodedBatch | Sequence[Encoded], *, batch_size: int = 32,
                     maps: str = "weights", level: Level = "token", word_mode: WordMode = "mean") -> Iterator[MapBatch]:
    """:class:`MapBatch` es of a corpus, one per forward pass (length buckets of ``batch_size``, cut by
    :func:`~helpers.core.extract.forward_parts`: the passes, and so the maps, of
    :func:`~helpers.core.extract.iter_attention`), left on the model's device.
    ``maps`` is ``"weights"``, ``"norms"`` (the batch's ``weights`` are ``None``) or ``"weights+norms"`` (one pass
    gives both: :mod:`helpers.core.norm_maps`); at ``level="word"`` (weights or norms) the batch's word-level maps,
    converted batched there (:func:`~helpers.core.extract.padded_word_maps`)."""
    examples = batch.examples if isinstance(batch, EncodedBatch) else list(batch)
    if level == "word" and maps not in ("weights", "norms"):
        raise ValueError(f"maps {maps!r}: word-level batches hold weights or norms")
    for group in bucket(examples, batch_size=batch_size):
        for part in forward_parts(lm, group):
            if maps == "norms":
                norms = forward_weights_and_norms(lm, part)[1]
                if level == "word":
                    norms = padded_word_maps(norms, part, word_mode=word_mode)
                yield MapBatch(part, None, norms, lengths=[ex.n_positions if level == "word" else len(ex) for ex in part])
                del norms
                continue
            if level == "word":
                words = padded_word_maps(forward_attentions(lm, part), part, word_mode=word_mode)
                yield MapBatch(part, words, lengths=[ex.n_positions for ex in part])
                del words
                continue
            if maps == "weights+norms":
                attn, norms = forward_weights_and_norms(lm, part)
            elif maps == "weights":
                attn, norms = forward_attentions(lm, part).float(), None
            else:
                raise ValueError(f"maps {maps!r}: batches hold 'weights' or 'weights+norms'")
            yield MapBatch(part, attn, norms)
            del attn, norms


def iter_norm_maps(lm: LoadedModel, batch: EncodedBatch | Sequence[Encoded], *, level: Level = "token",
                   word_mode: WordMode = "mean", batch_size: int = 32, progress: bool = False,
                   dtype=np.float32) -> Iterator[tuple[Encoded, np.ndarray]]:
    """Stream ``(example, norms [layer, head, n, n])``, like :func:`helpers.core.extract.iter_attention`: the norm
    maps of the passes of :func:`iter_map_batches` (word level as ``R N S``), one example at a time."""
    from tqdm.auto import tqdm

    if level not in LEVELS:
        raise ValueError(f"--level {level!r}: choose one of {', '.join(LEVELS)}")
    examples = batch.examples if isinstance(batch, EncodedBatch) else list(batch)
    with tqdm(total=len(examples), desc=f"{level}-level norms", unit="ex", disable=not progress) as bar:
        for part in iter_map_batches(lm, examples, batch_size=batch_size, maps="norms", level=level, word_mode=word_mode):
            for ex, norms in part.items():
                yield ex, convert(norms, dtype)
            bar.update(len(part))

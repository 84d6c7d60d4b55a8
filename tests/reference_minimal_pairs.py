"""An independent, slow float64 reference for scoring minimal pairs (BLiMP rows), with and without heads removed.

Kept apart from the package on purpose: it imports nothing from ``helpers`` (a loaded model is read through its
attributes ``model``, ``language_model``, ``tokenizer``, ``source`` and ``causal``), and it is written from the
definitions alone, the obvious way: one sentence at a time, no batching, no padding, no attention mask, the model
copied and converted to float64, every log-probability a ``log_softmax`` of float64 logits, summed in a Python loop
over exactly the scored tokens. :func:`score_pairs_reference` has the signature of
``helpers.minimal_pairs.score_pairs`` and returns the same layout.

Definitions (natural logarithms, nats; no length normalisation):

- **A decoder, ``method="full"``** (BLiMP's own method, in lm-evaluation-harness's convention):
  ``ids = [BOS] + tokenizer(" " + text, add_special_tokens=False)``; the score is
  ``sum_{t >= 1} log P(ids[t] | ids[:t])``: every token after the BOS, every word after a space (the first too).
- **A decoder, ``method="prefix"``** (BLiMP's one-prefix method): ``context = [BOS] + tokenizer(" " + prefix,
  add_special_tokens=False)``, ``word = tokenizer(" " + word, add_special_tokens=False)``, ``ids = context + word``;
  the score is ``sum_{t >= len(context)} log P(ids[t] | ids[:t])``: only the tokens of the differing word (which may
  be several words, "grocery store"), read from the row's ``one_prefix_prefix``, ``one_prefix_word_good`` and
  ``one_prefix_word_bad``. A row without these fields is an error (:class:`ValueError`).
- **An encoder with its own masked-LM head** (``BertForMaskedLM`` and its kin): the pseudo-log-likelihood, whole-word
  left-to-right (Kauf and Ivanova 2023, "PLL-word-l2r"): ``ids = tokenizer(text)`` with the encoder's own special
  tokens (``[CLS] ... [SEP]``); for each non-special position ``i`` of word ``w`` (the fast tokenizer's
  ``word_ids``: for WordPiece, a word's pieces are its first token and the ``##`` tokens after it, as in Kauf and
  Ivanova's implementation), the input is ``ids`` with position ``i`` and every later position of the same word
  replaced by the mask token, and the term is ``log P(ids[i] | that input)`` read at position ``i``; the score is
  the sum of the terms. A one-token word is masked alone (plain PLL, Salazar et al. 2020).
- **An encoder, ``method="prefix"``** (the issue defines the one-prefix method for decoders only; this is the
  analogue ``score_pairs`` chose, written here independently): the text is the sentence cut after the differing
  word, ``prefix + " " + word``, scored as above but only at the word's tokens: the positions after ``[CLS]`` and
  the ``len(tokenizer(prefix, add_special_tokens=False))`` tokens of the prefix (WordPiece splits at the space, so
  the text's tokens are the prefix's and then the word's). The rest of the sentence is not in the input.
- **Removing heads**: for each ``(layer, head)`` (0-based) the head's context vector (its attention output, the
  weighted sum of its values, before the output projection) is multiplied by 0, by a forward pre-hook on the
  output projection that zeroes that head's slice ``[head * d, (head + 1) * d)`` of the projection's input
  (``d`` = hidden size / heads); the projection's bias is kept. The projection is GPT-2's fused ``attn.c_proj``
  (a ``Conv1D``), Llama's ``self_attn.o_proj`` (under grouped-query attention only query head ``h`` is removed:
  its key-value group serves the group's other query heads as before) and BERT's ``attention.output.dense``.

Where the float64 copy is not float64 throughout: Llama's rotary embedding computes its cosines and sines in
float32 whatever the weights' dtype (transformers' ``LlamaRotaryEmbedding``), then casts them to float64; the float32
model uses the same float32 values, so this rounding is common to both sides of a comparison, not a difference.
"""
from __future__ import annotations

import copy
from typing import Iterable, Sequence

import numpy as np
import torch

PREFIX_FIELDS = ("one_prefix_prefix", "one_prefix_word_good", "one_prefix_word_bad")
METHODS = ("full", "prefix")


# ------------------------------------------------------------------------------------ the float64 copies


def decoder_float64(lm) -> torch.nn.Module:
    """A float64 copy of a loaded decoder's whole causal LM (with its ``lm_head``), in eval mode, on the CPU."""
    if lm.language_model is None:
        raise ValueError(f"{lm.source}: no causal language model (lm.language_model is None)")
    return copy.deepcopy(lm.language_model).to("cpu").double().eval()


def masked_lm_float64(lm) -> torch.nn.Module:
    """A float64 masked LM for a loaded encoder: the checkpoint's own ``AutoModelForMaskedLM`` (its head read from
    ``lm.source``), whose encoder weights are then replaced by ``lm.model``'s, so that both sides score one set of
    weights. Raises :class:`ValueError` when the checkpoint has no masked-LM head."""
    from transformers import AutoModelForMaskedLM

    full, info = AutoModelForMaskedLM.from_pretrained(lm.source, output_loading_info=True, attn_implementation="eager",
                                                      dtype=torch.float64)
    prefix = full.base_model_prefix
    head_missing = [k for k in info.get("missing_keys", []) if not k.startswith(prefix)]
    if head_missing:
        raise ValueError(f"{lm.source}: no masked-LM head in the checkpoint (missing {head_missing[:3]})")
    state = {k: v.detach().to("cpu", torch.float64) for k, v in lm.model.state_dict().items()}
    missing, _unexpected = getattr(full, prefix).load_state_dict(state, strict=False)  # the pooler is unexpected
    if missing:
        raise ValueError(f"{lm.source}: the masked LM's encoder lacks weights of lm.model: {missing[:3]}")
    return full.to("cpu").double().eval()


# ------------------------------------------------------------------------------------ removing heads


def output_projections(model: torch.nn.Module) -> list[torch.nn.Module]:
    """Per layer, the module whose input is the concatenation of the heads' context vectors (head-major: head ``h``
    is the slice ``[h * d, (h + 1) * d)``): GPT-2's ``attn.c_proj``, Llama's ``self_attn.o_proj``, BERT's
    ``attention.output.dense``."""
    base = model.base_model
    if hasattr(base, "h"):  # GPT-2
        return [block.attn.c_proj for block in base.h]
    if hasattr(base, "layers"):  # Llama and its kin
        return [layer.self_attn.o_proj for layer in base.layers]
    if hasattr(base, "encoder"):  # BERT
        return [layer.attention.output.dense for layer in base.encoder.layer]
    raise ValueError(f"no known attention output projection in {type(model).__name__}")


def head_size(model: torch.nn.Module) -> int:
    config = model.config
    return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)


class removed_heads:
    """``with removed_heads(model, [(layer, head), ...]):`` each listed head's context vector times 0 (a forward
    pre-hook on the layer's output projection; its bias kept). The hooks are removed on exit."""

    def __init__(self, model: torch.nn.Module, remove: Iterable[tuple[int, int]]):
        self.model = model
        self.remove = [(int(layer), int(head)) for layer, head in remove]
        self.handles = []

    def __enter__(self):
        projections = output_projections(self.model)
        n_heads, d = int(self.model.config.num_attention_heads), head_size(self.model)
        by_layer: dict[int, list[int]] = {}
        for layer, head in self.remove:
            if not (0 <= layer < len(projections) and 0 <= head < n_heads):
                raise ValueError(f"remove: ({layer}, {head}) is not a head of a {len(projections)}-layer, "
                                 f"{n_heads}-head model")
            by_layer.setdefault(layer, []).append(head)
        for layer, heads in by_layer.items():
            keep = torch.ones(n_heads * d, dtype=torch.float64)
            for head in heads:
                keep[head * d:(head + 1) * d] = 0.0

            def hook(_module, args, keep=keep):
                (x, *rest) = args
                return (x * keep.to(x.dtype), *rest)

            self.handles.append(projections[layer].register_forward_pre_hook(hook))
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()
        self.handles = []


# ------------------------------------------------------------------------------------ one sentence


def token_logprobs(model: torch.nn.Module, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(logp, zmax)``: ``logp[t - 1] = log P(ids[t] | ids[:t])`` for t = 1 .. len(ids) - 1, from one unpadded
    forward pass of one sequence through a float64 causal LM (``log_softmax`` of the float64 logits), and
    ``zmax[t - 1]`` the largest ``|logit|`` at position ``t - 1`` (the scale of that term's round-off)."""
    x = torch.tensor([list(ids)], dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=x).logits[0].to(torch.float64)  # [position, vocab]
    logp = torch.log_softmax(logits, dim=-1)
    terms = np.array([float(logp[t - 1, ids[t]]) for t in range(1, len(ids))], dtype=np.float64)
    return terms, logits[:-1].abs().amax(-1).numpy().astype(np.float64)


def decoder_ids(tokenizer, row: dict, which: str, method: str) -> tuple[list[int], int]:
    """``(ids, first)``: the token ids one sentence of ``row`` is scored on and the first scored position
    (``which``: ``"good"`` or ``"bad"``), by the module's definitions."""
    bos = tokenizer.bos_token_id
    if bos is None:
        raise ValueError("the tokenizer has no BOS token")
    encode = lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    if method == "full":
        return [bos] + encode(" " + row[f"sentence_{which}"]), 1
    if method == "prefix":
        missing = [f for f in PREFIX_FIELDS if f not in row]
        if missing:
            raise ValueError(f"method 'prefix': the pair {row.get('UID', '?')}/{row.get('pairID', '?')} lacks "
                             f"{', '.join(missing)}")
        context = [bos] + encode(" " + row["one_prefix_prefix"])
        return context + encode(" " + row[f"one_prefix_word_{which}"]), len(context)
    raise ValueError(f"method {method!r}: one of {', '.join(METHODS)}")


def decoder_terms(model, tokenizer, row: dict, which: str, method: str) -> tuple[np.ndarray, np.ndarray]:
    """The scored tokens' log-probabilities (nats) of one sentence of ``row`` under a float64 causal LM, and the
    largest ``|logit|`` at each (see :func:`token_logprobs`)."""
    ids, first = decoder_ids(tokenizer, row, which, method)
    logp, zmax = token_logprobs(model, ids)  # entry t - 1 belongs to position t
    return logp[first - 1:], zmax[first - 1:]


def pll_word_l2r_inputs(ids: Sequence[int], word_ids: Sequence[int | None],
                        mask_id: int) -> list[tuple[list[int], int]]:
    """PLL-word-l2r's masked inputs, one per scored position, as ``(masked ids, position)``: position ``i`` and every
    later position of its word masked. ``word_ids[i]`` is ``None`` at a special token (not scored, never masked)."""
    out = []
    for i, word in enumerate(word_ids):
        if word is None:
            continue
        masked = list(ids)
        for j in range(i, len(ids)):
            if word_ids[j] == word:
                masked[j] = mask_id
        out.append((masked, i))
    return out


def encoder_text(tokenizer, row: dict, which: str, method: str) -> tuple[str, int]:
    """``(text, skipped)``: the text one sentence of ``row`` is scored on by an encoder and how many of its
    (non-special) tokens come before the first scored one (the prefix's, under ``"prefix"``)."""
    if method == "full":
        return row[f"sentence_{which}"], 0
    if method == "prefix":
        missing = [f for f in PREFIX_FIELDS if f not in row]
        if missing:
            raise ValueError(f"method 'prefix': the pair {row.get('UID', '?')}/{row.get('pairID', '?')} lacks "
                             f"{', '.join(missing)}")
        prefix = row["one_prefix_prefix"]
        skipped = len(tokenizer(prefix, add_special_tokens=False)["input_ids"])
        return f"{prefix} {row[f'one_prefix_word_{which}']}", skipped
    raise ValueError(f"method {method!r}: one of {', '.join(METHODS)}")


def encoder_terms(model, tokenizer, text: str, skipped: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """PLL-word-l2r's terms (nats) of ``text`` under a float64 masked LM, one forward pass per scored token, and the
    largest ``|logit|`` at each scored position; the first ``skipped`` non-special tokens are in the input but not
    scored."""
    encoded = tokenizer(text)
    ids, word_ids = list(encoded["input_ids"]), encoded.word_ids()
    logp, zmax = [], []
    for masked, i in pll_word_l2r_inputs(ids, word_ids, tokenizer.mask_token_id)[skipped:]:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([masked])).logits[0, i].to(torch.float64)
        logp.append(float(torch.log_softmax(logits, dim=-1)[ids[i]]))
        zmax.append(float(logits.abs().max()))
    return np.array(logp, dtype=np.float64), np.array(zmax, dtype=np.float64)


def total(terms: np.ndarray) -> float:
    """A sentence's score: its terms added one at a time, in float64."""
    out = 0.0
    for term in terms:
        out += float(term)
    return out


# ------------------------------------------------------------------------------------ the contract's signature


def reference_terms(lm, pairs: Sequence[dict], remove: Iterable[tuple[int, int]] = (),
                    method: str = "full") -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """``{"good": [...], "bad": [...]}``: for each pair, each sentence's scored terms (log-probabilities, nats,
    float64) and the largest ``|logit|`` at each term's position, by the module's definitions, with the heads
    ``remove`` (``(layer, head)``, 0-based) removed."""
    if method not in METHODS:
        raise ValueError(f"method {method!r}: one of {', '.join(METHODS)}")
    remove = list(remove)
    if lm.causal:
        model = decoder_float64(lm)
        terms = lambda row, which: decoder_terms(model, lm.tokenizer, row, which, method)  # noqa: E731
    else:
        model = masked_lm_float64(lm)
        terms = lambda row, which: encoder_terms(model, lm.tokenizer,  # noqa: E731
                                                 *encoder_text(lm.tokenizer, row, which, method))
    out = {"good": [], "bad": []}
    with removed_heads(model, remove):
        for row in pairs:
            for which in ("good", "bad"):
                out[which].append(terms(row, which))
    return out


def score_pairs_reference(lm, pairs: Sequence[dict], remove: Iterable[tuple[int, int]] = (),
                          method: str = "full") -> dict[str, np.ndarray]:
    """``{"good": [N], "bad": [N]}``: each pair's two sentences' log-probabilities (nats, float64) by the module's
    definitions, with the heads ``remove`` (``(layer, head)``, 0-based) removed: the signature and layout of
    ``helpers.minimal_pairs.score_pairs``."""
    terms = reference_terms(lm, pairs, remove, method)
    return {which: np.array([total(logp) for logp, _ in terms[which]], dtype=np.float64) for which in ("good", "bad")}

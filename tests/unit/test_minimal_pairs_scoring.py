"""Scoring minimal pairs (:mod:`helpers.minimal_pairs.scoring`) against slow, obvious loops written here, on tiny random
models built from configs (no download): the GPT-2 and the Llama with grouped-query attention of :mod:`tiny_decoders`,
and a BERT saved with its masked-LM head.

The loops share nothing with the fast path but the model's weights and tokenizer: one sentence at a time through the
whole language model (``lm.language_model``, or the masked-LM checkpoint loaded as ``AutoModelForMaskedLM``), a head
removed by a pre-hook of its own that writes zeros (or the fill vector) into its slice of the output projection's input,
the log-probabilities read from the model's own logits. Both sides run in float64 (a float64 copy of the model), so
what is left is float64 round-off: :func:`tolerances.float64_passes` of the scores' size. The float32 path's agreement
with the float64 one is tested to float32 round-off (:func:`tolerances.round_off` over the layers' longest sums)."""
from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

import tiny_decoders as td
from helpers.ablation.interventions import intervene
from helpers.core.internals import attention_parts
from helpers.core.models import load_model
from helpers.minimal_pairs import score_pairs
from helpers.minimal_pairs.scoring import (
    NotScorable,
    encode,
    margin_gradients,
    pair_texts,
    passes,
    removal_mask,
    text_scores,
)
from tolerances import EPS64, float64_passes, round_off

PAIRS = [
    {"sentence_good": "the cat sat on the mat.", "sentence_bad": "the cat sit on the mat.", "UID": "toy", "pairID": "0",
     "one_prefix_method": True, "one_prefix_prefix": "the cat", "one_prefix_word_good": "sat",
     "one_prefix_word_bad": "sit"},
    {"sentence_good": "a dog sat", "sentence_bad": "a dogs sat", "UID": "toy", "pairID": "1",
     "one_prefix_method": True, "one_prefix_prefix": "a", "one_prefix_word_good": "dog", "one_prefix_word_bad": "dogs"},
    {"sentence_good": "the dog is big", "sentence_bad": "the dog are big , the cat is unaffable", "UID": "toy",
     "pairID": "2", "one_prefix_method": False},
]
REMOVALS = ((), ((1, 2),), ((0, 1), (1, 3)))


def _float64(lm):
    """A float64 copy of a loaded decoder (its own fingerprint). Llama's RMSNorm computes in float32 whatever the
    model's dtype (transformers casts to it), which would leave float32 round-off in a float64 pass: the copy's norms
    compute in float64."""
    owner = copy.deepcopy(lm.language_model).double()
    for module in owner.modules():
        if type(module).__name__.endswith("RMSNorm"):
            module.forward = lambda hidden, norm=module: norm.weight * hidden * torch.rsqrt(
                hidden.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return dataclasses.replace(lm, model=owner.base_model, language_model=owner, _fingerprint=None)


def _masked_lm(lm):
    """The encoder's checkpoint as a float64 masked LM (what the loop scores with)."""
    from transformers import AutoModelForMaskedLM

    return AutoModelForMaskedLM.from_pretrained(lm.source).double().eval()


def scorer(models, kind):
    """``(lm, head)`` in float64: a decoder's copy (``head`` None), or the encoder's masked LM's base model and head."""
    if kind != "bert":
        return _float64(models[kind]), None
    masked_lm = _masked_lm(models[kind])
    return dataclasses.replace(models[kind], model=masked_lm.base_model, _fingerprint=None), masked_lm.cls


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_model_dir):
    """The tiny GPT-2, Llama and BERT-with-MLM-head, float32 as loaded."""
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    root = tmp_path_factory.mktemp("pair-models")
    bert = root / "bert-mlm"
    tokenizer = BertTokenizerFast.from_pretrained(str(tiny_model_dir))
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    BertForMaskedLM(config).save_pretrained(bert)
    tokenizer.save_pretrained(bert)
    return {"gpt2": load_model(str(td.save_gpt2(root / "gpt2"))), "llama": load_model(str(td.save_llama(root / "llama"))),
            "bert": load_model(str(bert)), "bare": load_model(str(tiny_model_dir))}


def _zeroing(lm, remove, fill=None):
    """Pre-hooks writing 0 (or ``fill[l, h]``) into each removed head's slice of its layer's output projection input."""
    handles = []
    H = lm.n_heads
    for layer, head in remove:
        def hook(_module, args, head=head, layer=layer):
            z = args[0].clone()
            d = z.shape[-1] // H
            z[..., head * d:(head + 1) * d] = 0.0 if fill is None else fill[layer, head].to(z.dtype)
            return (z, *args[1:])
        handles.append(attention_parts(lm.model, layer).output.register_forward_pre_hook(hook))
    return handles


def loop_decoder(lm, context: str, continuation: str | None, remove=(), fill=None) -> float:
    """The sum of log P(token | before) over ``[BOS] + " " + context`` after BOS (or over ``" " + continuation``
    only), one sentence through the whole causal LM."""
    tok = lm.tokenizer
    head = [tok.bos_token_id, *tok(" " + context, add_special_tokens=False)["input_ids"]]
    tail = [] if continuation is None else tok(" " + continuation, add_special_tokens=False)["input_ids"]
    ids = head + tail
    first = 1 if continuation is None else len(head)
    handles = _zeroing(lm, remove, fill)
    try:
        with torch.no_grad():
            logits = lm.language_model(input_ids=torch.tensor([ids])).logits[0]
    finally:
        for h in handles:
            h.remove()
    logp = torch.log_softmax(logits.double(), -1)
    return sum(float(logp[t - 1, ids[t]]) for t in range(first, len(ids)))


def loop_pll(lm, masked_lm, context: str, continuation: str | None, remove=()) -> float:
    """PLL-word-l2r by hand: for each scored token (not special; with a continuation, from the word after the prefix),
    the sentence with it and its word's later tokens masked, through the whole masked LM."""
    tok = lm.tokenizer
    text = context if continuation is None else f"{context} {continuation}"
    start = 0 if continuation is None else len(context) + 1
    enc = tok(text, return_offsets_mapping=True)
    ids, words = enc["input_ids"], enc.word_ids()
    total = 0.0
    for t, word in enumerate(words):
        if word is None or enc["offset_mapping"][t][0] < start:
            continue
        masked = [tok.mask_token_id if (u == t or (u > t and words[u] == word)) else i for u, i in enumerate(ids)]
        handles = _zeroing(dataclasses.replace(lm, model=masked_lm.base_model), remove)
        try:
            with torch.no_grad():
                logits = masked_lm(input_ids=torch.tensor([masked])).logits[0]
        finally:
            for h in handles:
                h.remove()
        total += float(torch.log_softmax(logits.double(), -1)[t, ids[t]])
    return total


def _reference(lm, kind, pairs, method, remove=(), fill=None) -> np.ndarray:
    texts = pair_texts(pairs, method)
    if kind == "bert":
        masked_lm = _masked_lm(lm)
        return np.array([loop_pll(lm, masked_lm, c, w, remove) for c, w in texts])
    return np.array([loop_decoder(lm, c, w, remove, fill) for c, w in texts])


# ------------------------------------------------------------------------------------------------ the contract


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bert"])
@pytest.mark.parametrize("remove", REMOVALS, ids=["none", "one", "two"])
def test_scores_are_the_loops(models, kind, remove):
    """``score_pairs`` is the loop's sum of log-probabilities, with the heads removed, in float64 to its round-off."""
    lm, head = scorer(models, kind)
    got = score_pairs(lm, PAIRS, remove=remove, head=head)
    ref = _reference(lm, kind, PAIRS, "full", remove)
    both = np.concatenate([got["good"], got["bad"]])
    assert set(got) == {"good", "bad"} and got["good"].shape == (len(PAIRS),) and got["good"].dtype == np.float64
    assert np.abs(both - ref).max() <= float64_passes(ref)


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bert"])
def test_prefix_method_scores_only_the_word(models, kind):
    lm, head = scorer(models, kind)
    pairs = PAIRS[:2]
    got = score_pairs(lm, pairs, method="prefix", remove=[(1, 0)], head=head)
    ref = _reference(lm, kind, pairs, "prefix", [(1, 0)])
    assert np.abs(np.concatenate([got["good"], got["bad"]]) - ref).max() <= float64_passes(ref)
    full = score_pairs(lm, pairs, remove=[(1, 0)], head=head)
    assert np.all(got["good"] > full["good"])  # fewer (negative) terms than the whole sentence


def test_prefix_method_refuses_a_pair_without_its_fields(models):
    with pytest.raises(ValueError, match=r"pair 2 \(paradigm toy, pairID 2\): no one_prefix_prefix.*method='full'"):
        score_pairs(models["gpt2"], PAIRS, method="prefix")
    with pytest.raises(ValueError, match="method 'words'"):
        score_pairs(models["gpt2"], PAIRS, method="words")


def test_decoder_rows_follow_the_harness_convention(models):
    """``[BOS] + tokens(" " + text)``, every token after BOS scored; the ids do not depend on the tokenizer adding a
    prefix space (there is one already)."""
    lm = models["llama"]
    rows = encode(lm, PAIRS[:1])
    ids = [lm.tokenizer.bos_token_id, *lm.tokenizer(" the cat sat on the mat.", add_special_tokens=False)["input_ids"]]
    assert rows.ids[0].tolist() == ids and rows.targets[0].tolist() == ids[1:]
    assert rows.positions[0].tolist() == list(range(len(ids) - 1)) and rows.n_texts == 2 and rows.text.tolist() == [0, 1]


def test_float32_agrees_with_float64_to_float32_round_off(models):
    """The float32 model's scores against its float64 copy's: a token's log-probability (``logsumexp - logit``) is off
    by float32 round-off through the layers' longest sums (the hidden size, the MLP's width, the vocabulary) at each
    layer and the head (tests/tolerances.py), relative to its size; the sentence, a sum of such negative terms, by that
    relative to its own size."""
    for kind in ("gpt2", "llama"):
        lm = models[kind]
        got = score_pairs(lm, PAIRS, remove=[(1, 2)])
        ref = score_pairs(_float64(lm), PAIRS, remove=[(1, 2)])
        config = lm.model.config
        width = max(int(config.hidden_size), int(getattr(config, "intermediate_size", None) or 4 * config.hidden_size),
                    len(lm.tokenizer))
        for side in ("good", "bad"):
            assert np.abs(got[side] - ref[side]).max() <= round_off(ref[side], width * (lm.n_layers + 1))


def test_an_encoder_without_its_own_head_is_not_scored(models):
    with pytest.raises(NotScorable, match="without a masked-LM head of its own.*not scored with it"):
        score_pairs(models["bare"], PAIRS)


def test_removal_is_chapter_11s_mask(models):
    """The same removal through :func:`helpers.ablation.interventions.intervene` (chapter 11's mask) gives the same
    scores: one way of removing a head."""
    lm = _float64(models["llama"])
    rows = encode(lm, PAIRS)
    xi = removal_mask(lm.n_layers, lm.n_heads, [(0, 3), (1, 1)])
    ours = text_scores(lm, rows, xi[None])[0]
    theirs = []
    for r in range(len(rows)):
        with torch.no_grad(), intervene(lm, xi=xi[None].double()):
            logits = lm.language_model(input_ids=torch.tensor([rows.ids[r].tolist()])).logits[0].double()
        logp = torch.log_softmax(logits, -1)
        theirs.append(sum(float(logp[p, t]) for p, t in zip(rows.positions[r], rows.targets[r])))
    assert np.abs(ours - np.array(theirs)).max() <= float64_passes(ours)


def test_removal_is_checked():
    with pytest.raises(ValueError, match=r"remove: \(2, 0\) is outside the model's layers 0..1"):
        removal_mask(2, 4, [(2, 0)])
    with pytest.raises(ValueError, match="not a \\(layer, head\\) pair"):
        removal_mask(2, 4, ["x"])


# ------------------------------------------------------------------------------------------------ the engine


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bert"])
def test_masks_in_one_staggered_pass_are_each_alone(models, kind):
    """Several masks over the same rows, joining at different layers, give what each gives alone (and the all-ones
    mask the trunk's scores), in float64."""
    lm, head = scorer(models, kind)
    rows = encode(lm, PAIRS, head=head)
    masks = torch.stack([removal_mask(lm.n_layers, lm.n_heads, r) for r in
                         ((), ((1, 2),), ((0, 1),), ((0, 1), (1, 3)), ((1, 0),))])
    together = text_scores(lm, rows, masks)
    alone = np.stack([text_scores(lm, rows, m[None])[0] for m in masks])
    assert np.abs(together - alone).max() <= float64_passes(alone)
    assert not np.allclose(together[0], together[1])  # a removal changes the scores


def test_passes_respect_the_budget_and_keep_every_row(models):
    lm = models["llama"]
    rows = encode(lm, PAIRS * 3)
    chunks = passes(lm, rows, [1, 1], budget=90)
    assert sorted(r for c in chunks for r in c) == list(range(len(rows))) and len(chunks) > 1
    for c in chunks:
        width = max(len(rows.ids[r]) for r in c)
        assert len(c) == 1 or len(c) * width * 3 <= 90     # the trunk and two copies at the last layer
        assert [len(rows.ids[r]) for r in c] == sorted(len(rows.ids[r]) for r in c)


def test_mean_ablation_fill_is_the_loops(models):
    """A removed head's context replaced by a fill vector (mean ablation), against the loop writing it in."""
    lm = _float64(models["gpt2"])
    rows = encode(lm, PAIRS)
    d = lm.model.config.hidden_size // lm.n_heads
    fill = torch.randn(lm.n_layers, lm.n_heads, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    remove = ((1, 2), (0, 0))
    got = text_scores(lm, rows, removal_mask(lm.n_layers, lm.n_heads, remove)[None], fill=fill)[0]
    ref = _reference(lm, "gpt2", PAIRS, "full", remove, fill)
    assert np.abs(got - ref).max() <= float64_passes(ref)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_margin_gradients_are_finite_differences(models, kind):
    """``d margin / d xi`` per pair against a central difference of the margin in each head's mask (both sentences'
    masks moved together), in float64; the step's own error is below 1e-8 of the gradients here."""
    from helpers.core.head_mask import head_mask
    from helpers.minimal_pairs.scoring import _inputs, _row_scores

    lm = _float64(models[kind])
    rows = encode(lm, PAIRS)
    grads, scores = margin_gradients(lm, rows)
    N = len(PAIRS)
    assert np.allclose(scores, text_scores(lm, rows)[0], rtol=0, atol=float64_passes(scores))
    step = 1e-4

    def margins(xi) -> np.ndarray:
        out = np.zeros(rows.n_texts)
        with torch.no_grad(), head_mask(lm.model, xi.expand(len(rows), -1, -1)):
            hidden = lm.model(**_inputs(lm, rows, list(range(len(rows))))).last_hidden_state
            np.add.at(out, rows.text, _row_scores(lm, rows, list(range(len(rows))), hidden, [0])[0].numpy())
        return out[:N] - out[N:]

    def central(layer: int, head: int, h: float) -> np.ndarray:
        up, down = (torch.ones(1, lm.n_layers, lm.n_heads, dtype=torch.float64) for _ in range(2))
        up[0, layer, head], down[0, layer, head] = 1 + h, 1 - h
        return (margins(up) - margins(down)) / (2 * h)

    # the central difference's error: its truncation (order h^2, so |fd(h) - fd(2h)| is three times fd(h)'s), and
    # float64 round-off of the scores divided by the step
    round_off64 = 4 * EPS64 * np.abs(scores).sum() / step
    for layer in range(lm.n_layers):
        for head in range(lm.n_heads):
            fd, coarse = central(layer, head, step), central(layer, head, 2 * step)
            assert np.abs(grads[:, layer, head] - fd).max() <= np.abs(fd - coarse).max() + round_off64, (layer, head)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_margin_rows_give_the_whole_sentences_margins(models, kind):
    """Scoring a decoder's pairs from the first token where they differ gives each pair's margin of the whole
    sentences (the common start cancels), with fewer tokens projected; an encoder's rows are left as they are."""
    from helpers.minimal_pairs.scoring import margin_rows

    lm, _ = scorer(models, kind)
    rows = encode(lm, PAIRS)
    cut = margin_rows(rows)
    masks = torch.stack([removal_mask(lm.n_layers, lm.n_heads, r) for r in REMOVALS])
    whole, part = text_scores(lm, rows, masks), text_scores(lm, cut, masks)
    N = len(PAIRS)
    assert np.abs((whole[:, :N] - whole[:, N:]) - (part[:, :N] - part[:, N:])).max() <= float64_passes(whole)
    assert sum(map(len, cut.positions)) < sum(map(len, rows.positions))
    bert, head = scorer(models, "bert")
    pll = encode(bert, PAIRS, head=head)
    assert margin_rows(pll) is pll


def test_mean_contexts_are_the_loops(models):
    """:class:`ContextSums` adds up the chosen heads' contexts over every position of the marked texts (the good
    sentences), the padding left out: against each sentence alone through a hook of its own, in float64."""
    from helpers.minimal_pairs.scoring import ContextSums, head_dim

    lm, _ = scorer(models, "llama")
    rows = encode(lm, PAIRS)
    heads = [(0, 1), (1, 3)]
    sums = ContextSums(lm, heads, np.arange(rows.n_texts) < len(PAIRS))
    text_scores(lm, rows, capture=sums)
    d = head_dim(lm)
    total, count = {h: torch.zeros(d, dtype=torch.float64) for h in heads}, 0
    for r in range(len(PAIRS)):  # the good sentences, one at a time
        seen = {}

        def hook(_module, args, layer=None):
            seen[layer] = args[0][0].reshape(args[0].shape[1], lm.n_heads, d).double()

        handles = [attention_parts(lm.model, layer).output.register_forward_pre_hook(
            lambda m, a, layer=layer: hook(m, a, layer)) for layer in (0, 1)]
        try:
            with torch.no_grad():
                lm.model(input_ids=torch.tensor([rows.ids[r].tolist()]))
        finally:
            for h in handles:
                h.remove()
        for layer, head in heads:
            total[(layer, head)] += seen[layer][:, head].sum(0)
        count += len(rows.ids[r])
    means = sums.means(lm.n_layers, lm.n_heads, d)
    assert sums.count == count
    for layer, head in heads:
        expected = (total[(layer, head)] / count).float()
        # the float64 sums agree to float64 round-off; the mean is then rounded once to float32
        assert torch.allclose(means[layer, head], expected, rtol=0, atol=round_off(expected.numpy()))
    assert float(means[0, 0].abs().max()) == 0.0  # a head not chosen: no fill

"""The context-mixing maps of :mod:`helpers.mixing.maps` against slow, obvious float64 references written here.

The references use the model's own modules as a user would: value zeroing reruns the **whole model** once per
(layer, source) or (layer, head, source) with a forward hook that zeroes the value row (a decoder's query head:
a pre-hook that removes ``alpha^h_ij v_j`` from that head's slice of the output projection's input) and reads
the layer's own output from a hook on the layer, so nothing from the fast path (reused weights, ``u - delta``,
batching, the half-squared-chord distance) is shared; ALTI is a loop over ``(i, j)`` with the layer norm
linearised by hand; rollout is a loop of numpy products. Definitions: book/methods.md, §Context-mixing maps.
Five tiny random models cover the layer layouts the maps know: BERT, MPNet (relative position bias), DistilBERT,
GPT-2 (fused projections) and a Llama with grouped-query attention.

Tolerances. The issue fixes the float32 ones: 1e-5 for rollout, value zeroing and ALTI, 1e-4 per head (value
zeroing divides by distances of second order in the perturbation, so float32 round-off of the layer's output,
``~eps32 |o|``, enters a per-head distance of ``~r^2`` as ``~eps32 / r`` relative). Where the fast path runs in
float64 too (:func:`tolerances.in_float64`) both sides differ by float64 round-off only, amplified by the same
division: :data:`FLOAT64` below, far under any of the planted defects (which move maps by 1e-6 and more).
"""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import tiny_decoders as td
from helpers.core.encoding import encode_words
from helpers.core.models import load_model
from helpers.mixing import maps as mx
from tolerances import in_float64

FLOAT32 = {"rollout": 1e-5, "value_zeroing": 1e-5, "alti": 1e-5, "alti_rollout": 1e-5, "value_zeroing_heads": 1e-4}
# float64 round-off (1e-16 relative) divided by the smallest distances of these models (per head down to ~1e-8
# of a row's scale) stays below 1e-8; every planted defect moves a map by more than 1e-6.
FLOAT64 = 1e-8
PER_LAYER = ("rollout", "value_zeroing", "alti", "alti_rollout")

ENCODER_SENTENCES = [["the", "cat", "sat", "on", "the", "mat", "."], ["a", "dog", "sat"],
                     ["the", "biggest", "dog", "is", "unaffable", "."]]
DECODER_SENTENCES = [td.SENTENCE, ["a", "dog", "sat"]]


def toy_vocab(tiny_model_dir) -> list[str]:
    """conftest's toy vocabulary, in id order, as its tiny BERT's tokenizer holds it: read from the fixture's folder,
    not imported (``from conftest import ...`` finds whichever conftest module was imported first under that name)."""
    from transformers import AutoTokenizer

    vocab = AutoTokenizer.from_pretrained(tiny_model_dir).get_vocab()
    return sorted(vocab, key=vocab.get)


@pytest.fixture(scope="module")
def bert_lm(tmp_path_factory, tiny_model_dir):
    """conftest's tiny random BERT (2 layers, 4 heads, hidden 16, its toy vocabulary) with weights drawn at
    ``initializer_range`` 0.2 instead of 0.02. At 0.02 the value path carries about 1/1000 of the residual
    stream, so a zeroed value moves a layer's output by ~1e-4 of its size and the cosine distances are
    ~1e-8, at float32's resolution: the float32 maps are then off by 3e-5 (measured) whatever the code
    does. A trained model mixes far more (MiniLM's smallest per-layer row sum of distances is 1.4e-5,
    book/methods.md, §Context-mixing maps, the pitfalls); at 0.2 this one does too. The float64 comparisons hold
    at both scales."""
    from transformers import BertConfig, BertModel, BertTokenizer

    TOY_VOCAB = toy_vocab(tiny_model_dir)

    directory = tmp_path_factory.mktemp("mixing-bert")
    BertTokenizer(vocab={w: i for i, w in enumerate(TOY_VOCAB)}, do_lower_case=True).save_pretrained(directory)
    config = BertConfig(vocab_size=len(TOY_VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=32, max_position_embeddings=64, initializer_range=0.2)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(directory)
    return load_model(str(directory))


@pytest.fixture(scope="module")
def mpnet_lm(tmp_path_factory):
    """A 2-layer, 4-head random MPNet (relative position bias in every layer's scores; the fast path reuses the
    weights, the reference reruns the model with it), weights at ``initializer_range`` 0.2 as :func:`bert_lm`."""
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizerFast

    directory = tmp_path_factory.mktemp("mixing-mpnet")
    vocab = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", ".", "the", "a", "cat", "dog", "sat", "on", "mat", "is", "big"]
    MPNetTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True,
                       unk_token="<unk>").save_pretrained(directory)
    config = MPNetConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=32, max_position_embeddings=66, initializer_range=0.2)
    torch.manual_seed(0)
    MPNetModel(config).save_pretrained(directory)
    return load_model(str(directory))


@pytest.fixture(scope="module")
def distilbert_lm(tmp_path_factory, tiny_model_dir):
    """A 2-layer, 4-head random DistilBERT (its own module names, no token types), weights as :func:`bert_lm`."""
    from transformers import DistilBertConfig, DistilBertModel, DistilBertTokenizerFast

    TOY_VOCAB = toy_vocab(tiny_model_dir)

    directory = tmp_path_factory.mktemp("mixing-distilbert")
    DistilBertTokenizerFast(vocab={w: i for i, w in enumerate(TOY_VOCAB)}, do_lower_case=True).save_pretrained(directory)
    config = DistilBertConfig(vocab_size=len(TOY_VOCAB), dim=16, n_layers=2, n_heads=4, hidden_dim=32,
                              max_position_embeddings=64, initializer_range=0.2)
    torch.manual_seed(0)
    DistilBertModel(config).save_pretrained(directory)
    return load_model(str(directory))


@pytest.fixture(scope="module")
def gpt2_lm(tmp_path_factory):
    """tiny_decoders' GPT-2 (fused query/key/value projection, biases, LayerNorm before attention and MLP)."""
    return load_model(str(td.save_gpt2(tmp_path_factory.mktemp("mixing-gpt2"))))


@pytest.fixture(scope="module")
def llama_lm(tmp_path_factory):
    """tiny_decoders' Llama: 4 query heads sharing 2 key-value heads, RMSNorm weights drawn in [0.5, 1.5]."""
    return load_model(str(td.save_llama(tmp_path_factory.mktemp("mixing-llama"))))


@pytest.fixture(scope="module", params=["bert", "mpnet", "distilbert", "gpt2", "llama"])
def case(request):
    """A model, its float64 copy, its sentences and the float64 reference maps of each."""
    lm = request.getfixturevalue(f"{request.param}_lm")
    sentences = {"bert": ENCODER_SENTENCES, "mpnet": ENCODER_SENTENCES[:2], "distilbert": ENCODER_SENTENCES[:2],
                 "gpt2": DECODER_SENTENCES,
                 "llama": DECODER_SENTENCES}[request.param]
    lm64 = in_float64(lm)
    batch = encode_words(lm.tokenizer, sentences)
    refs = [reference_maps(lm64, ex.input_ids) for ex in batch.examples]
    return request.param, lm, lm64, batch.examples, refs


# ------------------------------------------------------------------------------ the float64 references


def modules(lm, layer):
    """``(block, value module, first value column in its output, output projection, W_O [heads * d, hidden], LN1
    or None)`` of ``layer``, looked up by hand for BERT, MPNet, DistilBERT, GPT-2 (one ``Conv1D`` for q | k | v,
    weights stored ``[in, out]``) and Llama."""
    kind = lm.model.config.model_type
    if kind == "distilbert":
        block = lm.model.transformer.layer[layer]
        a = block.attention
        return block, a.v_lin, 0, a.out_lin, a.out_lin.weight.T, block.sa_layer_norm
    if kind == "llama":
        block = lm.model.layers[layer]
        out = block.self_attn.o_proj
        return block, block.self_attn.v_proj, 0, out, out.weight.T, None
    if kind == "gpt2":
        block = lm.model.h[layer]
        out = block.attn.c_proj
        return block, block.attn.c_attn, 2 * out.weight.shape[1], out, out.weight, None
    block = lm.model.encoder.layer[layer]
    if kind == "mpnet":
        a = block.attention
        return block, a.attn.v, 0, a.attn.o, a.attn.o.weight.T, a.LayerNorm
    a = block.attention
    return block, a.self.value, 0, a.output.dense, a.output.dense.weight.T, a.output.LayerNorm


def run(lm, ids, layer, *, value_hook=None, oproj_pre_hook=None):
    """One whole forward pass with optional hooks in ``layer``: (layer's own output [T, hidden], attentions)."""
    block, value, _, out_proj, _, _ = modules(lm, layer)
    seen = {}
    handles = [block.register_forward_hook(lambda m, a, o: seen.__setitem__("o", o[0] if isinstance(o, tuple) else o))]
    if value_hook is not None:
        handles.append(value.register_forward_hook(value_hook))
    if oproj_pre_hook is not None:
        handles.append(out_proj.register_forward_pre_hook(oproj_pre_hook))
    try:
        with torch.no_grad():
            out = lm.model(input_ids=torch.as_tensor(ids)[None], output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    return seen["o"][0], [a[0] for a in out.attentions]


def cos_distance(a, b):
    return float(1 - torch.dot(a, b) / (a.norm() * b.norm()))


def row_normalise(m):
    s = m.sum(-1, keepdims=True)
    return np.where(s > 0, m / np.where(s > 0, s, 1), 0.0)


@torch.no_grad()
def reference_maps(lm, ids) -> dict[str, np.ndarray]:
    """Float64 maps of one unpadded input from loops over the model's own modules (see the module docstring)."""
    T, L, H, KV = len(ids), lm.n_layers, lm.n_heads, lm.n_kv_heads
    with torch.no_grad():
        out = lm.model(input_ids=torch.as_tensor(ids)[None], output_attentions=True, output_hidden_states=True)
    alpha = [a[0] for a in out.attentions]  # [head, T, T] per layer
    sees = np.tril(np.ones((T, T))) if lm.causal else np.ones((T, T))
    res = {"value_zeroing": np.zeros((L, T, T)), "value_zeroing_heads": np.zeros((L, H, T, T)),
           "alti": np.zeros((L, T, T)), "weights_changed": 0.0}
    for layer in range(L):
        block, value, first, out_proj, WO, ln1 = modules(lm, layer)
        original, _ = run(lm, ids, layer)
        values = {}
        h_v = value.register_forward_hook(lambda m, a, o: values.__setitem__("v", o[0].clone()))
        run(lm, ids, layer)
        h_v.remove()
        d = WO.shape[0] // H
        v = values["v"][:, first:first + KV * d]  # [T, kv_heads * d]

        def zero(rows, cols):
            def hook(_m, _a, o):
                o = o.clone()
                o[0, rows, cols] = 0
                return o
            return hook

        D = np.zeros((T, T))
        for j in range(T):  # j's value row zeroed in every head
            o2, att2 = run(lm, ids, layer, value_hook=zero(j, slice(first, first + KV * d)))
            res["weights_changed"] = max(res["weights_changed"], float((att2[layer] - alpha[layer]).abs().max()))
            for i in range(T):
                D[i, j] = cos_distance(o2[i], original[i]) * sees[i, j]
        res["value_zeroing"][layer] = row_normalise(D)
        for h in range(H):
            g = h // (H // KV)
            Dh = np.zeros((T, T))
            for j in range(T):
                if KV < H:  # query head h alone: remove alpha^h_ij v^g_j from its slice of the context
                    def pre(_m, args, h=h, g=g, j=j):
                        ctx = args[0].clone()
                        for i in range(T):
                            ctx[0, i, h * d:(h + 1) * d] -= alpha[layer][h, i, j] * v[j, g * d:(g + 1) * d]
                        return (ctx,)
                    o2, _ = run(lm, ids, layer, oproj_pre_hook=pre)
                else:
                    o2, _ = run(lm, ids, layer, value_hook=zero(j, slice(first + h * d, first + (h + 1) * d)))
                for i in range(T):
                    Dh[i, j] = cos_distance(o2[i], original[i]) * sees[i, j]
            res["value_zeroing_heads"][layer, h] = row_normalise(Dh)
        # ALTI: T_i(x_j) per (i, j), the layer norm linearised with the real statistics of u_i
        x = out.hidden_states[layer][0]
        bO = out_proj.bias if out_proj.bias is not None else torch.zeros(WO.shape[1], dtype=WO.dtype)
        sent = torch.zeros(T, T, WO.shape[1], dtype=WO.dtype)  # [i, j, hidden]: sum_h alpha^h_ij v^g_j W_O^h
        for i in range(T):
            for j in range(T):
                for h in range(H):
                    g = h // (H // KV)
                    sent[i, j] += alpha[layer][h, i, j] * v[j, g * d:(g + 1) * d] @ WO[h * d:(h + 1) * d]
        C = np.zeros((T, T))
        for i in range(T):
            u = x[i] + sent[i].sum(0) + bO
            if ln1 is not None:
                s = torch.sqrt(u.var(unbiased=False) + ln1.eps)
                y = ln1.weight * (u - u.mean()) / s + ln1.bias
            else:
                y = u
            for j in range(T):
                t = sent[i, j] + (x[i] if i == j else 0)
                if ln1 is not None:
                    t = ln1.weight * (t - t.mean()) / s
                C[i, j] = max(0.0, float(y.abs().sum() - (y - t).abs().sum())) * sees[i, j]
        res["alti"][layer] = row_normalise(C)
    A = np.stack([a.mean(0).numpy() for a in alpha])
    R, RA = [], []
    for layer in range(L):
        hat = row_normalise(A[layer] + np.eye(T))
        R.append(hat if layer == 0 else hat @ R[-1])
        RA.append(res["alti"][0] if layer == 0 else res["alti"][layer] @ RA[-1])
    res["rollout"], res["alti_rollout"] = np.stack(R), np.stack(RA)
    res["attention"] = np.stack([a.numpy() for a in alpha])
    return res


def errors(lm, examples, refs, methods=tuple(FLOAT32), *, padded=True) -> dict[str, float]:
    """Largest absolute difference between the fast maps and the references, per method: of one padded batch,
    or (``padded=False``) of each example alone, as the references run. The float64 comparisons take the
    latter: a Llama's eager attention takes its softmax in float32 even in a float64 copy (transformers), and
    its round-off depends on the padded length (3e-8 on the weights here)."""
    got = [mx.mixing_for(lm, examples, methods, dtype=None)] if padded else \
        [mx.mixing_for(lm, [ex], methods, dtype=None) for ex in examples]
    worst = {}
    for m in methods:
        worst[m] = max(float(np.abs(got[b if not padded else 0][m][0 if not padded else b, ..., : len(ex), : len(ex)]
                                    .double().cpu().numpy() - ref[m]).max())
                       for b, (ex, ref) in enumerate(zip(examples, refs)))
    return worst


# ------------------------------------------------------------------------------ against the references


def test_float32_maps_match_the_float64_references(case):
    _, lm, _, examples, refs = case
    worst = errors(lm, examples, refs)
    assert all(worst[m] <= FLOAT32[m] for m in FLOAT32), worst


def test_float64_maps_match_the_references_to_round_off(case):
    _, _, lm64, examples, refs = case
    worst = errors(lm64, examples, refs, padded=False)
    assert all(v <= FLOAT64 for v in worst.values()), worst


def test_per_head_value_zeroing_keeps_the_row_argmax(case):
    """The row argmax (what the paper's probes read) is the reference's wherever the reference's top two entries
    are further apart than the per-head tolerance (a closer pair is a tie at float32 precision)."""
    _, lm, _, examples, refs = case
    got = mx.mixing_for(lm, examples, ["value_zeroing_heads"])["value_zeroing_heads"].cpu().numpy()
    for b, (ex, ref) in enumerate(zip(examples, refs)):
        r, g = ref["value_zeroing_heads"], got[b, ..., : len(ex), : len(ex)]
        top2 = np.sort(r, axis=-1)[..., -2:]
        clear = (top2[..., 1] - top2[..., 0] > FLOAT32["value_zeroing_heads"]) & (r.sum(-1) > 0)
        assert clear.sum() > 0.5 * clear.size
        assert np.array_equal(r.argmax(-1)[clear], g.argmax(-1)[clear])


def test_attention_weights_do_not_move_when_a_value_is_zeroed(case):
    """Zeroing a value after the projection leaves every attention weight as it was (book/methods.md, §Context-mixing
    maps, value zeroing), which is why the fast path may reuse them."""
    refs = case[4]
    assert max(r["weights_changed"] for r in refs) == 0.0


# ------------------------------------------------------------------------------ planted defects fail


def _vz_plus_identity(original):
    def planted(block, s, *, per_head, max_rows=mx.MAX_ROWS, rows=None):
        C = original(block, s, per_head=per_head, max_rows=max_rows, rows=rows)
        eye = torch.diag_embed(s.pairs.diagonal(dim1=-2, dim2=-1).to(C.dtype))
        return mx.normalise_rows(0.5 * C + 0.5 * (eye[:, None] if per_head else eye))
    return planted


def _rollout_always_identity(original):
    return lambda maps, identity=False: original(maps, identity=True)


def _l1_with_eps(_original):
    return lambda a, b: (a - b + 1e-6).abs().sum(-1)  # torch.pairwise_distance's default eps


def _one_minus_cos(_original):
    return lambda a, b: 1 - torch.nn.functional.cosine_similarity(a, b.expand_as(a), dim=-1)


DEFECTS = {  # name: (function replaced, its replacement, the maps it spoils, float64 comparison?)
    "0.5 I added to value zeroing": ("value_zeroing", _vz_plus_identity, ("value_zeroing", "value_zeroing_heads"), True),
    "identity in ALTI rollout": ("rollout", _rollout_always_identity, ("alti_rollout",), True),
    "1e-6 in the L1 distance": ("l1_distance", _l1_with_eps, ("alti", "alti_rollout"), True),
    "1 - cos in float32": ("cosine_distance", _one_minus_cos, ("value_zeroing", "value_zeroing_heads"), False),
}


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_each_planted_defect_fails_the_comparison(case, defect, monkeypatch):
    """With the defect patched in, the comparison that passes above fails for each map it spoils (in float64
    for the defects float64 would show, in float32 for the one that exists only there)."""
    name, replace, spoiled, use64 = DEFECTS[defect]
    kind, lm, lm64, examples, refs = case
    monkeypatch.setattr(mx, name, replace(getattr(mx, name)))
    worst = errors(lm64 if use64 else lm, examples, refs, spoiled, padded=not use64)
    limit = FLOAT64 if use64 else None
    failed = [m for m in spoiled if worst[m] > (limit if use64 else FLOAT32[m])]
    assert failed, (kind, worst)


# ------------------------------------------------------------------------------ invariants


def test_rows_sum_to_one_and_padding_and_future_stay_zero(case):
    kind, lm, _, examples, _ = case
    got = mx.mixing_for(lm, examples)
    n = max(len(e) for e in examples)
    for b, ex in enumerate(examples):
        t = len(ex)
        for m, maps in got.items():
            arr = maps[b].double().cpu().numpy()
            assert np.all(arr[..., t:, :] == 0) and np.all(arr[..., :, t:] == 0), m  # padding
            if lm.causal:
                assert np.all(np.triu(np.ones((n, n)), 1) * arr == 0), m
            if m != "norms":
                np.testing.assert_allclose(arr[..., :t, :t].sum(-1), 1, atol=t * 1e-6, err_msg=m)


def test_padding_changes_no_map(case):
    """One sentence alone and inside a padded batch: the same maps, in float64 up to round-off of other batch
    shapes, except that a decoder's weights keep float32 round-off (see :func:`errors`), amplified by value
    zeroing's division by small distances: 1e-6."""
    _, lm, lm64, examples, _ = case
    tolerance = 1e-6 if lm.causal else FLOAT64
    together = mx.mixing_for(lm64, examples, dtype=None)
    short = min(range(len(examples)), key=lambda b: len(examples[b]))
    alone = mx.mixing_for(lm64, [examples[short]], dtype=None)
    t = len(examples[short])
    for m in together:
        np.testing.assert_allclose(together[m][short, ..., :t, :t].numpy(), alone[m][0].numpy(), atol=tolerance,
                                   err_msg=m)


def test_chunking_changes_no_map(case):
    _, _, lm64, examples, _ = case
    chosen = ["value_zeroing", "value_zeroing_heads", "alti"]
    whole = mx.mixing_for(lm64, examples, chosen, dtype=None)
    cut = mx.mixing_for(lm64, examples, chosen, max_rows=1, dtype=None)
    for m in whole:
        np.testing.assert_allclose(whole[m].numpy(), cut[m].numpy(), atol=FLOAT64, err_msg=m)


def test_value_zeroing_on_the_rows_asked_for_is_those_rows_of_the_whole_map(case):
    """``rows``: the rows asked for are the whole map's (float64 round-off: the reruns are chunked differently), every
    other row of value zeroing is exactly 0, and the maps without reruns do not change."""
    from helpers.core.extract import model_inputs

    _, _, lm64, examples, _ = case
    inputs = model_inputs(lm64, examples)
    mask = inputs["attention_mask"].bool()
    rows = torch.zeros_like(mask)
    rows[0, 1] = rows[0, 3] = rows[-1, 2] = True  # other rows, and more of them, in the first input than the last
    chosen = ["attention", "value_zeroing", "value_zeroing_heads", "alti"]
    whole = mx.mixing_batch(lm64, inputs["input_ids"], inputs["attention_mask"], chosen, dtype=None)
    some = mx.mixing_batch(lm64, inputs["input_ids"], inputs["attention_mask"], chosen, dtype=None, rows=rows)
    for m in ("value_zeroing", "value_zeroing_heads"):
        asked = rows.view(rows.shape[0], *([1] * (whole[m].dim() - 3)), rows.shape[1])
        asked = asked.expand(whole[m].shape[:-1])
        np.testing.assert_allclose(some[m][asked].numpy(), whole[m][asked].numpy(), rtol=0, atol=FLOAT64, err_msg=m)
        assert torch.all(some[m][~asked] == 0), m
        assert torch.all(whole[m][asked].sum(-1) > 0), m  # the rows compared are not empty ones
    for m in ("attention", "alti"):
        assert torch.equal(some[m], whole[m]), m


def test_a_layer_with_zero_output_projection_mixes_nothing(case):
    """Its value-zeroing distances are all 0 (rows kept 0 and counted, not divided by zero) and its ALTI map is
    the identity (each token keeps only its residual)."""
    _, lm, lm64, examples, _ = case
    silent = in_float64(lm)
    out_proj = modules(silent, 0)[3]
    with torch.no_grad():
        out_proj.weight.zero_()
        if out_proj.bias is not None:
            out_proj.bias.zero_()
    ex = examples[0]
    got = mx.mixing_for(silent, [ex], dtype=None)
    t = len(ex)
    assert np.all(got["value_zeroing"][0, 0].numpy() == 0)
    assert np.all(got["value_zeroing_heads"][0, 0].numpy() == 0)
    mask = torch.ones(1, t)
    assert mx.empty_rows(got["value_zeroing"][:, :1], mask) == t
    assert mx.empty_rows(got["value_zeroing_heads"][:, :1], mask) == lm.n_heads * t
    np.testing.assert_array_equal(got["alti"][0, 0].numpy(), np.eye(t))
    assert mx.empty_rows(got["value_zeroing"][:, 1:], mask) == 0  # the other layer still mixes


def test_token_maps_of_one_sentence(case):
    kind, lm, _, examples, _ = case
    words = list(examples[0].words)
    maps = mx.token_maps(lm, words, methods=["alti", "attention"])
    assert set(maps) == {"tokens", "alti", "attention"}
    t = len(examples[0])
    assert len(maps["tokens"]) == t and maps["alti"].shape == (lm.n_layers, t, t)
    assert maps["attention"].shape == (lm.n_layers, lm.n_heads, t, t) and maps["alti"].dtype == np.float32
    if lm.causal:
        assert maps["tokens"][0] == lm.tokenizer.bos_token


def test_an_unknown_method_is_one_error_naming_the_choices(bert_lm):
    with pytest.raises(ValueError, match="unknown; choose from attention, norms, rollout"):
        mx.token_maps(bert_lm, ["a", "cat"], methods=["rollout", "lrp"])


def test_a_bfloat16_model_gives_float32_maps_computed_in_float32(case):
    """``--dtype bfloat16``: the weights and the layer reruns in bfloat16, every map's arithmetic in float32, so each
    normalised map's rows sum to 1 within float32 round-off of a sum of ``t`` terms (``2 t eps32``); had the
    arithmetic stayed in bfloat16 they would be off by up to ``t 2**-8``. The raw weights and norms are the
    model's own numbers (rounded to bfloat16 by its softmax), so they are left out."""
    import dataclasses

    kind, lm, _, examples, _ = case
    lm16 = dataclasses.replace(lm, model=copy.deepcopy(lm.model).to(torch.bfloat16), _fingerprint=None)
    got = mx.mixing_for(lm16, examples)
    for b, ex in enumerate(examples):
        t = len(ex)
        for m, maps in got.items():
            assert maps.dtype == torch.float32 and torch.isfinite(maps).all(), m
            if m in ("attention", "norms"):
                continue
            rows = maps[b].double().cpu().numpy()[..., :t, :t].sum(-1)
            np.testing.assert_allclose(rows, 1, atol=2 * t * np.finfo(np.float32).eps, err_msg=m)

"""Scoring minimal pairs: the independent float64 reference (:mod:`reference_minimal_pairs`) checked against what
can be computed another way, then ``helpers.minimal_pairs.score_pairs`` (float32, batched, padded) checked against
the reference, with and without heads removed, on tiny random models: a GPT-2, a Llama with grouped-query attention
(:mod:`tiny_decoders`) and a BERT with a masked-LM head built here. The pairs are hand-written toy sentences, shaped
like BLiMP rows (no BLiMP data)."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import reference_minimal_pairs as ref
import tiny_decoders as td
from tolerances import float64_passes, round_off

# Every weight matrix of the tiny decoders times this (their init std 0.02 becomes 0.2): with the stock init the
# logits are nearly uniform (|logit| < 0.4) and removing a head moves a score by 1e-3 nats, about as much as the
# float32 tolerance below; at 0.2 a head moves it by 0.1 nats or more and the logits are a few units, as in a
# trained model, so a comparison that removed the wrong head would fail (each test checks that it would).
SHARPEN = 10.0
BERT_INIT_STD = 0.2  # the tiny BERT's init std, likewise
POWER = 10  # a wrong removal (a neighbouring head set) must move some score by this many tolerances

# Toy pairs shaped like BLiMP rows (own sentences): all but the last have the one-prefix fields; "big cat" is a
# several-word "word" (as BLiMP's "grocery store"), "unaffable" and "cats" split into several tokens.
PAIRS = [
    {"sentence_good": "This cat sits on the mat.", "sentence_bad": "This cats sits on the mat.",
     "one_prefix_prefix": "This", "one_prefix_word_good": "cat", "one_prefix_word_bad": "cats"},
    {"sentence_good": "These dogs sit on a mat.", "sentence_bad": "These dog sit on a mat.",
     "one_prefix_prefix": "These", "one_prefix_word_good": "dogs", "one_prefix_word_bad": "dog"},
    {"sentence_good": "She saw herself.", "sentence_bad": "She saw himself.",
     "one_prefix_prefix": "She saw", "one_prefix_word_good": "herself", "one_prefix_word_bad": "himself"},
    {"sentence_good": "She saw this big cat.", "sentence_bad": "She saw this big cats.",
     "one_prefix_prefix": "She saw this", "one_prefix_word_good": "big cat", "one_prefix_word_bad": "big cats"},
    {"sentence_good": "The unaffable dog is big.", "sentence_bad": "The unaffable dogs is big.",
     "one_prefix_prefix": "The unaffable", "one_prefix_word_good": "dog", "one_prefix_word_bad": "dogs"},
    {"sentence_good": "The dog is big.", "sentence_bad": "The dog big is.", "one_prefix_method": False},
]
for _n, _row in enumerate(PAIRS):
    _row.update(UID="toy_pairs", pairID=str(_n), field="syntax", linguistics_term="toy",
                one_prefix_method=_row.get("one_prefix_method", True))
WITH_PREFIX = [row for row in PAIRS if row["one_prefix_method"]]
WITHOUT_PREFIX = [row for row in PAIRS if not row["one_prefix_method"]]

# The tiny BERT's WordPiece vocabulary: every word of PAIRS, "cats" as cat ##s, "unaffable" as un ##aff ##able.
BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "the", "a", "this", "these", "she", "saw", "herself",
              "himself", "cat", "dog", "##s", "sits", "sit", "on", "mat", "big", "is", "un", "##aff", "##able", "sat"]
HEADS = 4  # every tiny model's heads per layer (td.GPT2_HEADS, td.LLAMA_HEADS, the BERT's)

# Head sets removed (0-based (layer, head)), each with neighbouring sets that a wrong implementation might remove
# instead: the power check asks the reference to tell them apart by POWER tolerances. (0, 0) and (0, 1) share a
# key-value group in the Llama: removing query head 1 must leave query head 0 as it was.
REMOVALS = {
    "none": ([], [[(0, 1)]]),
    "one head": ([(0, 1)], [[], [(0, 0)]]),
    "across layers": ([(0, 0), (1, 3)], [[(0, 1), (1, 2)], [(0, 0)], [(1, 3)]]),
    "a whole layer": ([(1, h) for h in range(HEADS)], [[(0, h) for h in range(HEADS)], [(1, 0), (1, 1), (1, 2)]]),
}
CASES = [("gpt2", "full"), ("gpt2", "prefix"), ("llama", "full"), ("llama", "prefix"), ("bert", "full"),
         ("bert", "prefix")]


def sharpened(directory, scale: float = SHARPEN):
    """The saved causal LM in ``directory`` with every weight matrix times ``scale``, saved again in place."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(directory)
    with torch.no_grad():
        for p in model.parameters():  # a tied lm_head is the embedding: scaled once
            if p.dim() == 2:
                p.mul_(scale)
    model.save_pretrained(directory)
    return directory


def save_bert_mlm(directory):
    """A 2-layer, 4-head random BertForMaskedLM (its own masked-LM head) with :data:`BERT_VOCAB`."""
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    tokenizer = BertTokenizer(vocab={w: i for i, w in enumerate(BERT_VOCAB)}, do_lower_case=True)
    config = BertConfig(vocab_size=len(BERT_VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=HEADS,
                        intermediate_size=32, max_position_embeddings=64, initializer_range=BERT_INIT_STD)
    torch.manual_seed(0)
    BertForMaskedLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from helpers import load_model

    root = tmp_path_factory.mktemp("pairs-models")
    dirs = {"gpt2": sharpened(td.save_gpt2(root / "gpt2")), "llama": sharpened(td.save_llama(root / "llama")),
            "bert": save_bert_mlm(root / "bert")}
    return {kind: load_model(str(path)) for kind, path in dirs.items()}


@pytest.fixture(scope="module")
def reference(models):
    """``reference(kind, method, remove)``: :func:`ref.reference_terms` on :data:`PAIRS` (those with the prefix
    fields for ``"prefix"``), computed once per argument."""
    done = {}

    def get(kind, method, remove):
        key = (kind, method, tuple(sorted(remove)))
        if key not in done:
            done[key] = ref.reference_terms(models[kind], pairs_for(method), remove, method)
        return done[key]

    return get


def pairs_for(method: str) -> list[dict]:
    return WITH_PREFIX if method == "prefix" else PAIRS


def scores(terms) -> np.ndarray:
    """``[good..., bad...]``: the sentences' scores from :func:`ref.reference_terms`' terms."""
    return np.array([ref.total(logp) for which in ("good", "bad") for logp, _ in terms[which]])


# ------------------------------------------------------------------------------------ tolerances


def forward_terms(config, positions: int) -> int:
    """How many terms the sums a token's logits pass through add up to, in all: per layer two norms (mean and
    variance over the hidden size: 4 * hidden), a query-key dot product (head size), the softmax's sum and the
    weighted sum of values over the positions (2 * positions), the output projection and the MLP's first
    projection (hidden each) and its second (the MLP's inner size); outside the layers at most two norms and two
    projections (the final norm and the output head; BERT: the embeddings' norm, the MLM head's transform, its
    norm, its decoder): 6 * hidden."""
    hidden, heads = config.hidden_size, config.num_attention_heads
    head = getattr(config, "head_dim", None) or hidden // heads
    inner = getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None) or 4 * hidden
    return config.num_hidden_layers * (6 * hidden + head + 2 * positions + inner) + 6 * hidden


def float32_tolerance(logp: np.ndarray, zmax: np.ndarray, *, terms: int, vocab: int) -> float:
    """How far a float32 score of one sentence may be from the float64 reference (``logp``: its terms, ``zmax``: the
    largest |logit| at each), at most, from the arithmetic: each term ``z_y - logsumexp(z)`` carries the logits'
    round-off twice (its target logit and the log-sum-exp), each logit off by a sum of ``terms`` roundings on values
    of the logits' size (``round_off(zmax, 2 * terms)``); the log-sum-exp adds ``vocab`` exponentials, a relative
    error of ``vocab`` roundings of the sum and so an absolute one of its log (``round_off(1, vocab)`` per term);
    and the score adds ``len(logp)`` terms (``round_off(score, len(logp))``). Written in units of float32 epsilon
    times the number of summed tokens and the logits' size: no number measured on this CPU. Padding adds only
    exact zeros (a masked key's weight is 0), so it adds no term."""
    per_token = sum(round_off(z, 2 * terms) for z in zmax) + len(logp) * round_off(1.0, vocab)
    return per_token + round_off(ref.total(logp), len(logp))


def tolerances(terms, *, forward: int, vocab: int) -> np.ndarray:
    """:func:`float32_tolerance` of each sentence, ``[good..., bad...]`` as :func:`scores`."""
    return np.array([float32_tolerance(logp, zmax, terms=forward, vocab=vocab)
                     for which in ("good", "bad") for logp, zmax in terms[which]])


def longest(lm, method: str) -> int:
    """The most positions any sentence of :data:`PAIRS` is scored on (encoders: with their special tokens)."""
    if lm.causal:
        return max(len(ref.decoder_ids(lm.tokenizer, row, which, method)[0])
                   for row in pairs_for(method) for which in ("good", "bad"))
    return max(len(lm.tokenizer(ref.encoder_text(lm.tokenizer, row, which, method)[0])["input_ids"])
               for row in pairs_for(method) for which in ("good", "bad"))


# ------------------------------------------------------------------------------------ the reference itself


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_reference_full_score_is_the_sequence_log_probability(models, kind):
    """The chain rule, two ways. (1) The full method's score is log P of the whole sequence after BOS: minus the
    summed cross-entropy of the float64 logits against the shifted ids (torch's ``cross_entropy``; transformers'
    own ``labels=`` loss would not do, it casts the logits to float32). (2) For a
    sentence that is exactly ``prefix + " " + word``: full(sentence) = full(prefix) + prefix-method(word), i.e.
    log P(prefix, word) = log P(prefix) + log P(word | prefix), and the two methods read the same ids."""
    lm = models[kind]
    model = ref.decoder_float64(lm)
    for row in PAIRS:
        ids, first = ref.decoder_ids(lm.tokenizer, row, "good", "full")
        assert first == 1 and ids[0] == lm.tokenizer.bos_token_id and lm.tokenizer.bos_token_id not in ids[1:]
        score = ref.total(ref.decoder_terms(model, lm.tokenizer, row, "good", "full")[0])
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0]
        assert logits.dtype == torch.float64
        loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="sum").item()
        assert score == pytest.approx(-loss, rel=0, abs=float64_passes(score))
    for row in WITH_PREFIX:
        for which in ("good", "bad"):
            prefix, word = row["one_prefix_prefix"], row[f"one_prefix_word_{which}"]
            whole = {"sentence_good": f"{prefix} {word}"}
            start = {"sentence_good": prefix}
            assert ref.decoder_ids(lm.tokenizer, whole, "good", "full")[0] == ref.decoder_ids(lm.tokenizer, row, which,
                                                                                              "prefix")[0]
            joint = ref.total(ref.decoder_terms(model, lm.tokenizer, whole, "good", "full")[0])
            parts = (ref.total(ref.decoder_terms(model, lm.tokenizer, start, "good", "full")[0])
                     + ref.total(ref.decoder_terms(model, lm.tokenizer, row, which, "prefix")[0]))
            assert joint == pytest.approx(parts, rel=0, abs=float64_passes(joint))
            scored = ref.decoder_terms(model, lm.tokenizer, row, which, "prefix")[0]
            assert len(scored) == len(lm.tokenizer(" " + word, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_reference_ids_are_the_harness_convention(models, kind):
    """``[BOS] + tokenizer(" " + text)``: the same ids from a freshly loaded tokenizer (no prefix space set) as from
    the loaded model's (prefix space set), and every word, the first too, starts with a space."""
    from transformers import AutoTokenizer

    lm = models[kind]
    fresh = AutoTokenizer.from_pretrained(lm.source)
    assert getattr(fresh.backend_tokenizer.pre_tokenizer, "add_prefix_space", False) is False
    for row in PAIRS:
        text = row["sentence_good"]
        ids, _ = ref.decoder_ids(lm.tokenizer, row, "good", "full")
        assert ids == [fresh.bos_token_id] + fresh(" " + text, add_special_tokens=False)["input_ids"]
        assert fresh.convert_ids_to_tokens(ids[1]).startswith("Ġ")  # the first word after a space
        assert ids[1:] != fresh(text, add_special_tokens=False)["input_ids"]  # without it, another first token


def per_position_logits(model, kind: str, tokens: list[int], positions: list[int]) -> torch.Tensor:
    """``[len(tokens), vocab]``: the logits of each token alone at its position in a model whose every head is
    removed, written out from its parts: the attention sub-layer then adds its output projection's bias only (its
    input is 0), so each position is a function of its own token and position, no attention computed."""
    x = torch.tensor(tokens)
    p = torch.tensor(positions)
    with torch.no_grad():
        if kind == "gpt2":
            base = model.transformer
            h = base.wte(x) + base.wpe(p)
            for block in base.h:
                h = h + block.attn.c_proj.bias
                h = h + block.mlp(block.ln_2(h))
            return model.lm_head(base.ln_f(h))
        if kind == "llama":
            base = model.model
            h = base.embed_tokens(x)
            for layer in base.layers:
                h = h + layer.self_attn.o_proj(torch.zeros_like(h))  # no bias: 0
                h = h + layer.mlp(layer.post_attention_layernorm(h))
            return model.lm_head(base.norm(h))
        base = model.bert  # BERT, token type 0
        emb = base.embeddings
        h = emb.LayerNorm(emb.word_embeddings(x) + emb.position_embeddings(p) + emb.token_type_embeddings(0 * x))
        for layer in base.encoder.layer:
            out = layer.attention.output
            a = out.LayerNorm(out.dense.bias + h)
            h = layer.output.LayerNorm(layer.output.dense(layer.intermediate(a)) + a)
        return model.cls(h)


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bert"])
def test_reference_with_every_head_removed_is_computed_by_hand(models, kind):
    """Every head of every layer removed: each token's log-probability is a function of one position alone (a
    decoder's previous token at its position; a masked LM's mask token at the scored position, whatever else is
    masked), computed from the model's parts without attention (:func:`per_position_logits`). Removing all but one
    head gives other scores (the reference does depend on the heads)."""
    lm = models[kind]
    everything = [(layer, head) for layer in range(2) for head in range(HEADS)]
    got = ref.reference_terms(lm, PAIRS, everything, "full")
    model = ref.decoder_float64(lm) if lm.causal else ref.masked_lm_float64(lm)
    for which in ("good", "bad"):
        for row, (logp, _) in zip(PAIRS, got[which]):
            if lm.causal:
                ids, _ = ref.decoder_ids(lm.tokenizer, row, which, "full")
                inputs, positions, targets = ids[:-1], list(range(len(ids) - 1)), ids[1:]
            else:
                encoded = lm.tokenizer(row[f"sentence_{which}"])
                scored = [i for i, w in enumerate(encoded.word_ids()) if w is not None]
                targets = [encoded["input_ids"][i] for i in scored]
                inputs, positions = [lm.tokenizer.mask_token_id] * len(scored), scored
            hand = torch.log_softmax(per_position_logits(model, kind, inputs, positions).double(), -1)
            hand = hand[torch.arange(len(targets)), torch.tensor(targets)].numpy()
            np.testing.assert_allclose(logp, hand, rtol=0, atol=float64_passes(hand))
    almost = ref.score_pairs_reference(lm, PAIRS, everything[:-1], "full")
    assert np.abs(almost["good"] - np.array([ref.total(t) for t, _ in got["good"]])).max() > 1e-3


def zeroed(model, remove):
    """A copy of ``model`` whose output projections have the removed heads' input slices of their weight set to 0:
    removing heads by editing weights, not by a hook. GPT-2's Conv1D weight is [in, out], a Linear's [out, in]."""
    model = copy.deepcopy(model)
    d = model.config.hidden_size // model.config.num_attention_heads
    with torch.no_grad():
        for layer, head in remove:
            if hasattr(model, "transformer"):
                model.transformer.h[layer].attn.c_proj.weight[head * d:(head + 1) * d, :] = 0
            elif hasattr(model, "model"):
                model.model.layers[layer].self_attn.o_proj.weight[:, head * d:(head + 1) * d] = 0
            else:
                model.bert.encoder.layer[layer].attention.output.dense.weight[:, head * d:(head + 1) * d] = 0
    return model


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bert"])
def test_reference_hook_equals_zeroed_weights(models, kind):
    """The reference's hook (the context vector times 0, bias kept) scores as the model whose output projection
    ignores those heads' inputs (:func:`zeroed`), for each removal set."""
    lm = models[kind]
    model = ref.decoder_float64(lm) if lm.causal else ref.masked_lm_float64(lm)
    for remove, _ in REMOVALS.values():
        edited = zeroed(model, remove)
        for row in PAIRS:
            if lm.causal:
                with ref.removed_heads(model, remove):
                    hooked = ref.decoder_terms(model, lm.tokenizer, row, "bad", "full")[0]
                plain = ref.decoder_terms(edited, lm.tokenizer, row, "bad", "full")[0]
            else:
                with ref.removed_heads(model, remove):
                    hooked = ref.encoder_terms(model, lm.tokenizer, row["sentence_bad"])[0]
                plain = ref.encoder_terms(edited, lm.tokenizer, row["sentence_bad"])[0]
            np.testing.assert_allclose(hooked, plain, rtol=0, atol=float64_passes(plain))


def test_pll_word_l2r_masks_a_token_and_the_rest_of_its_word(models):
    """Kauf and Ivanova's PLL-word-l2r on "The unaffable cats sat.": [CLS] the un ##aff ##able cat ##s sat . [SEP];
    scoring "un" masks the whole word, "##aff" masks itself and "##able", "cat" masks "cat ##s"."""
    tok = models["bert"].tokenizer
    encoded = tok("The unaffable cats sat.")
    assert tok.convert_ids_to_tokens(encoded["input_ids"]) == ["[CLS]", "the", "un", "##aff", "##able", "cat", "##s",
                                                               "sat", ".", "[SEP]"]
    M = "[MASK]"
    expected = {
        1: ["[CLS]", M, "un", "##aff", "##able", "cat", "##s", "sat", ".", "[SEP]"],
        2: ["[CLS]", "the", M, M, M, "cat", "##s", "sat", ".", "[SEP]"],
        3: ["[CLS]", "the", "un", M, M, "cat", "##s", "sat", ".", "[SEP]"],
        4: ["[CLS]", "the", "un", "##aff", M, "cat", "##s", "sat", ".", "[SEP]"],
        5: ["[CLS]", "the", "un", "##aff", "##able", M, M, "sat", ".", "[SEP]"],
        6: ["[CLS]", "the", "un", "##aff", "##able", "cat", M, "sat", ".", "[SEP]"],
        7: ["[CLS]", "the", "un", "##aff", "##able", "cat", "##s", M, ".", "[SEP]"],
        8: ["[CLS]", "the", "un", "##aff", "##able", "cat", "##s", "sat", M, "[SEP]"],
    }
    got = ref.pll_word_l2r_inputs(encoded["input_ids"], encoded.word_ids(), tok.mask_token_id)
    assert {i: tok.convert_ids_to_tokens(masked) for masked, i in got} == expected


def test_pll_prefix_method_scores_the_word_in_the_cut_sentence(models):
    """An encoder's one-prefix method: the input is the sentence cut after the word, [CLS] prefix word [SEP], and
    only the word's tokens are scored, each with the rest of its word masked: "big cats" after "She saw this" is
    big, cat, ##s."""
    tok = models["bert"].tokenizer
    row = PAIRS[3]
    text, skipped = ref.encoder_text(tok, row, "bad", "prefix")
    assert text == "She saw this big cats" and skipped == 3
    encoded = tok(text)
    got = ref.pll_word_l2r_inputs(encoded["input_ids"], encoded.word_ids(), tok.mask_token_id)[skipped:]
    M = "[MASK]"
    assert [tok.convert_ids_to_tokens(masked) for masked, _ in got] == [
        ["[CLS]", "she", "saw", "this", M, "cat", "##s", "[SEP]"],
        ["[CLS]", "she", "saw", "this", "big", M, M, "[SEP]"],
        ["[CLS]", "she", "saw", "this", "big", "cat", M, "[SEP]"],
    ]
    assert [i for _, i in got] == [4, 5, 6]


def test_reference_errors(models):
    lm = models["gpt2"]
    with pytest.raises(ValueError, match="one_prefix_prefix"):
        ref.score_pairs_reference(lm, WITHOUT_PREFIX, method="prefix")
    with pytest.raises(ValueError, match="method"):
        ref.score_pairs_reference(lm, PAIRS, method="whole")
    with pytest.raises(ValueError, match=r"\(2, 0\)"):
        ref.score_pairs_reference(lm, PAIRS, remove=[(2, 0)])
    with pytest.raises(ValueError, match="one_prefix_prefix"):
        ref.score_pairs_reference(models["bert"], WITHOUT_PREFIX, method="prefix")


# ------------------------------------------------------------------------------------ the package against it


def package_scores(lm, method, remove) -> np.ndarray:
    """``[good..., bad...]`` from ``helpers.minimal_pairs.score_pairs``, checked for the contract's layout."""
    minimal_pairs = pytest.importorskip("helpers.minimal_pairs")
    pairs = pairs_for(method)
    out = minimal_pairs.score_pairs(lm, pairs, remove=remove, method=method)
    assert set(out) >= {"good", "bad"}
    good, bad = (np.asarray(out[which], dtype=np.float64) for which in ("good", "bad"))
    assert good.shape == bad.shape == (len(pairs),)
    return np.concatenate([good, bad])


def float32_tolerances(lm, method: str, terms) -> np.ndarray:
    """:func:`float32_tolerance` of each sentence of ``terms`` (:func:`ref.reference_terms`), ``[good..., bad...]``."""
    return tolerances(terms, forward=forward_terms(lm.model.config, longest(lm, method)), vocab=len(lm.tokenizer))


@pytest.mark.parametrize("removal", list(REMOVALS))
@pytest.mark.parametrize("kind, method", CASES)
def test_reference_tells_a_head_set_from_its_neighbours(models, reference, kind, method, removal):
    """The comparison below can fail: each removal set moves some sentence's reference score, against each of its
    neighbouring sets (:data:`REMOVALS`: no head, the other query head of a key-value group, another layer, one head
    fewer), by more than :data:`POWER` float32 tolerances. A package that removed the wrong heads would be caught."""
    lm = models[kind]
    remove, neighbours = REMOVALS[removal]
    want = scores(reference(kind, method, remove))
    tol = float32_tolerances(lm, method, reference(kind, method, remove))
    for other in neighbours:
        moved = np.abs(scores(reference(kind, method, other)) - want)
        assert (moved / tol).max() > POWER, (other, moved, tol)


@pytest.mark.parametrize("removal", list(REMOVALS))
@pytest.mark.parametrize("kind, method", CASES)
def test_score_pairs_agrees_with_the_float64_reference(models, reference, kind, method, removal):
    """float32 ``score_pairs`` (batched, padded) against the float64 reference, sentence by sentence, within
    :func:`float32_tolerance` (which :func:`test_reference_tells_a_head_set_from_its_neighbours` shows is sharp
    enough to tell the removed heads apart)."""
    lm = models[kind]
    remove, _ = REMOVALS[removal]
    terms = reference(kind, method, remove)
    got = package_scores(lm, method, remove)
    np.testing.assert_array_less(np.abs(got - scores(terms)), float32_tolerances(lm, method, terms))


def test_score_pairs_refuses_prefix_without_the_fields(models):
    """``method="prefix"`` on a pair without the one-prefix fields is an error that names them; an unknown method
    is one too."""
    minimal_pairs = pytest.importorskip("helpers.minimal_pairs")
    lm = models["gpt2"]
    with pytest.raises(ValueError, match="prefix"):
        minimal_pairs.score_pairs(lm, WITH_PREFIX[:1] + WITHOUT_PREFIX, method="prefix")
    with pytest.raises(ValueError, match="whole"):
        minimal_pairs.score_pairs(lm, PAIRS, method="whole")

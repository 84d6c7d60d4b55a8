"""Decoders (causal LMs) as models: loading (folder, .gguf), their inputs (BOS, byte-level words), causal word-level
maps, norm maps under grouped-query attention, attention to the first position, and one-line errors for bad input.
Tiny random GPT-2 and Llama models built from configs (:mod:`tiny_decoders`), no download."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from helpers.core.encoding import encode_words
from helpers.core.errors import ModelNotAvailableError, NoAttentionError
from helpers.core.extract import iter_attention
from helpers.core.models import check_model, is_causal_config, load_model, positions_limit
from helpers.sinks.stats import (
    FirstPositionAccumulator,
    first_position_shares,
    sink_rate,
    sink_rate_by_layer,
)

import tiny_decoders as td
from tests.references import first_position_reference, iter_weights_and_norms, norm_maps_reference, word_level_reference
from tolerances import in_float64, round_off

KINDS = ("gpt2", "llama")


@pytest.fixture(scope="module")
def decoder_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("decoders")
    dirs = {"gpt2": td.save_gpt2(root / "gpt2"), "llama": td.save_llama(root / "llama")}
    dirs["gguf"] = td.write_llama_gguf(dirs["llama"], root / "tiny-llama.gguf")
    return dirs


@pytest.fixture(scope="module")
def decoders(decoder_dirs):
    return {kind: load_model(str(decoder_dirs[kind])) for kind in KINDS}


# ------------------------------------------------------------------------------------ loading


def test_decoders_are_causal_and_keep_their_lm_head(decoders, tiny_lm):
    gpt2, llama = decoders["gpt2"], decoders["llama"]
    assert gpt2.causal and llama.causal and not tiny_lm.causal
    assert (gpt2.n_heads, gpt2.n_kv_heads) == (td.GPT2_HEADS, td.GPT2_HEADS)
    assert (llama.n_heads, llama.n_kv_heads) == (td.LLAMA_HEADS, td.LLAMA_KV_HEADS)
    assert type(llama.model).__name__ == "LlamaModel" and hasattr(llama.language_model, "lm_head")
    assert llama.language_model.model is llama.model  # one set of weights
    assert gpt2.max_positions == td.CONTEXT  # GPT-2's config.json says n_positions
    assert llama.card()["causal"] and "causal" not in tiny_lm.card()
    assert is_causal_config({"model_type": "gpt2"}) and not is_causal_config({"model_type": "bert"})
    assert is_causal_config({"model_type": "bert", "is_decoder": True})
    assert positions_limit({"model_type": "gpt2", "n_positions": 1024}) == 1024


def test_gguf_file_loads_the_same_weights_and_tokenizer(decoder_dirs, decoders):
    """A .gguf written from the tiny Llama (float32, llama.cpp's names and query/key order) is the same model."""
    lm = load_model(str(decoder_dirs["gguf"]))
    assert lm.causal and lm.n_kv_heads == td.LLAMA_KV_HEADS and "GGUF file" in lm.origin
    reference = decoders["llama"].model.state_dict()
    for name, tensor in lm.model.state_dict().items():
        assert torch.equal(tensor, reference[name]), name
    ids = encode_words(lm.tokenizer, [td.SENTENCE]).examples[0].input_ids
    assert ids.tolist() == encode_words(decoders["llama"].tokenizer, [td.SENTENCE]).examples[0].input_ids.tolist()
    assert check_model(str(decoder_dirs["gguf"])) == td.CONTEXT


# ------------------------------------------------------------------------------------ inputs


@pytest.mark.parametrize("kind", KINDS)
def test_word_alignment_of_byte_level_bpe(decoders, decoder_dirs, kind):
    """BOS, then each word's tokens as inside running text ("Ġcat"), no token after the last word; without BOS the
    words take positions 0..n-1."""
    lm = decoders[kind]
    ex = encode_words(lm.tokenizer, [td.SENTENCE]).examples[0]
    n = len(td.SENTENCE)
    assert ex.input_ids[0] == lm.tokenizer.bos_token_id and ex.word_of_token[0] == 0
    assert (ex.lead, ex.trail, ex.n_positions) == (1, 0, n + 1)
    for w, word in enumerate(td.SENTENCE, start=1):
        running = lm.tokenizer(" " + word, add_special_tokens=False)["input_ids"]
        assert ex.input_ids[ex.word_of_token == w].tolist() == running, word
    assert ex.word_of_token[-1] == n  # the last token is the last word's: no [SEP], no EOS
    bare = load_model(str(decoder_dirs[kind]), bos=False)
    assert not bare.bos and bare.fingerprint() != lm.fingerprint()  # every cache key tells them apart
    ex0 = encode_words(bare.tokenizer, [td.SENTENCE]).examples[0]
    assert ex0.input_ids.tolist() == ex.input_ids[1:].tolist()
    assert ex0.word_of_token.tolist() == (ex.word_of_token[1:] - 1).tolist() and ex0.n_positions == n


def test_no_bos_from_the_context(decoder_dirs, monkeypatch):
    from helpers.context import RunContext

    monkeypatch.setenv("BERT_ATTENTION_NO_BOS", "1")
    ctx = RunContext.from_env()
    assert ctx.no_bos
    with ctx.active():
        assert not load_model(str(decoder_dirs["gpt2"])).bos
    with ctx.replace(no_bos=False).active():
        assert load_model(str(decoder_dirs["gpt2"])).bos


@pytest.mark.parametrize("kind", KINDS)
def test_causal_word_maps_against_loops(decoders, kind):
    """Word-level maps of a decoder are R A S of its token maps (slow loops), rows sum to 1 over the visible prefix,
    and nothing lies above the diagonal, at token and at word level."""
    lm = decoders[kind]
    batch = encode_words(lm.tokenizer, [td.SENTENCE, td.SENTENCE[:3]])
    tokens = {ex.index: a for ex, a in iter_attention(lm, batch, level="token", batch_size=2)}
    for ex, words in iter_attention(lm, batch, level="word", batch_size=2):
        attn = tokens[ex.index]
        n = len(ex)
        assert np.all(np.triu(attn, 1) == 0)  # a query never sees a later key
        for q in range(n):  # rows sum to 1 over keys 0..q: float32 sums of q + 1 terms
            np.testing.assert_allclose(attn[..., q, : q + 1].sum(-1), 1.0, rtol=0, atol=round_off(1.0, q + 1))
        reference = word_level_reference(attn, ex.word_of_token)
        assert words.shape == reference.shape == (lm.n_layers, lm.n_heads, ex.n_positions, ex.n_positions)
        # tolerance: float32 sums of at most n * n products of values up to 1 (R A S)
        np.testing.assert_allclose(words, reference, rtol=0, atol=round_off(1.0, n * n))
        assert np.all(np.triu(words, 1) == 0)
        np.testing.assert_allclose(words.sum(-1), 1.0, rtol=0, atol=round_off(1.0, n * n))


@pytest.mark.parametrize("kind", KINDS)
def test_norm_maps_with_shared_key_value_heads(decoders, kind):
    """Norm maps of GPT-2 (fused q|k|v) and of a Llama whose 4 query heads share 2 key-value heads, against the
    explicit loops. Both sides in float64; what is left is the one float32 rounding of each side's map."""
    lm = in_float64(decoders[kind])
    batch = encode_words(lm.tokenizer, [td.SENTENCE, td.SENTENCE[:3]])
    for ex, _, norms in iter_weights_and_norms(lm, batch, batch_size=2):
        reference = norm_maps_reference(lm, ex.input_ids)
        assert norms.shape == reference.shape
        np.testing.assert_allclose(norms, reference, rtol=0, atol=round_off(reference))
        assert np.all(np.triu(reference, 1) == 0) and reference.max() > 0


def test_grouped_heads_read_their_own_group(decoders):
    """The fast path differs from a reference that gives every query head the first key-value head: the test above
    can fail on a wrong grouping."""
    lm = in_float64(decoders["llama"])
    ex = encode_words(lm.tokenizer, [td.SENTENCE]).examples[0]
    reference = norm_maps_reference(lm, ex.input_ids)
    wrong = dataclasses.replace(lm, model=lm.model)
    wrong.model.config.num_key_value_heads, saved = 1, lm.model.config.num_key_value_heads
    try:
        one_group = norm_maps_reference(wrong, ex.input_ids)  # heads all read group 0 (rows of W_V for group 0)
    finally:
        wrong.model.config.num_key_value_heads = saved
    assert np.abs(one_group - reference).max() > 100 * round_off(reference)


# ------------------------------------------------------------------------------------ sinks


@pytest.mark.parametrize("kind", KINDS)
def test_first_position_share_against_loops(decoders, kind):
    """alpha_1 of a padded batch (two lengths) against loops over layers, heads and queries, for weights and norms."""
    from helpers.core.extract import MapBatch, model_inputs
    from helpers.core.norm_maps import forward_weights_and_norms

    lm = decoders[kind]
    batch = encode_words(lm.tokenizer, [td.SENTENCE, td.SENTENCE[:3]])
    part = batch.examples
    attn, norms = forward_weights_and_norms(lm, part)
    assert model_inputs(lm, part)["input_ids"].shape[1] == len(part[0]) > len(part[1])  # the second is padded
    lengths = torch.tensor([len(ex) for ex in part])
    weights_share = first_position_shares(attn, lengths).numpy()
    norms_share = first_position_shares(norms, lengths, normalise=True).numpy()
    for b, ex in enumerate(part):
        n = len(ex)
        a, m = attn[b, :, :, :n, :n].double().numpy(), norms[b, :, :, :n, :n].double().numpy()
        # tolerance: the means of n shares (values up to 1), in float64
        np.testing.assert_allclose(weights_share[b], first_position_reference(a), rtol=0, atol=round_off(1.0, n, eps=2**-52))
        np.testing.assert_allclose(norms_share[b], first_position_reference(m, normalise=True), rtol=0,
                                   atol=round_off(1.0, n * n, eps=2**-52))
    acc = FirstPositionAccumulator()
    acc.update(MapBatch(part, attn, norms), [()] * len(part))
    result = acc.result()
    assert result["inputs"] == 2
    np.testing.assert_allclose(result["weights"], weights_share.mean(0), rtol=0, atol=round_off(1.0, 2, eps=2**-52))
    assert weights_share.min() > 0 and weights_share.max() <= 1 + round_off(1.0, len(part[0]))


def test_sink_rate_against_a_loop():
    """Sink heads are those strictly above epsilon; the rate counts them over all heads and per layer."""
    share = np.array([[0.1, 0.3, 0.31, 0.9], [0.0, 0.05, 0.299, 0.3000001], [1.0, 1.0, 1.0, 1.0]])
    epsilon = 0.3
    count = sum(1 for row in share for value in row if value > epsilon)
    assert sink_rate(share, epsilon) == count / share.size == 7 / 12
    assert sink_rate_by_layer(share, epsilon).tolist() == [sum(v > epsilon for v in row) / len(row) for row in share]
    assert sink_rate_by_layer(share, epsilon).tolist() == [0.5, 0.25, 1.0]
    assert sink_rate(share, 1.0) == 0.0 and sink_rate(share, 0.0) == 11 / 12


# ------------------------------------------------------------------------------------ bad input


def test_damaged_and_foreign_gguf_files_are_named(decoder_dirs, tmp_path):
    data = decoder_dirs["gguf"].read_bytes()
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(data[: len(data) // 2])
    not_gguf = tmp_path / "text.gguf"
    not_gguf.write_text("not a model\n")
    foreign = tmp_path / "foreign.gguf"
    _write_gguf_of_architecture(foreign, "nonesuch")
    for path, words in ((truncated, "damaged or truncated"), (not_gguf, "not a GGUF file"),
                        (foreign, "'nonesuch', which transformers")):
        for call in (lambda: load_model(str(path)), lambda: check_model(str(path))):
            with pytest.raises(ModelNotAvailableError) as err:
                call()
            message = str(err.value)
            assert path.name in message and words in message and "\n" not in message


def test_a_missing_gguf_is_not_taken_for_a_hub_name(tmp_path):
    with pytest.raises(ModelNotAvailableError, match="no such .gguf file"):
        load_model("nothing-here.gguf")


def _write_gguf_of_architecture(path, architecture: str) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_model_returning_no_attention_is_named(decoders):
    import copy

    model = copy.deepcopy(decoders["gpt2"].model)
    forward = model.forward

    def silent(**kwargs):  # a model whose attention layers return no probabilities
        out = forward(**kwargs)
        out.attentions = None
        return out

    model.forward = silent
    lm = dataclasses.replace(decoders["gpt2"], model=model)
    batch = encode_words(lm.tokenizer, [td.SENTENCE])
    for run in (lambda: list(iter_attention(lm, batch)), lambda: list(iter_weights_and_norms(lm, batch))):
        with pytest.raises(NoAttentionError, match="returned no attention weights"):
            run()


def test_input_longer_than_the_context(decoders):
    lm = decoders["gpt2"]
    with pytest.raises(ValueError, match=f"limit of {td.CONTEXT} positions"):
        encode_words(lm.tokenizer, [td.SENTENCE], max_length=td.CONTEXT + 1, model_max=lm.max_positions)


@pytest.mark.parametrize("kind", KINDS)
def test_a_decoders_random_init_control_keeps_its_embeddings_and_has_an_lm_head(decoder_dirs, decoders, kind):
    """The paper's control for a decoder: the word (and GPT-2's position) embeddings kept, every other weight
    random; the whole causal LM is built, so the §3 gradient test has a language-model head (tied to the kept
    embeddings where the model ties them: GPT-2)."""
    trained = decoders[kind]
    control = load_model(str(decoder_dirs[kind]), random_init=True, seed=1)  # the tiny "trained" model is seed 0's draw
    assert control.causal and control.language_model is not None and control.model is control.language_model.base_model
    want, got = trained.model.state_dict(), control.model.state_dict()
    kept = [n for n in got if any(p in n.split(".") for p in ("wte", "wpe", "embed_tokens"))]
    assert kept and all(torch.equal(got[n], want[n]) for n in kept)
    assert all(not torch.equal(got[n], want[n]) for n in got if n not in kept and got[n].numel() > 1
               and "norm" not in n and "ln_" not in n and "bias" not in n)  # random (norms start at ones, biases at 0)
    head = control.language_model.get_output_embeddings().weight
    embeddings = control.language_model.get_input_embeddings().weight
    assert (head.data_ptr() == embeddings.data_ptr()) == bool(control.model.config.tie_word_embeddings)
    ids = torch.tensor([[1, 5, 6, 7]])
    assert control.language_model(input_ids=ids).logits.shape[-1] == control.model.config.vocab_size

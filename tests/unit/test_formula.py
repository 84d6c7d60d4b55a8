"""The §2 formula recomputed from hooked queries and keys equals the model's own attention, for every
architecture the package knows (tiny random models built from configs, no download)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers.core.formula import recompute_attention
from helpers.core.internals import attention_parts, capture
from helpers.core.models import LoadedModel
from tolerances import in_float64, round_off


def tiny(kind: str, **overrides) -> LoadedModel:
    """A 2-layer, 4-head random model of ``kind``; weights drawn wide (std 0.5) so attention is peaked,
    not near-uniform, and MPNet's relative position bias is far from 0."""
    import transformers

    common = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
                  max_position_embeddings=64, initializer_range=0.5)
    if kind == "distilbert":
        config = transformers.DistilBertConfig(vocab_size=40, dim=16, n_layers=2, n_heads=4, hidden_dim=32,
                                               max_position_embeddings=64, initializer_range=0.5)
    else:
        config = {"bert": transformers.BertConfig, "roberta": transformers.RobertaConfig,
                  "mpnet": transformers.MPNetConfig, "albert": transformers.AlbertConfig}[kind](**{**common, **overrides})
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    tokenizer = SimpleNamespace(pad_token_id=1, model_input_names=["input_ids", "attention_mask"])
    return LoadedModel(model=model, tokenizer=tokenizer, name=f"tiny-{kind}", source="config")


IDS = np.array([0, 5, 9, 12, 7, 30, 5, 2, 17, 3, 2])


def formula_tolerance(lm: LoadedModel, ids: np.ndarray, layer: int) -> float:
    """What two evaluations of ``softmax(q k^T / sqrt(d) + B)`` of ``layer`` may differ by, in ``lm``'s precision.

    Each score is a dot product of d terms: off by at most ``round_off(|q| |k|^T / sqrt(d) + |B|, d)``; scores
    off by delta move a weight p by at most ``2 p delta <= 2 delta``; the softmax's own sum has n terms.
    """
    eps = torch.finfo(next(lm.model.parameters()).dtype).eps
    with torch.inference_mode(), capture(lm, ("query", "key", "position_bias"), layers=[layer]) as seen:
        lm.model(input_ids=torch.as_tensor(ids)[None])
    q, k = seen.heads("query", layer)[0], seen.heads("key", layer)[0]  # [head, token, d]
    scale = q.abs() @ k.abs().transpose(1, 2) / math.sqrt(q.shape[-1])
    if seen.bias(layer) is not None:
        scale = scale + seen.bias(layer).abs()
    return 2 * round_off(scale, q.shape[-1], eps=eps) + round_off(1.0, len(ids), eps=eps)


@pytest.mark.parametrize("kind", ["bert", "roberta", "mpnet", "distilbert"])
def test_recomputed_attention_equals_output_attentions(kind):
    """In a float64 model: the formula is checked to float64 round-off."""
    lm = in_float64(tiny(kind))
    with torch.inference_mode():
        out = lm.model(input_ids=torch.as_tensor(IDS)[None], output_attentions=True)
    for layer in range(lm.n_layers):
        ours = recompute_attention(lm, IDS, layer=layer)
        theirs = out.attentions[layer][0]
        assert ours.shape == (lm.n_heads, len(IDS), len(IDS))
        torch.testing.assert_close(ours, theirs, rtol=0, atol=formula_tolerance(lm, IDS, layer))
        assert float(theirs.max()) > 0.5  # peaked attention: the comparison is not between two uniform maps


def test_mpnet_bias_is_needed():
    """Without the relative position bias the recomputed maps are wrong: the test above can fail."""
    lm = in_float64(tiny("mpnet"))
    with torch.inference_mode():
        out = lm.model(input_ids=torch.as_tensor(IDS)[None], output_attentions=True)
        with capture(lm, ("query", "key"), layers=[1]) as seen:
            lm.model(input_ids=torch.as_tensor(IDS)[None])
    q, k = seen.heads("query", 1)[0], seen.heads("key", 1)[0]
    no_bias = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1)
    assert float((no_bias - out.attentions[1][0]).abs().max()) > 100 * formula_tolerance(lm, IDS, 1)


def test_hooks_are_removed():
    lm = tiny("bert")
    with capture(lm, ("query", "value")):
        pass
    parts = attention_parts(lm.model, 0)
    assert not parts.query._forward_hooks and not parts.value._forward_hooks


def test_unknown_architecture_is_named():
    lm = tiny("albert", embedding_size=16)
    with pytest.raises(NotImplementedError, match="albert"):
        recompute_attention(lm, IDS, layer=0)


def test_layer_out_of_range():
    with pytest.raises(ValueError, match="layer 2"):
        recompute_attention(tiny("bert"), IDS, layer=2)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_a_decoders_recomputed_attention_equals_its_own(kind, tmp_path):
    """A decoder's formula: the causal mask, rotary positions (Llama) and grouped-query attention (the tiny Llama's
    4 query heads share 2 key-value heads), in a float64 model, to float64 round-off (weights widened to std 0.5 so
    the maps are peaked and a wrong rotation or head pairing shows)."""
    import tiny_decoders as td
    from helpers.core.models import load_model

    folder = td.save_gpt2(tmp_path / kind) if kind == "gpt2" else td.save_llama(tmp_path / kind)
    lm = in_float64(load_model(str(folder)))
    torch.manual_seed(1)
    with torch.no_grad():
        for name, w in lm.model.named_parameters():
            if w.dim() == 2 and "emb" not in name and "wte" not in name and "wpe" not in name:
                w.normal_(0, 0.5)
    ids = IDS[IDS < lm.model.config.vocab_size]
    with torch.inference_mode():
        out = lm.model(input_ids=torch.as_tensor(ids)[None], output_attentions=True)
    eps32 = torch.finfo(torch.float32).eps
    for layer in range(lm.n_layers):
        ours = recompute_attention(lm, ids, layer=layer)
        theirs = out.attentions[layer][0]
        assert ours.shape == (lm.n_heads, len(ids), len(ids)) and float(ours.triu(1).abs().max()) == 0.0
        # Llama's eager attention takes its softmax in float32 even in a float64 model: its scores are rounded to
        # float32 (a score s off by eps32 |s| moves a weight p by at most 2 p eps32 |s|; |s| <= |q| |k| / sqrt(d),
        # rotation keeping norms) and the softmax's sum of n terms is float32's; GPT-2's stays in float64
        with torch.inference_mode(), capture(lm, ("query", "key"), layers=[layer]) as seen:
            lm.model(input_ids=torch.as_tensor(ids)[None])
        q, k = seen.heads("query", layer)[0], seen.heads("key", layer)[0]
        largest = float(q.norm(dim=-1).max() * k.norm(dim=-1).max()) / math.sqrt(q.shape[-1])
        atol = (2 * eps32 * largest + round_off(1.0, len(ids), eps=eps32) if kind == "llama"
                else formula_tolerance(lm, ids, layer))
        torch.testing.assert_close(ours, theirs, rtol=0, atol=atol)
        assert float(theirs.max()) > 0.5

"""BERT-style masking, the fitted masked-LM head, gradient importance, and the `surface` command."""
import json

import numpy as np
import pytest

from helpers.cli import main
from helpers.core.encoding import encode_words
from helpers.surface.gradients import gradient_importance
from helpers.surface.mlm import bert_mask, fit_head, mlm_head
from tolerances import EPS64, float64_passes, in_float64, round_off


def _in_float64(lm, head):
    """The model and a fitted head in float64: two float32 backward passes through the model differ by what
    the layers make of their round-off, which no test can bound; two float64 ones by float64 round-off."""
    import copy

    return in_float64(lm), copy.deepcopy(head).double()


def test_bert_mask_rates_and_specials():
    rng = np.random.default_rng(0)
    ids = np.arange(1000) + 10
    special = np.zeros(1000, bool)
    special[[0, 999]] = True
    masked, labels = bert_mask(ids, special, rng, mask_id=4, vocab_size=50)
    chosen = labels != -100
    assert chosen.sum() == round(0.15 * 998) and not chosen[special].any()
    assert np.array_equal(labels[chosen], ids[chosen])
    assert np.array_equal(masked[~chosen], ids[~chosen])
    frac_mask = (masked[chosen] == 4).mean()
    assert 0.7 < frac_mask < 0.9  # 80% become the mask token


def _batch(lm, k=12, lengths=(4, 10), plain=0):
    """``k`` random sentences, then ``plain`` more without "." or ","."""
    rng = np.random.default_rng(1)
    words = ["the", "cat", "sat", "on", "mat", "a", "dog", ".", ","]
    sentences = [list(rng.choice(words, size=rng.integers(*lengths))) for _ in range(k)]
    return encode_words(lm.tokenizer, sentences + [list(rng.choice(words[:-2], size=lengths[0])) for _ in range(plain)])


def test_fitting_lowers_the_head_loss(tiny_lm):
    batch = _batch(tiny_lm, 30)
    _, untrained = fit_head(tiny_lm, batch, batch, seed=0, epochs=0)
    _, trained = fit_head(tiny_lm, batch, batch, seed=0, epochs=30, lr=1e-2)
    assert trained["train_loss"] < untrained["train_loss"] - 0.3
    assert trained["source"] == "fitted on the frozen encoder"


def test_head_is_cached(tiny_lm, tmp_path):
    batch = _batch(tiny_lm)
    _, first = mlm_head(tiny_lm, batch, batch, seed=0, cache_root=tmp_path)
    _, second = mlm_head(tiny_lm, batch, batch, seed=0, cache_root=tmp_path)
    assert "cached" not in first and second["cached"] is True
    assert second["heldout_loss"] == first["heldout_loss"]


def test_head_is_refitted_when_its_code_changes(tiny_lm, tmp_path, monkeypatch):
    """The fitted head's key carries the digest of the fit's code (surface/mlm.py and what it imports; no
    version to bump by hand)."""
    import helpers.surface.mlm as mlm

    batch = _batch(tiny_lm)
    assert mlm_head(tiny_lm, batch, batch, seed=0, cache_root=tmp_path)[1].get("cached") is None
    assert mlm_head(tiny_lm, batch, batch, seed=0, cache_root=tmp_path)[1]["cached"] is True
    monkeypatch.setattr(mlm, "code_digest", lambda target: "changed-code")
    assert mlm_head(tiny_lm, batch, batch, seed=0, cache_root=tmp_path)[1].get("cached") is None  # refitted


def test_gradient_importance_shapes_and_determinism(tiny_lm):
    batch = _batch(tiny_lm)
    lm, head = _in_float64(tiny_lm, fit_head(tiny_lm, batch, batch, seed=0, epochs=1)[0])
    a = gradient_importance(lm, head, batch, seed=3, batch_size=5)
    b = gradient_importance(lm, head, batch, seed=3, batch_size=12)
    for kind in ("sep", "punct", "cls", "other"):
        assert len(a[kind]) == lm.n_layers and np.all(np.isfinite(a[kind]))
        # tolerance: batching does not change per-segment gradients, to float64 round-off (two float64 passes)
        np.testing.assert_allclose(a[kind], b[kind], rtol=0, atol=float64_passes(b[kind]))
    assert min(a["other"]) > 0


def test_gradient_importance_matches_a_one_segment_reference(tiny_lm):
    """Against the plain formulation: one segment at a time, the head over every position, the
    library's mean cross-entropy over masked tokens, and per-key means written out as loops."""
    import torch

    from helpers.surface.mlm import masked_examples
    from helpers.surface.stats import token_masks

    batch = _batch(tiny_lm, 6, lengths=(12, 30), plain=1)  # several masked tokens per segment; one without punctuation
    lm, head = _in_float64(tiny_lm, fit_head(tiny_lm, batch, batch, seed=0, epochs=1)[0])
    got = gradient_importance(lm, head, batch, seed=5, batch_size=4)
    sums = {k: np.zeros(lm.n_layers) for k in ("sep", "punct", "cls", "other")}
    counts = dict.fromkeys(sums, 0)
    rows = {}  # each segment's [layer] per kind, by its index (NaN for a kind it lacks)
    for ex, labels in masked_examples(lm, batch.examples, seed=5):
        with torch.enable_grad():
            out = lm.model(input_ids=torch.from_numpy(ex.input_ids)[None], output_attentions=True)
            loss = torch.nn.functional.cross_entropy(head(out.last_hidden_state[0]), torch.from_numpy(labels))
            grads = torch.autograd.grad(loss, out.attentions)
        original = next(e for e in batch.examples if e.index == ex.index).input_ids
        masks = token_masks(lm.tokenizer, original)
        masks["other"] = ~(masks["sep"] | masks["punct"] | masks["cls"])
        rows[ex.index] = {kind: np.full(lm.n_layers, np.nan) for kind in masks}
        for kind, mask in masks.items():
            if not mask.any():
                continue
            counts[kind] += 1
            for layer, g in enumerate(grads):
                g = g[0].abs().numpy()  # [head, query, key]
                keys = [float(g[:, :, j].mean()) for j in range(len(mask)) if mask[j]]
                sums[kind][layer] += sum(keys) / len(keys)
                rows[ex.index][kind][layer] = sum(keys) / len(keys)
    assert any(np.isnan(r["punct"]).all() for r in rows.values())  # a segment without "." or ",": its row NaN
    for kind in sums:
        want = sums[kind] / max(counts[kind], 1)
        # tolerance: float64 gradients of one segment against those of batches of 4, averaged in another order
        np.testing.assert_allclose(got[kind], want, rtol=0, atol=float64_passes(want))
        each = np.array([rows[i][kind] for i in sorted(rows)])  # [segment, layer], by index
        assert got["per_segment"][kind].shape == each.shape == (len(batch.examples), lm.n_layers)
        # tolerance: as above, one segment's mean
        np.testing.assert_allclose(got["per_segment"][kind], each, rtol=0, atol=float64_passes(np.nan_to_num(each)))
        # the means are those of the segments that have the kind
        np.testing.assert_allclose(np.nanmean(got["per_segment"][kind], axis=0), got[kind], rtol=0,
                                   atol=float64_passes(want))


def test_surface_command_json(tiny_model_dir, fake_data, tmp_path):
    out = tmp_path / "surface.json"
    rc = main(["surface", "--model", str(tiny_model_dir), "--data-dir", str(fake_data), "--segments", "5",
               "--json", str(out), "--quiet", "--cache-dir", str(tmp_path / "c")])
    assert rc == 0
    result = json.loads(out.read_text())
    assert np.asarray(result["per_head"]["sep"]).shape == (2, 4)
    assert set(result["gradients"]) >= {"sep", "punct", "other"} and len(result["gradients"]["sep"]) == 2
    assert result["n_segments"] == 1 and result["claims"]


def test_backward_batch_shrinks_with_model_width_and_depth():
    """16 segments per backward pass for the 6 x 384 default, 4 for a 12 x 768 base-size model: the
    activations a backward pass keeps grow with segments x layers x hidden size."""
    from types import SimpleNamespace

    from helpers.surface.gradients import gradient_batch_size

    def fake(layers, hidden):
        return SimpleNamespace(n_layers=layers, model=SimpleNamespace(config=SimpleNamespace(hidden_size=hidden)))

    assert gradient_batch_size(fake(6, 384)) == 16
    assert gradient_batch_size(fake(12, 768)) == 4
    assert gradient_batch_size(fake(24, 1024)) == 2
    assert gradient_batch_size(fake(48, 4096)) == 1


def test_chunked_mean_loss_equals_one_pass():
    """The fitted head's reported losses, computed a chunk of tokens at a time, equal one cross-entropy
    over every token (chunks that do not divide the count included)."""
    import torch
    from torch import nn

    from helpers.surface.mlm import _mean_loss

    torch.manual_seed(0)
    head = nn.Linear(8, 30).double()  # float64: the chunks' bookkeeping is checked to float64 round-off
    hidden, labels = torch.randn(50, 8, dtype=torch.float64), torch.randint(0, 30, (50,))
    with torch.no_grad():
        want = float(nn.functional.cross_entropy(head(hidden), labels))
        # tolerance: a token's logits are sums of 8 products (at most `scale` in size), its loss a log-sum-exp of
        # 30 logits minus one (off by twice their error, plus its own 30 terms); the mean adds 50 losses
        scale = float((hidden.abs() @ head.weight.abs().T + head.bias.abs()).max())
        tolerance = round_off(scale, 2 * 8 + 30, eps=EPS64) + round_off(want, 50, eps=EPS64)
    for chunk in (7, 50, 1000):
        assert _mean_loss(head, hidden, labels, chunk=chunk) == pytest.approx(want, rel=0, abs=tolerance)


def test_fitted_head_does_not_depend_on_the_thread_count():
    """The masked-LM head of the default model is fitted on FIXED_THREADS threads whatever the caller's count:
    fitted on 1 or on 2 threads, its weights differed in their last digits (and so did the §3 gradient
    ratio, at 1e-9), which made the book's numbers depend on how many pages ran at once."""
    import torch

    from helpers import load_model

    lm = load_model()
    rng = np.random.default_rng(0)
    words = [w for w in lm.tokenizer.vocab if w.isalpha() and len(w) > 2][:3000]
    batch = encode_words(lm.tokenizer, [list(rng.choice(words, size=60)) for _ in range(80)])
    before = torch.get_num_threads()
    fitted = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            head, _ = fit_head(lm, batch, batch, seed=0, epochs=2)
            assert torch.get_num_threads() == threads  # restored
            fitted.append([p.detach().clone() for p in head.parameters()])
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(*fitted))


def test_gradient_pass_runs_on_the_fixed_thread_count(tiny_lm, monkeypatch):
    """The §3 gradient pass runs on FIXED_THREADS threads whatever the caller's count: at full size, on one
    thread its sums differed in the last digits (the gradient ratio by 5e-10), which only shows on the
    1,000 segments, so this checks the thread count the pass sees (and that the caller's is restored)."""
    import torch

    import helpers.surface.gradients as gradients
    from helpers.core.threads import FIXED_THREADS

    seen = []
    inner = gradients._importance
    monkeypatch.setattr(gradients, "_importance", lambda *a, **k: seen.append(torch.get_num_threads()) or inner(*a, **k))
    batch = _batch(tiny_lm)
    head, _ = fit_head(tiny_lm, batch, batch, seed=0, epochs=1)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        gradient_importance(tiny_lm, head, batch, seed=0)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert seen == [FIXED_THREADS]

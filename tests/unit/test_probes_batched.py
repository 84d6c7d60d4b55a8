"""The probes' batched paths (issue 51: one set of kernels per padded batch, the batches held on the device) against
a slow, obvious reference written one sentence, one word and one candidate at a time in float64 from the maps
themselves: logits, loss, gradients and UAS of each probe kind; padding never leaks (a sentence padded beside
longer ones gives what it gives alone)."""
import numpy as np
import pytest
import torch
from torch import nn

from helpers.probe.stats import (
    ProbeData,
    build_probe,
    greedy_uas,
    make_batch,
    predict,
    probe_loss,
    uas,
)
from tolerances import float64_passes
from test_probes import probe_in_float64, synthetic

KINDS = ("attn", "attn+words", "distances+words")


def reference_logits(kind: str, probe: nn.Module, data: ProbeData, s: int, misaligned: bool = False) -> torch.Tensor:
    """Sentence ``s``'s logits ``[m, m + 1]`` (float64), each entry from the paper's formula (module docstring of
    :mod:`helpers.probe.stats`) over the sentence's own maps ``A [layer, head, m + 2, m + 2]`` and word vectors,
    with no padding, no batching and no shared code beyond the probe's parameters."""
    A = torch.from_numpy(data.maps[s].astype(np.float64))
    K = A.shape[0] * A.shape[1]
    A = A.reshape(K, *A.shape[2:])
    m = A.shape[-1] - 2
    v = torch.from_numpy(data.vectors[s].astype(np.float64))
    if misaligned:
        v = torch.cat([v[1:], torch.zeros_like(v[:1])])
    zero = torch.zeros(v.shape[1], dtype=torch.float64)
    rows = []
    for i in range(m):
        row = []
        for c in range(m + 1):
            if c == i + 1:  # never its own head
                row.append(torch.tensor(-1e9, dtype=torch.float64))
                continue
            if kind == "distances+words":
                d = c - (i + 1)  # paper footnote 5: the relative distance over the length, and five offsets and ROOT
                f = torch.tensor([0, 0, 0, 0, 0, 0, 0, 1.0], dtype=torch.float64) if c == 0 else torch.tensor(
                    [max(d, 0) / m, max(-d, 0) / m, d == 0, d == -1, d == 1, d == -2, d == 2, 0], dtype=torch.float64)
                v_c = zero if c == 0 else v[c - 1]
                h = torch.tanh(probe.dep.weight @ v[i] + probe.dep.bias + probe.cand.weight @ v_c + probe.dist.weight @ f)
                row.append(probe.out.weight[0] @ h + probe.out.bias[0])
                continue
            if c == 0:  # ROOT: r_s [CLS] + r_e [SEP], of the maps and of their transposes
                feats = torch.cat([probe.root[0] * A[:, i + 1, 0] + probe.root[1] * A[:, i + 1, m + 1],
                                   probe.root[0] * A[:, 0, i + 1] + probe.root[1] * A[:, m + 1, i + 1]])
            else:
                feats = torch.cat([A[:, i + 1, c], A[:, c, i + 1]])
            if kind == "attn":
                weights = probe.w
            else:
                weights = probe.dep.weight @ v[i] + probe.dep.bias + (0 if c == 0 else probe.cand.weight @ v[c - 1])
            row.append((weights * feats).sum())
        rows.append(torch.stack(row))
    return torch.stack(rows)


def reference_loss(kind: str, probe: nn.Module, data: ProbeData, sentences) -> torch.Tensor:
    """Cross-entropy over candidates summed over each sentence's words, averaged over the sentences."""
    total = torch.zeros((), dtype=torch.float64)
    for s in sentences:
        logp = torch.log_softmax(reference_logits(kind, probe, data, s), dim=-1)
        total = total - sum(logp[i, int(h)] for i, h in enumerate(data.heads[s]))
    return total / len(sentences)


def float64_probe(kind: str, data: ProbeData, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    probe = build_probe(kind, data).double()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in probe.parameters():  # weights of order one: every term matters
            param.normal_(generator=gen)
    return probe


@pytest.mark.parametrize("kind", KINDS)
def test_batched_logits_loss_and_gradients_match_the_per_sentence_reference(kind):
    """One padded batch of sentences of different lengths: every sentence's logits, the batch's loss and every
    parameter's gradient against the reference, both sides in float64 (Distances + words on the padded path,
    the one devices take)."""
    data = synthetic(np.random.default_rng(11), 4)
    sentences = list(range(4))
    assert len({len(data.heads[s]) for s in sentences}) > 1  # padding is exercised
    probe = float64_probe(kind, data)
    if kind == "distances+words":
        probe.per_sentence = False
    probe, batch = probe_in_float64(probe, make_batch(data, sentences))
    logits = probe(batch)
    for b, s in enumerate(sentences):
        m = len(data.heads[s])
        want = reference_logits(kind, probe, data, s).detach()
        # tolerance: float64 on both sides, the same terms summed in other orders (the scale of the logits: the
        # -1e9 of the masked diagonal is excluded, equal on both sides)
        got = logits[b, :m, : m + 1].detach()
        keep = want > -1e8
        torch.testing.assert_close(got[keep], want[keep], rtol=0, atol=float64_passes(want[keep]))
        assert (got[~keep] == -1e9).all() and (logits[b, m:] == -1e9).all() and (logits[b, :, m + 1:] == -1e9).all()
    loss = probe_loss(probe, batch)
    loss.backward()
    grads = [p.grad.clone() for p in probe.parameters()]
    probe.zero_grad()
    want = reference_loss(kind, probe, data, sentences)
    want.backward()
    # tolerance: float64 on both sides; gradients on the scale of the largest (softmax - one-hot sums cancel)
    torch.testing.assert_close(loss.detach(), want.detach(), rtol=0, atol=float64_passes(want.detach()))
    scale = max(float(p.grad.abs().max()) for p in probe.parameters())
    for name, got, p in zip([n for n, _ in probe.named_parameters()], grads, probe.parameters()):
        torch.testing.assert_close(got, p.grad, rtol=0, atol=float64_passes(scale), msg=name)


@pytest.mark.parametrize("kind", KINDS)
def test_padding_never_leaks(kind):
    """Each sentence padded beside the others gives the logits it gives alone, and the batch's loss and gradients
    are the mean of the sentences' own (float64)."""
    data = synthetic(np.random.default_rng(12), 3)
    probe = float64_probe(kind, data, seed=1)
    if kind == "distances+words":
        probe.per_sentence = False
    probe, together = probe_in_float64(probe, make_batch(data, [0, 1, 2]))
    loss = probe_loss(probe, together)
    loss.backward()
    grads = [p.grad.clone() for p in probe.parameters()]
    logits = probe(together).detach()
    alone_loss, alone_grads = 0.0, [torch.zeros_like(g) for g in grads]
    for b in range(3):
        probe.zero_grad()
        alone = probe_in_float64(probe, make_batch(data, [b]))[1]
        m = len(data.heads[b])
        own = probe(alone)[0].detach()
        # tolerance: float64, reductions of other lengths
        torch.testing.assert_close(logits[b, :m, : m + 1], own, rtol=0, atol=float64_passes(own[own > -1e8]))
        single = probe_loss(probe, alone)
        single.backward()
        alone_loss += float(single.detach()) / 3
        alone_grads = [a + p.grad / 3 for a, p in zip(alone_grads, probe.parameters())]
    torch.testing.assert_close(float(loss.detach()), alone_loss, rtol=0, atol=float64_passes(alone_loss))
    scale = max(float(g.abs().max()) for g in alone_grads)
    for got, want in zip(grads, alone_grads):
        torch.testing.assert_close(got, want, rtol=0, atol=float64_passes(scale))


def test_padded_and_per_sentence_distances_agree():
    """Distances + words: the padded path (devices) and the fused per-sentence path (the CPU) give the same
    logits, loss and gradients (float64)."""
    data = synthetic(np.random.default_rng(13), 5)
    probe, batch = probe_in_float64(float64_probe("distances+words", data, seed=2), make_batch(data, list(range(5))))
    out = {}
    for per_sentence in (True, False):
        probe.per_sentence = per_sentence
        probe.zero_grad()
        loss = probe_loss(probe, batch)
        loss.backward()
        out[per_sentence] = (probe(batch).detach(), loss.detach(), [p.grad.clone() for p in probe.parameters()])
    (l1, v1, g1), (l2, v2, g2) = out[True], out[False]
    torch.testing.assert_close(l2, l1, rtol=0, atol=float64_passes(l1[l1 > -1e8]))
    torch.testing.assert_close(v2, v1, rtol=0, atol=float64_passes(v1))
    scale = max(float(g.abs().max()) for g in g1)
    for a, b in zip(g2, g1):
        torch.testing.assert_close(a, b, rtol=0, atol=float64_passes(scale))


@pytest.mark.parametrize("kind", KINDS)
def test_uas_counted_on_the_batches_equals_the_per_sentence_count(kind):
    """:func:`greedy_uas` (counted on the padded logits, on the device) is the number :func:`uas` gives from
    :func:`predict`'s per-sentence logits, punctuation excluded; and the float64 probe's UAS is the reference's."""
    data = synthetic(np.random.default_rng(14), 9)
    data.punct = [np.arange(len(h)) % 3 == 1 for h in data.heads]  # some punctuation, excluded
    torch.manual_seed(3)
    probe = build_probe(kind, data)
    assert greedy_uas(probe, data, batch_size=4) == uas(predict(probe, data, batch_size=4), data)
    probe64 = float64_probe(kind, data, seed=3)
    want = uas([reference_logits(kind, probe64, data, s).detach().numpy() for s in range(len(data))], data)
    got = uas([probe64(probe_in_float64(probe64, make_batch(data, [s]))[1])[0].detach().numpy()
               for s in range(len(data))], data)
    assert got == want

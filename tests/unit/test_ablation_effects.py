"""Removing heads and sink terms (:mod:`helpers.ablation`) against a slow, obvious float64 reference written here.

Definitions: the book's Methods page, book/methods.md, §Removing heads. A head's context ``z^{l,h}`` (before the
output projection) is multiplied by ``xi_{l,h}``; the single-head effect zeroes one head, "all but one" keeps one head
of a layer; the importance is Michel et al.'s ``|dL_s/dxi_{l,h}|`` per segment; the no-op test removes the sink's
term ``alpha_is v_s`` from every row that is not a sink, the redirect test sets the sink columns to 0 and renormalises
(a row that sees only sinks stays as it is).

The reference shares nothing with the fast path but the model's weights: a float64 copy of the model
(:class:`Reference`) runs ONE segment at a time; its attention is a hand-written function put in place of the modeling
module's ``eager_attention_forward`` (MPNet: of its self-attention's ``forward``), which computes each head's softmax
by hand and applies a sink test in its defining form (``z_i - sum_s alpha_is v_s``; the sink columns zeroed and the
row divided by what is left); a head is removed or scaled by a pre-hook of its own on the layer's output projection;
the loss is written out (``logsumexp - logit`` of each target, averaged). The importance's reference is a central
finite difference of that loss in ``xi``.

The models: conftest's tiny BERT (with a seeded random :class:`~helpers.surface.mlm.FittedMLMHead`), the tiny GPT-2
and the tiny Llama with grouped-query attention of :mod:`tiny_decoders`, and a tiny MPNet (the sink tests reach its
weights through another route). Their weights are redrawn at std ``hidden ** -0.5`` (:func:`_redrawn`): at
transformers' 0.02 a head moves these models' loss by 1e-5 to 1e-3, at float32's resolution of the loss; redrawn, by
1e-3 to 1, so a float32 comparison tells a right head from a wrong one.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib
from contextlib import contextmanager

import numpy as np
import pytest
import torch

import tiny_decoders as td
from helpers.ablation import effects
from helpers.ablation.interventions import SinkTest, edit_weights, intervene
from helpers.ablation.loss import IGNORE, prepare, row_losses
from helpers.core.encoding import encode_words
from helpers.core.internals import attention_parts
from helpers.core.models import load_model
from helpers.core.threads import torch_threads
from helpers.surface.mlm import FittedMLMHead
from tolerances import EPS64, round_off

KINDS = ("bert", "gpt2", "llama", "mpnet")
SENTENCES = [["the", "cat", "sat", "on", "the", "mat", "."], ["a", "dog", "sat"],
             ["the", "dog", "is", "big", ",", "the", "cat", "is", "big", "."]]  # three lengths
SINKS = {"bert": ("sep", "cls"), "mpnet": ("sep", "cls"), "gpt2": ("bos",), "llama": ("bos",)}
MODES = ("noop", "redirect")
MODELING = {"bert": "transformers.models.bert.modeling_bert", "gpt2": "transformers.models.gpt2.modeling_gpt2",
            "llama": "transformers.models.llama.modeling_llama"}
STEP = 1e-4  # the finite difference's step in xi (its error is estimated, not assumed: see Case.gradients)


# ---------------------------------------------------------------------------------------------- tolerances


def longest_sum(lm, segments) -> int:
    """Terms of the longest sum inside a layer: a dot product over the hidden size, the MLP's width, or the tokens."""
    config = lm.model.config
    width = getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None) or 4 * config.hidden_size
    return max(int(config.hidden_size), int(width), max(len(e) for e in segments.examples))


def loss_tolerance(case) -> float:

    """Absolute tolerance of a float32 segment loss against the float64 reference.

    Each float32 sum of ``n`` terms is off by at most ``n * eps / 2`` of its terms' magnitudes (tests/tolerances.py);
    a layer's longest sum has :func:`longest_sum` terms, and the round-off passes through ``n_layers`` layers and the
    output head (``depth``), each adding its own, the layers' amplification taken as 1 each. The logits are then off by
    ``terms * depth * eps`` of their size (``case.logit_scale``, the largest ``|logit|`` of the reference's passes),
    and the loss, ``logsumexp - logit``, by twice that (``round_off`` with ``SAFETY`` = 2), plus the vocabulary-sized
    sum inside the ``logsumexp``: ``vocab * eps / 2`` relative, absolute after the log (``round_off(1, vocab)``).
    For these models that is 130 to 620 ulps of the loss (6e-5 to 3e-4): below the effects compared (one head moves a
    segment's loss by 1e-3 to 1.5), far above float32's own error on them (a few ulps of the loss)."""
    depth = case.lm.n_layers + 1
    return round_off(case.logit_scale, longest_sum(case.lm, case.segments) * depth) + round_off(1.0, case.vocab)


def gradient_tolerance(case, n: int) -> float:
    """Absolute tolerance of segment ``n``'s float32 ``|dL/dxi|`` against the float64 finite difference.

    The backward pass retraces the forward (twice the depth of :func:`loss_tolerance`) and its longest sum is the
    vocabulary-sized one (the logits' gradient, ``softmax - onehot``, back to the hidden state); a head's gradient is a
    sum over tokens and dimensions whose terms have the size of the segment's largest head gradient (a gradient near 0
    is their cancellation), so ``round_off(max |g|, terms * 2 * depth)``. The finite difference adds its own error:
    :attr:`Case.gradients` ``["error"]``."""
    depth = case.lm.n_layers + 1
    terms = max(longest_sum(case.lm, case.segments), case.vocab)
    g = case.gradients()
    return round_off(np.abs(g["g"][n]).max(), terms * 2 * depth) + float(g["error"][n].max())


# ----------------------------------------------------------------------------------------------- the models


def _redrawn(lm, seed: int = 0):
    """``lm`` with every weight matrix (embeddings, projections, its LM head) redrawn from N(0, 1 / hidden), seeded;
    norms and biases as they were. The model is a copy: conftest's session model is not touched."""
    owner = copy.deepcopy(lm.language_model if lm.causal else lm.model)
    generator = torch.Generator().manual_seed(seed)
    std = int(owner.config.hidden_size) ** -0.5
    with torch.no_grad():
        for p in owner.parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=generator) * std)
    model = owner.base_model if lm.causal else owner
    return dataclasses.replace(lm, model=model, language_model=owner if lm.causal else None, _fingerprint=None)


def _tiny_mpnet(directory):
    """A 2-layer, 4-head random MPNet (relative position bias in its scores; attention not through transformers'
    attention interface: the sink tests edit its weights on their way through its dropout)."""
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizerFast

    vocab = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", ".", ",", "the", "a", "cat", "dog", "sat", "on", "mat", "is",
             "big"]
    MPNetTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True,
                       unk_token="<unk>").save_pretrained(directory)
    config = MPNetConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=32, max_position_embeddings=66)
    torch.manual_seed(0)
    MPNetModel(config).save_pretrained(directory)
    return directory


def _seeded_head(lm, seed: int = 0):
    """A random masked-LM head on ``lm``'s input embeddings (an encoder here has none of its own)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        head = FittedMLMHead(lm.model.get_input_embeddings().weight.detach())
        with torch.no_grad():
            head.bias.normal_(0.0, 0.5)
    return head.eval()


@dataclasses.dataclass
class Case:
    """One model: ``lm`` (float32, as the package runs it), its masked-LM ``head`` (an encoder's), ``segments``
    (:data:`SENTENCES` through :func:`helpers.ablation.loss.prepare`, seed 0) and its :class:`Reference`."""

    kind: str
    lm: object
    head: object
    segments: object
    ref: "Reference"

    def __post_init__(self):
        self._gradients = None
        self.vocab = int(self.lm.model.config.vocab_size)
        self.base()
        self.logit_scale = self.ref.largest_logit  # of the full model's passes: the scale of loss_tolerance

    def base(self) -> np.ndarray:
        return np.array([self.ref.loss(n) for n in range(len(self.segments))])

    def gradients(self) -> dict:
        """The central finite difference of each segment's loss in each ``xi_{l,h}`` at 1, float64: ``"g"``
        ``[segment, layer, head]``, and ``"error"``, a bound on its error: a central difference with step ``e`` is
        ``g + c e^2 + O(e^4)``, so the steps ``STEP`` and ``2 STEP`` differ by ``3 c STEP^2``, three times the smaller
        step's truncation error (their difference bounds it), plus the float64 round-off of two losses over ``STEP``."""
        if self._gradients is None:
            L, H, S = self.lm.n_layers, self.lm.n_heads, len(self.segments)
            fd = np.zeros((2, S, L, H))
            for k, step in enumerate((STEP, 2 * STEP)):
                for n in range(S):
                    for layer in range(L):
                        for head in range(H):
                            up = self.ref.loss(n, scale={(layer, head): 1 + step})
                            down = self.ref.loss(n, scale={(layer, head): 1 - step})
                            fd[k, n, layer, head] = (up - down) / (2 * step)
            roundoff = round_off(self.base()[:, None, None] / STEP, 2, eps=EPS64)
            self._gradients = {"g": fd[0], "error": np.abs(fd[0] - fd[1]) + roundoff}
        return self._gradients


# ------------------------------------------------------------------------------------------- the reference


@contextmanager
def _replaced(owner, name: str, value):
    before = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, before)


def _rms_norm64(norm, hidden):
    """Llama's RMSNorm in the input's dtype (transformers' computes it in float32 even for a float64 model)."""
    return norm.weight * hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)


class Reference:
    """A float64 copy of ``lm`` (and of an encoder's ``head``) scoring one segment at a time: its attention by hand
    (:meth:`attend`), heads scaled by hooks of its own, the loss written out (:meth:`loss`)."""


    def __init__(self, lm, head, segments):
        self.causal, self.kind, self.segments = lm.causal, lm.model.config.model_type, segments
        if lm.causal:
            full = copy.deepcopy(lm.language_model).double().eval()
            self.model, self.scores = full.base_model, full.get_output_embeddings()
        else:
            self.model, self.scores = copy.deepcopy(lm.model).double().eval(), copy.deepcopy(head).double().eval()
        for module in self.model.modules():
            if type(module).__name__.endswith("RMSNorm"):
                module.forward = lambda hidden, norm=module: _rms_norm64(norm, hidden)
        self.n_layers = int(self.model.config.num_hidden_layers)
        self.n_heads = int(self.model.config.num_attention_heads)
        self.tokenizer = lm.tokenizer
        self.memo: dict = {}
        self.largest_logit = 0.0  # the largest |logit| of the passes so far
        self.positions: dict[str, list[set[int]]] = {}  # sink kinds given by position (the matched control's)

    def sinks(self, n: int, kind: str) -> set[int]:
        """Sink positions of segment ``n``, read off its (unmasked) tokens: a decoder's first, an encoder's
        ``[SEP]``/``[CLS]`` (``</s>``/``<s>`` for MPNet)."""
        tokens = self.segments.tokens[n]
        if kind in self.positions:
            return self.positions[kind][n]
        if kind == "bos":
            assert tokens[0] == self.tokenizer.bos_token
            return {0}
        wanted = {"sep": self.tokenizer.sep_token, "cls": self.tokenizer.cls_token}[kind]
        return {i for i, t in enumerate(tokens) if t == wanted}

    def targets(self, n: int) -> list[tuple[int, int]]:
        """``(position, token)`` pairs scored: a decoder's next token at positions 0..n-2; an encoder's masked ones."""
        ids = self.segments.examples[n].input_ids
        if self.causal:
            return [(t, int(ids[t + 1])) for t in range(len(ids) - 1)]
        return [(t, int(y)) for t, y in enumerate(self.segments.labels[n]) if y != IGNORE]

    def loss(self, n: int, *, scale: dict | None = None, sink: tuple | None = None, fill: dict | None = None) -> float:
        """Segment ``n``'s loss with each head ``(layer, head)`` of ``scale`` multiplied by its factor, each head of
        ``fill`` given that context vector at every position instead of its own (``{(layer, head): [d]}``: mean
        ablation) and the sink test ``sink = (sink kind, heads {(layer, head)}, mode)`` applied."""
        key = (n, tuple(sorted((scale or {}).items())),
               None if sink is None else (sink[0], tuple(sorted(sink[1])), sink[2]),
               tuple(sorted((k, tuple(np.asarray(v).tolist())) for k, v in (fill or {}).items())))
        if key not in self.memo:
            self.memo[key] = self._loss(n, scale or {}, sink, fill or {})
        return self.memo[key]

    def _loss(self, n, scale, sink, fill) -> float:
        ids = torch.from_numpy(self.segments.examples[n].input_ids)[None]
        edit = None if sink is None else (self.sinks(n, sink[0]), set(sink[1]), sink[2])
        calls: list[int] = []
        handles = [attention_parts(self.model, layer).output.register_forward_pre_hook(self._scaling(head, factor))
                   for (layer, head), factor in scale.items()]
        handles += [attention_parts(self.model, layer).output.register_forward_pre_hook(self._filling(head, vector))
                    for (layer, head), vector in fill.items()]
        try:
            with torch.no_grad(), self._hand_attention(edit, calls):
                hidden = self.model(input_ids=ids).last_hidden_state[0]          # [token, hidden]
                logits = self.scores(hidden)                                     # [token, vocab]
        finally:
            for h in handles:
                h.remove()
        assert sorted(calls) == list(range(self.n_layers)), f"the hand attention ran for layers {calls}"
        total, targets = 0.0, self.targets(n)
        for t, y in targets:
            row = logits[t]
            top = row.max()
            total += float(top + torch.log(torch.exp(row - top).sum()) - row[y])
            self.largest_logit = max(self.largest_logit, float(row.abs().max()))
        return total / len(targets)

    def mean_context(self) -> np.ndarray:
        """``[layer, head, d]`` float64: each head's context vector averaged over every token of every segment (the
        full model; a hook of its own on each output projection, one segment at a time)."""
        sums: dict[int, np.ndarray] = {}
        count = 0
        for n in range(len(self.segments)):
            ids = torch.from_numpy(self.segments.examples[n].input_ids)[None]
            seen: dict[int, torch.Tensor] = {}
            handles = [attention_parts(self.model, layer).output.register_forward_pre_hook(
                lambda _m, args, layer=layer: seen.__setitem__(layer, args[0][0].clone()))
                for layer in range(self.n_layers)]
            try:
                with torch.no_grad(), self._hand_attention(None, []):
                    self.model(input_ids=ids)
            finally:
                for h in handles:
                    h.remove()
            for layer, z in seen.items():                       # [token, head * d]
                total = np.zeros(z.shape[-1])
                for t in range(z.shape[0]):
                    total += z[t].numpy()
                sums[layer] = sums.get(layer, 0) + total
            count += ids.shape[1]
        return np.stack([sums[layer].reshape(self.n_heads, -1) / count for layer in range(self.n_layers)])

    def _filling(self, head: int, vector):
        def hook(_module, args):
            z = args[0].clone()                                                  # [batch, token, head * d]
            d = z.shape[-1] // self.n_heads
            z[..., head * d:(head + 1) * d] = torch.as_tensor(np.asarray(vector), dtype=z.dtype)
            return (z, *args[1:])
        return hook

    def _scaling(self, head: int, factor: float):
        def hook(_module, args):
            z = args[0].clone()                                                  # [batch, token, head * d]
            d = z.shape[-1] // self.n_heads
            z[..., head * d:(head + 1) * d] *= factor
            return (z, *args[1:])
        return hook

    @contextmanager
    def _hand_attention(self, edit, calls):
        """Every layer's attention computed by :meth:`attend` (transformers' ``eager_attention_forward`` replaced in
        the modeling module; MPNet's self-attention ``forward`` replaced on each layer)."""
        if self.kind == "mpnet":
            layers = [self.model.encoder.layer[i].attention.attn for i in range(self.n_layers)]
            for i, attn in enumerate(layers):
                attn.forward = self._mpnet_forward(attn, i, edit, calls)
            try:
                yield
            finally:
                for attn in layers:
                    del attn.forward
            return

        def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
            assert not module.training and module.layer_idx is not None
            calls.append(module.layer_idx)
            return self.attend(module.layer_idx, query, key, value, attention_mask, scaling, None, edit)

        with _replaced(importlib.import_module(MODELING[self.kind]), "eager_attention_forward", attention):
            yield

    def _mpnet_forward(self, attn, layer, edit, calls):
        def forward(hidden_states, attention_mask=None, position_bias=None, output_attentions=False, **kwargs):
            calls.append(layer)
            split = lambda x: x.view(*x.shape[:-1], self.n_heads, -1).transpose(1, 2)  # noqa: E731
            q, k, v = split(attn.q(hidden_states)), split(attn.k(hidden_states)), split(attn.v(hidden_states))
            out, weights = self.attend(layer, q, k, v, attention_mask, None, position_bias, edit)
            o = attn.o(out.reshape(*out.shape[:2], -1))
            return (o, weights) if output_attentions else (o,)
        return forward

    def attend(self, layer, query, key, value, attention_mask, scaling, bias, edit):
        """``(output [batch, token, head, d], weights [batch, head, query, key])`` of one layer: for each head, the
        softmax of ``q k / sqrt(d)`` (+ ``bias``) over the keys a row sees (all; a decoder's: itself and before),
        then the sink test ``edit = (sinks, heads, mode)`` on the heads it names, row by row."""
        batch, n_heads, n, d = query.shape
        group = n_heads // key.shape[1]                          # grouped-query attention: head h reads h // group
        scaling = d ** -0.5 if scaling is None else scaling
        seen = torch.tensor([[j <= i or not self.causal for j in range(n)] for i in range(n)])  # [query, key]
        if attention_mask is not None:                           # one unpadded segment: the mask hides the future only
            assert torch.equal(attention_mask[:, 0].expand(batch, n, n) == 0, seen.expand(batch, n, n))
        sinks, heads, mode = edit or (set(), set(), None)
        is_sink = torch.tensor([j in sinks for j in range(n)])
        out = torch.zeros(batch, n, n_heads, d, dtype=query.dtype)
        weights = torch.zeros(batch, n_heads, n, n, dtype=query.dtype)
        for b in range(batch):
            for h in range(n_heads):
                k, v = key[b, h // group], value[b, h // group]
                s = query[b, h] @ k.T * scaling + (0.0 if bias is None else bias[b, h])
                s = s.masked_fill(~seen, -torch.inf)
                e = torch.exp(s - s.amax(-1, keepdim=True))
                alpha = e / e.sum(-1, keepdim=True)
                z = alpha @ v                                    # [query, d]
                if (layer, h) in heads:
                    for i in range(n):
                        if mode == "noop" and i not in sinks:    # z_i - sum_{s in S} alpha_is v_s
                            for j in sinks:
                                z[i] = z[i] - alpha[i, j] * v[j]
                        if mode == "redirect" and bool((seen[i] & ~is_sink).any()):  # a row that sees a non-sink
                            alpha[i] = alpha[i].masked_fill(is_sink, 0.0)
                            alpha[i] = alpha[i] / alpha[i].sum()
                            z[i] = alpha[i] @ v
                out[b, :, h] = z
                weights[b, h] = alpha
        return out, weights


# ------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Everything here on one thread, the passes of the functions under test too (their ``FIXED_THREADS``, 2, set to
    1 for this module): these models' operations are tiny, and on two threads, which wait on each other at each of
    them (helpers.core.threads), the file takes three times as long on a machine whose cores are busy. The count
    changes only the order of float sums, which the tolerances cover."""
    with pytest.MonkeyPatch.context() as patch, torch_threads(1):
        patch.setattr(effects, "FIXED_THREADS", 1)
        yield


@pytest.fixture(scope="module")
def cases(tiny_lm, tmp_path_factory):
    """``cases(kind)``: the :class:`Case` of ``kind``, built once per module on first use."""
    made: dict[str, Case] = {}

    def case(kind: str) -> Case:
        if kind not in made:
            if kind == "bert":
                lm = tiny_lm
            elif kind == "mpnet":
                lm = load_model(str(_tiny_mpnet(tmp_path_factory.mktemp("ablation-mpnet"))))
            else:
                save = {"gpt2": td.save_gpt2, "llama": td.save_llama}[kind]
                lm = load_model(str(save(tmp_path_factory.mktemp(f"ablation-{kind}"))))
            lm = _redrawn(lm)
            head = None if lm.causal else _seeded_head(lm)
            segments = prepare(lm, encode_words(lm.tokenizer, SENTENCES), head=head, seed=0)
            made[kind] = Case(kind, lm, head, segments, Reference(lm, head, segments))
        return made[kind]

    return case


@pytest.fixture(params=KINDS)
def case(request, cases) -> Case:
    return cases(request.param)


def _single(case, layer_heads) -> np.ndarray:
    """``[segment]``: the reference with ``xi = 0`` for every ``(layer, head)`` of ``layer_heads``."""
    return np.array([case.ref.loss(n, scale={lh: 0.0 for lh in layer_heads}) for n in range(len(case.segments))])


# -------------------------------------------------------------------------------------------- losses and D


def test_base_loss_is_the_hand_computed_loss(case):
    """Every head present: the float32 loss per segment is the reference's (also what ``importance`` returns)."""
    got = effects.base_losses(case.lm, case.segments)
    np.testing.assert_allclose(got, case.base(), rtol=0, atol=loss_tolerance(case))
    _, losses = effects.importance(case.lm, case.segments)
    np.testing.assert_allclose(losses, case.base(), rtol=0, atol=loss_tolerance(case))


def test_encoder_masking_is_drawn_once_and_scores_the_original_tokens(cases):
    """An encoder's labels are the original tokens at the masked positions (at least one per segment), the input
    differs from the original only there, and the same seed draws the same masking."""
    case = cases("bert")
    tokenizer = case.lm.tokenizer
    for n, ex in enumerate(case.segments.examples):
        original = np.array(tokenizer.convert_tokens_to_ids(case.segments.tokens[n]))
        scored = case.segments.labels[n] != IGNORE
        assert scored.any()
        assert np.array_equal(case.segments.labels[n][scored], original[scored])
        assert np.array_equal(ex.input_ids[~scored], original[~scored])
    again = prepare(case.lm, encode_words(tokenizer, SENTENCES), head=case.head, seed=0)
    assert all(np.array_equal(a.input_ids, b.input_ids) for a, b in zip(again.examples, case.segments.examples))


def test_single_head_losses_zero_that_head_alone(case):
    """``single_head_losses`` ``[layer, head, segment]`` against the reference with that head's context zeroed; D (the
    mean difference from the full model) follows, within two losses' tolerance."""
    L, H = case.lm.n_layers, case.lm.n_heads
    got = effects.single_head_losses(case.lm, case.segments)
    want = np.array([[_single(case, [(layer, head)]) for head in range(H)] for layer in range(L)])
    tol = loss_tolerance(case)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)
    base = case.base()
    np.testing.assert_allclose((got - effects.base_losses(case.lm, case.segments)).mean(-1),
                               (want - base).mean(-1), rtol=0, atol=2 * tol)
    assert np.abs(want - base).max() > 100 * tol  # the heads matter far beyond the tolerance (see _redrawn)


def test_only_masks_keep_one_head_of_its_layer(case):
    """"All but one": ``per_layer`` of ``only_masks`` ``[layer, head, segment]`` against the reference with every
    OTHER head of that layer zeroed (the other layers intact)."""
    L, H = case.lm.n_layers, case.lm.n_heads
    got = effects.per_layer(case.lm, case.segments, effects.only_masks(L, H))
    want = np.array([[_single(case, [(layer, other) for other in range(H) if other != head]) for head in range(H)]
                     for layer in range(L)])
    np.testing.assert_allclose(got, want, rtol=0, atol=loss_tolerance(case))


# ----------------------------------------------------------------------------------------------- importance


def test_importance_is_the_per_segment_finite_difference(case):
    """``importance`` ``[segment, layer, head]``: each segment's own ``|dL_s/dxi|``, against the float64 central
    finite difference of the reference's loss."""
    got, _ = effects.importance(case.lm, case.segments)
    g = case.gradients()["g"]
    for n in range(len(case.segments)):
        np.testing.assert_allclose(got[n], np.abs(g[n]), rtol=0, atol=gradient_tolerance(case, n),
                                   err_msg=f"segment {n}")


def _per_batch_importance(lm, segments) -> np.ndarray:
    """A planted defect: one ``xi`` shared by the batch's rows (a per-batch leaf, as transformers' bertology port has
    it), so the gradient is the batch's summed one and its absolute value is taken after the sum: ``|sum_s g_s| / S``
    ``[layer, head]``."""
    leaf = torch.ones(lm.n_layers, lm.n_heads, requires_grad=True)
    rows = list(range(len(segments)))
    with torch.enable_grad(), intervene(lm, xi=leaf.expand(len(rows), -1, -1)):
        (g,) = torch.autograd.grad(row_losses(lm, segments, rows).sum(), leaf)
    return g.abs().double().numpy() / len(rows)


def _assert_importance(mean_importance: np.ndarray, case) -> None:
    """The check on the mean importance ``[layer, head]`` (what ``head_effects`` reports): the mean over segments of
    the reference's ``|g_s|``, within the largest segment's tolerance (a mean of values within it stays within it)."""
    g = case.gradients()["g"]
    tol = max(gradient_tolerance(case, n) for n in range(len(case.segments)))
    np.testing.assert_allclose(mean_importance, np.abs(g).mean(0), rtol=0, atol=tol)


def test_importance_check_catches_a_per_batch_absolute_value(case):
    """Where segments' gradients have mixed signs, ``|sum g| / S`` (and the port's running ``|g_1| + |g_1 + g_2| +
    ...``) is not the mean of ``|g_s|``: the check of the module's importance passes, and fails on both defects."""
    g = case.gradients()["g"]
    tol = max(gradient_tolerance(case, n) for n in range(len(case.segments)))
    # [layer, head]: the segments' positive and negative parts each beyond S * tol, so sum |g_s| - |sum g_s| (twice
    # the smaller part) exceeds 2 S tol, and |sum g| / S misses the mean of |g_s| by more than the check allows
    positive, negative = np.clip(g, 0, None).sum(0), np.clip(-g, 0, None).sum(0)
    mixed = np.minimum(positive, negative) > len(g) * tol
    assert mixed.any(), "no head with mixed-sign gradients: the check could not tell the defect apart"
    got, _ = effects.importance(case.lm, case.segments)
    _assert_importance(got.mean(0), case)
    with pytest.raises(AssertionError):
        _assert_importance(_per_batch_importance(case.lm, case.segments), case)
    running = np.abs(np.cumsum(g, axis=0)).sum(0) / len(g)         # the port: head_mask.grad never zeroed
    with pytest.raises(AssertionError):
        _assert_importance(running, case)


# ---------------------------------------------------------------------------------------------- sink tests


@pytest.mark.parametrize("mode", MODES)
def test_sink_losses_against_the_hand_edited_attention(case, mode):
    """The sink tests per head (``per_layer`` of ``sink_masks``) ``[layer, head, segment]`` and with every head at once
    (``every_head_sink_losses``) ``[segment]``, for each sink kind, against the reference whose attention applies the
    test in its defining form."""
    L, H, S = case.lm.n_layers, case.lm.n_heads, len(case.segments)
    every = {(layer, head) for layer in range(L) for head in range(H)}
    tol = loss_tolerance(case)
    for kind in SINKS[case.kind]:
        for n in range(S):  # the module's sink positions are the reference's
            assert set(np.flatnonzero(case.segments.sinks[kind][n])) == case.ref.sinks(n, kind)
        per_head = effects.per_layer(case.lm, case.segments, effects.sink_masks(L, H), sink=kind, mode=mode)
        at_once = effects.every_head_sink_losses(case.lm, case.segments, kind, mode)
        want = np.array([[[case.ref.loss(n, sink=(kind, {(layer, head)}, mode)) for n in range(S)] for head in range(H)]
                         for layer in range(L)])
        np.testing.assert_allclose(per_head, want, rtol=0, atol=tol, err_msg=f"{kind}, one head at a time")
        want_all = np.array([case.ref.loss(n, sink=(kind, every, mode)) for n in range(S)])
        np.testing.assert_allclose(at_once, want_all, rtol=0, atol=tol, err_msg=f"{kind}, every head")
        assert np.abs(want_all - case.base()).max() > 10 * tol  # the test moves the loss: the comparison can fail


def _value_hooks(model, positions: list[int]):
    """Forward hooks that zero every layer's value vectors at ``positions`` (GPT-2: the value third of ``c_attn``)."""
    def hook_for(parts):
        def hook(_module, _args, output):
            out = output.clone()
            columns = slice(2 * out.shape[-1] // 3, None) if parts.fused else slice(None)
            out[:, positions, columns] = 0.0
            return out
        return hook

    handles = []
    for layer in range(int(model.config.num_hidden_layers)):
        parts = attention_parts(model, layer)
        handles.append(parts.value.register_forward_hook(hook_for(parts)))
    return handles


def test_noop_moves_nothing_where_the_sink_values_are_zero(case):
    """With every layer's value vector zeroed at the sink (a hook on the value projection), the no-op test on every
    head removes terms ``alpha_is v_s = 0``: the loss stays where it was. Without the hook it moves (the same test
    is not vacuous)."""
    lm, L, H = case.lm, case.lm.n_layers, case.lm.n_heads
    kind = SINKS[case.kind][0]
    tol = loss_tolerance(case)
    for n in range(len(case.segments)):
        sinks = torch.from_numpy(case.segments.sinks[kind][n])[None]
        test = SinkTest(sinks, torch.ones(1, L, H, dtype=bool), "noop")
        handles = _value_hooks(lm.model, [int(p) for p in np.flatnonzero(case.segments.sinks[kind][n])])
        try:
            with torch.no_grad():
                plain = float(row_losses(lm, case.segments, [n]))
                with intervene(lm, sink=test):
                    noop = float(row_losses(lm, case.segments, [n]))
        finally:
            for h in handles:
                h.remove()
        assert abs(noop - plain) <= tol, (n, noop, plain)
        with torch.no_grad(), intervene(lm, sink=test):
            moved = float(row_losses(lm, case.segments, [n]))
        assert abs(moved - case.base()[n]) > 10 * tol


def _edited_by_hand(weights, sinks, heads, mode):
    """:func:`edit_weights` as a loop: ``weights`` ``[batch, head, query, key]``, ``sinks`` ``[batch, key]``, ``heads``
    ``[batch, head]``. A row "sees" the keys where its weight is not 0."""
    out = weights.clone()
    batch, n_heads, n_query, n_key = weights.shape
    for b in range(batch):
        S = {j for j in range(n_key) if sinks[b, j]}
        for h in range(n_heads):
            if not heads[b, h]:
                continue
            for i in range(n_query):
                row = [float(w) for w in weights[b, h, i]]
                if mode == "noop":
                    if i not in S:
                        for j in S:
                            out[b, h, i, j] = 0.0
                elif not {j for j in range(n_key) if row[j] != 0} <= S:
                    rest = sum(row[j] for j in range(n_key) if j not in S)
                    for j in range(n_key):
                        out[b, h, i, j] = 0.0 if j in S else row[j] / rest
    return out


def test_edit_weights_against_a_loop():
    """Constructed weights: row 0 a causal (decoder) batch whose first row sees only the BOS sink, row 1 an encoder's
    with sinks [CLS] and [SEP] and one row whose weight lies on the sinks alone; some heads selected."""
    generator = torch.Generator().manual_seed(0)
    n = 6
    raw = torch.rand(2, 3, n, n, generator=generator, dtype=torch.float64) + 0.1
    raw[0] = raw[0].tril()                                       # causal: row i sees keys 0..i
    raw[1, 2, 3] = torch.tensor([0.4, 0, 0, 0, 0, 0.6], dtype=torch.float64)  # a row on the sinks only
    weights = raw / raw.sum(-1, keepdim=True)
    sinks = torch.zeros(2, n, dtype=bool)
    sinks[0, 0] = True
    sinks[1, [0, n - 1]] = True
    heads = torch.tensor([[True, False, True], [True, True, True]])
    for mode in MODES:
        got = edit_weights(weights, sinks, heads, mode)
        want = _edited_by_hand(weights, sinks, heads, mode)
        # tolerance: the loop and the fast path add a row's n terms in other orders, one division each (float64)
        torch.testing.assert_close(got, want, rtol=0, atol=round_off(1.0, n, eps=EPS64))
        assert torch.equal(got[0, 1], weights[0, 1])                           # an unselected head, untouched
        assert torch.equal(got[0, :, 0], weights[0, :, 0])                     # the BOS row, as it was
        # a row whose weight lies on the sinks alone: redirect leaves it, no-op empties it (only sink terms to remove)
        emptied = torch.zeros(n, dtype=weights.dtype)
        assert torch.equal(got[1, 2, 3], weights[1, 2, 3] if mode == "redirect" else emptied)

    redirected = edit_weights(weights, sinks, heads, "redirect")
    rows = redirected[0, heads[0]][:, 1:]                          # the decoder's other rows: no weight on BOS, sum 1
    assert torch.all(rows[..., 0] == 0)
    torch.testing.assert_close(rows.sum(-1), torch.ones_like(rows.sum(-1)), rtol=0, atol=round_off(1.0, n, eps=EPS64))


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_redirect_leaves_the_bos_row_of_a_decoder(cases, kind):
    """In the model: under the redirect test on every head, each layer's first row of weights is the original's
    (BOS sees only itself), the other rows put nothing on BOS and sum to 1, and BOS's own hidden state is unchanged."""
    case = cases(kind)
    lm, L, H = case.lm, case.lm.n_layers, case.lm.n_heads
    ex = case.segments.examples[0]
    ids = torch.from_numpy(ex.input_ids)[None]
    test = SinkTest(torch.from_numpy(case.segments.sinks["bos"][0])[None], torch.ones(1, L, H, dtype=bool), "redirect")
    with torch.no_grad():
        before = lm.model(input_ids=ids, output_attentions=True)
        with intervene(lm, sink=test):
            after = lm.model(input_ids=ids, output_attentions=True)
    for layer in range(L):
        a, b = before.attentions[layer][0], after.attentions[layer][0]   # [head, query, key]
        assert torch.equal(b[:, 0], a[:, 0])
        assert torch.all(b[:, 1:, 0] == 0)
        torch.testing.assert_close(b.sum(-1), torch.ones_like(b.sum(-1)), rtol=0, atol=round_off(1.0, len(ex)))
    # tolerance: BOS's row attends to BOS alone in both passes, one float32 product of len(ex) terms per layer
    torch.testing.assert_close(after.last_hidden_state[0, 0], before.last_hidden_state[0, 0], rtol=0,
                               atol=round_off(before.last_hidden_state[0, 0], len(ex) * L))


# ------------------------------------------------------------------------------ batched equals one at a time


def _recording(monkeypatch):
    """Record the rows of each forward pass ``intervention_losses`` makes (``row_losses`` wrapped)."""
    passes: list[list[int]] = []

    def recorded(lm, segments, rows, **kw):
        passes.append(list(rows))
        return row_losses(lm, segments, rows, **kw)

    monkeypatch.setattr(effects, "row_losses", recorded)
    return passes


def _one_at_a_time(case, xi, heads, kind, mode) -> np.ndarray:
    """``[K, segment]``: each (mask, segment) alone through ``intervene`` and the whole model (with ``mode``, the sink
    test of ``heads`` on the sink ``kind``)."""
    want = np.empty((xi.shape[0], len(case.segments)))
    with torch.no_grad():
        for k in range(xi.shape[0]):
            for n in range(len(case.segments)):
                test = (SinkTest(torch.from_numpy(case.segments.sinks[kind][n])[None], heads[k:k + 1], mode)
                        if mode else None)
                with intervene(case.lm, xi=xi[k:k + 1], sink=test):
                    want[k, n] = float(row_losses(case.lm, case.segments, [n]))
    return want


@pytest.mark.parametrize("mode", [None, *MODES])
def test_batched_equals_one_at_a_time(case, mode, monkeypatch):
    """``intervention_losses`` over K masks (fractional too) and, with ``mode``, K random sink-head sets, on segments
    of three lengths in passes that mix them (padding), equals each (mask, segment) run alone through ``intervene``."""
    lm, L, H, K = case.lm, case.lm.n_layers, case.lm.n_heads, 3
    generator = torch.Generator().manual_seed(1)
    xi = torch.tensor([0.0, 0.5, 1.0])[torch.randint(0, 3, (K, L, H), generator=generator)]
    heads = torch.rand(K, L, H, generator=generator) < 0.5 if mode else None
    kind = SINKS[case.kind][0]
    longest = max(len(e) for e in case.segments.examples)
    budget = 5 * longest * L * int(lm.model.config.hidden_size)  # 5 rows of the longest segment a pass: K = 3 copies and more
    passes = _recording(monkeypatch)
    got = effects.intervention_losses(lm, case.segments, xi, sink_heads=heads, sink=kind if mode else None, mode=mode,
                                      budget=budget).numpy()
    assert len(passes) > 1 and any(len({len(case.segments.examples[r]) for r in rows}) > 1 for rows in passes)
    want = _one_at_a_time(case, xi, heads, kind, mode)
    # tolerance: both sides float32, each within loss_tolerance of the exact loss (padding changes the kernels' sums)
    np.testing.assert_allclose(got, want, rtol=0, atol=2 * loss_tolerance(case))


@pytest.mark.parametrize("mode", [None, *MODES])
def test_shared_layers_equal_one_at_a_time(case, mode, monkeypatch):
    """Interventions that touch only the last layer run the layers before it once per segment (``intervene``'s
    ``shared``: each segment given once, its rows repeated at the last layer's input); the losses equal each (mask,
    segment) run alone through the whole model."""
    lm, L, H, K = case.lm, case.lm.n_layers, case.lm.n_heads, 3
    generator = torch.Generator().manual_seed(2)
    xi = torch.ones(K, L, H)
    xi[:, L - 1] = torch.tensor([0.0, 0.5, 1.0])[torch.randint(0, 3, (K, H), generator=generator)]
    heads = None
    if mode:
        heads = torch.zeros(K, L, H, dtype=torch.bool)
        heads[:, L - 1] = torch.rand(K, H, generator=generator) < 0.5
        heads[0, L - 1, 0] = True  # at least one head tested
    kind = SINKS[case.kind][0]
    given = []

    def recorded(lm_, segments, rows, **kw):
        given.append((list(rows), kw.get("given")))
        return row_losses(lm_, segments, rows, **kw)

    monkeypatch.setattr(effects, "row_losses", recorded)
    got = effects.intervention_losses(lm, case.segments, xi, sink_heads=heads, sink=kind if mode else None,
                                      mode=mode).numpy()
    # the shared path ran: the model was given fewer rows than were scored
    assert all(g is not None and len(g) < len(rows) for rows, g in given)
    want = _one_at_a_time(case, xi, heads, kind, mode)
    # tolerance: both sides float32, each within loss_tolerance of the exact loss (other batch shapes, other sums)
    np.testing.assert_allclose(got, want, rtol=0, atol=2 * loss_tolerance(case))


def test_shared_layers_refuse_an_intervention_before_them(case):
    """``shared`` from a layer after one an intervention touches is refused (it would skip that intervention)."""
    lm, L, H = case.lm, case.lm.n_layers, case.lm.n_heads
    xi = torch.ones(2, L, H)
    xi[0, 0, 0] = 0.0
    with pytest.raises(ValueError, match="shared layers"):
        with intervene(lm, xi=xi, shared=(1, torch.tensor([2]))):
            pass


def test_importance_in_passes_equals_one_segment_at_a_time(case):
    """``importance`` in several passes (a small budget) gives each segment the gradient it has alone."""
    lm = case.lm
    budget = 2 * max(len(e) for e in case.segments.examples) * lm.n_layers * int(lm.model.config.hidden_size)
    got, losses = effects.importance(lm, case.segments, budget=budget)
    for n in range(len(case.segments)):
        alone = dataclasses.replace(case.segments, examples=[case.segments.examples[n]],
                                    labels=[case.segments.labels[n]], tokens=[case.segments.tokens[n]],
                                    sinks={k: [v[n]] for k, v in case.segments.sinks.items()})
        one, loss = effects.importance(lm, alone)
        tol = 2 * gradient_tolerance(case, n)  # both float32, each within it of the exact gradient
        np.testing.assert_allclose(got[n], one[0], rtol=0, atol=tol, err_msg=f"segment {n}")
        np.testing.assert_allclose(losses[n], loss[0], rtol=0, atol=2 * loss_tolerance(case))


# ------------------------------------------------------------------------------------------- head_effects


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_head_effects_assembles_the_reference(cases, kind):
    """``head_effects`` on word lists: the base loss, D, the mean importance and the all-heads sink changes are the
    reference's (the same segments: words encoded alone, masking drawn from the seed)."""
    case = cases(kind)
    L, H = case.lm.n_layers, case.lm.n_heads
    out = effects.head_effects(case.lm, SENTENCES, seed=0, head=case.head)
    tol = loss_tolerance(case)
    base = case.base()
    assert out.tokens == case.segments.tokens
    np.testing.assert_allclose(out.loss, base, rtol=0, atol=tol)
    delta = np.array([[(_single(case, [(layer, head)]) - base).mean() for head in range(H)] for layer in range(L)])
    np.testing.assert_allclose(out.delta, delta, rtol=0, atol=2 * tol)
    _assert_importance(out.importance, case)
    every = {(layer, head) for layer in range(L) for head in range(H)}
    assert set(out.sinks) == set(SINKS[kind])
    for sink in SINKS[kind]:
        for mode in MODES:
            want = np.mean([case.ref.loss(n, sink=(sink, every, mode)) for n in range(len(base))]) - base.mean()
            assert abs(out.sinks[sink][mode] - want) <= 2 * tol, (sink, mode)


def test_head_effects_refuses_a_bare_string(cases):
    with pytest.raises(TypeError, match="sentences"):
        effects.head_effects(cases("gpt2").lm, "the cat sat on the mat")


# ------------------------------------------------------------------------------------- one head per layer


def test_one_head_per_layer_has_no_all_but_one_task(tmp_path, tiny_model_dir, tiny_lm):
    """A model with one head per layer has nothing to keep "all but one" of: the run has no such task, not a crash;
    its single-head losses still come (``[layer, 1, segment]``)."""
    from helpers.ablation.run import PARTS, tasks

    from transformers import AutoTokenizer, BertConfig, BertModel

    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp_path)
    config = BertConfig(vocab_size=int(tiny_lm.model.config.vocab_size), hidden_size=16,
                        num_hidden_layers=2, num_attention_heads=1, intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(tmp_path)
    lm = load_model(str(tmp_path))
    segments = prepare(lm, encode_words(lm.tokenizer, SENTENCES[:2]), head=_seeded_head(lm), seed=0)
    assert not [t for t in tasks(lm.n_layers, lm.n_heads, PARTS, ("sep",)) if t[0] == "only"]
    assert [t for t in tasks(2, 2, PARTS, ("sep",)) if t[0] == "only"] == [("only", 0), ("only", 1)]
    assert effects.single_head_losses(lm, segments).shape == (2, 1, 2)


# ------------------------------------------------------------------------------------------ pruning curve


def test_prune_curve_removes_the_least_important_head_recomputed(cases):
    """Michel et al. §4's curve, step by step against the reference: the loss after each step; the head removed is,
    among those present, the lowest layer-normalised mean ``|dL/dxi|`` recomputed on the pruned model (removed heads
    counting 0), up to the tolerance of the normalised score (ties: a layer with one head left scores 1); the random
    orders' losses follow their seeded permutations. One fold: the order is fitted on the segments it scores."""
    case = cases("gpt2")
    lm, L, H, S = case.lm, case.lm.n_layers, case.lm.n_heads, len(case.segments)
    curves = effects.held_out_prune_curves(lm, case.segments, seeds=(0,), n_folds=1)
    out = {"removed": curves["removed"], "order": curves["orders"][0], "importance": curves["in_sample"].mean(1),
           "random": curves["random"].mean(-1)}
    np.testing.assert_array_equal(curves["held_out"], curves["in_sample"])
    counts = out["removed"]
    assert counts == effects.prune_steps(L * H) and counts[-1] == L * H and sorted(out["order"]) == list(range(L * H))
    tol = loss_tolerance(case)
    gtol = max(gradient_tolerance(case, n) for n in range(S))
    mean_loss = lambda removed: np.mean([case.ref.loss(n, scale={divmod(k, H): 0.0 for k in removed})  # noqa: E731
                                         for n in range(S)])
    for i, count in enumerate(counts):
        removed = out["order"][:count]
        assert abs(out["importance"][i] - mean_loss(removed)) <= tol, i
        if i + 1 == len(counts):
            break
        scores = np.zeros((L, H))
        for k in set(range(L * H)) - set(removed):
            layer, head = divmod(k, H)
            zeroed = {divmod(r, H): 0.0 for r in removed}
            fd = [(case.ref.loss(n, scale={**zeroed, (layer, head): 1 + STEP})
                   - case.ref.loss(n, scale={**zeroed, (layer, head): 1 - STEP})) / (2 * STEP) for n in range(S)]
            scores[layer, head] = np.mean(np.abs(fd))
        norms = np.linalg.norm(scores, axis=1)
        present = sorted(set(range(L * H)) - set(removed))
        normalised = {k: scores[divmod(k, H)] / norms[k // H] for k in present}
        # a normalised score moves by at most 2 gtol / (its layer's norm) when each score moves by gtol
        slack = {k: 2 * gtol / norms[k // H] for k in present}
        lowest = min(normalised[k] + slack[k] for k in present)
        for k in out["order"][count:counts[i + 1]]:
            assert k in present and normalised[k] - slack[k] <= lowest, (i, k, normalised)
    perm = np.random.default_rng(0).permutation(L * H)
    want = [mean_loss(perm[:count].tolist()) for count in counts]
    np.testing.assert_allclose(out["random"][0], want, rtol=0, atol=tol)


def test_an_encoder_loss_with_a_given_head_does_not_claim_the_checkpoint_head(cases):
    """The loss is labelled by whose head scores it (book/methods.md: "labelled so wherever a number appears"): a head
    passed to ``head_effects`` without ``head_source`` is not the checkpoint's own."""
    case = cases("bert")
    assert "checkpoint" not in effects.head_effects(case.lm, SENTENCES[:1], head=case.head).kind
    assert "fitted" in effects.head_effects(case.lm, SENTENCES[:1], head=case.head, head_source="fitted head").kind


# ------------------------------------------------------------------------------------- issue 61's additions


def test_head_effects_is_the_packages(cases):
    """``from helpers.ablation import head_effects`` (the contract of the Python API) is the function the reference
    checks above (test_head_effects_assembles_the_reference)."""
    from helpers.ablation import head_effects

    assert head_effects is effects.head_effects
    case = cases("gpt2")
    out = head_effects(case.lm, SENTENCES[:1])
    np.testing.assert_allclose(out.loss, case.base()[:1], rtol=0, atol=loss_tolerance(case))


def test_mean_contexts_are_the_reference_mean(case):
    """``mean_contexts`` ``[layer, head, d]``: each head's context averaged over every token of every segment (the
    segments batched with padding, which is left out), against the float64 reference's, one token at a time.
    Tolerance: a context is a float32 sum over the tokens of values of the size of the largest |z|, through the
    layers below it (``loss_tolerance``'s count of terms and depth)."""
    got = effects.mean_contexts(case.lm, case.segments).double().numpy()
    want = case.ref.mean_context()
    depth = case.lm.n_layers + 1
    tol = round_off(np.abs(want).max() + 1.0, longest_sum(case.lm, case.segments) * depth)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)


def test_mean_ablation_replaces_a_head_by_its_mean(case):
    """``single_head_losses`` with ``fill`` ``[layer, head, segment]`` against the reference with that head's context replaced,
    at every position, by the same vector (the reference's float64 mean, as float32); it differs from zeroing."""
    L, H, S = case.lm.n_layers, case.lm.n_heads, len(case.segments)
    fill = torch.from_numpy(case.ref.mean_context()).float()
    got = effects.single_head_losses(case.lm, case.segments, fill=fill)
    want = np.array([[[case.ref.loss(n, fill={(layer, head): fill[layer, head].double().numpy()}) for n in range(S)]
                      for head in range(H)] for layer in range(L)])
    tol = loss_tolerance(case)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)
    zeroed = np.array([[_single(case, [(layer, head)]) for head in range(H)] for layer in range(L)])
    assert np.abs(want - zeroed).max() > 10 * tol  # the mean is not zero: the comparison can tell them apart


def test_content_positions_are_one_word_token_each(cases):
    """The matched control's positions: one per segment, never a sink, never "." or ",", never an encoder's masked
    position; seeded (the same draw twice), and the draws differ."""
    for kind in ("bert", "gpt2"):
        case = cases(kind)
        draws = [effects.content_positions(case.lm, case.segments, d, seed=0) for d in range(4)]
        assert [p.tolist() for p in effects.content_positions(case.lm, case.segments, 0, seed=0)] == \
               [p.tolist() for p in draws[0]]
        for n in range(len(case.segments)):
            sinks = set().union(*(case.ref.sinks(n, k) for k in SINKS[kind]))
            for d in draws:
                (where,) = np.flatnonzero(d[n])
                token = case.segments.tokens[n][where]
                assert where not in sinks and token.lstrip("Ġ▁") not in (".", ",")
                if not case.lm.causal:
                    assert case.segments.labels[n][where] == IGNORE
        assert len({tuple(np.flatnonzero(d[n])[0] for n in range(len(case.segments))) for d in draws}) > 1


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_the_control_and_a_head_set_against_the_reference(cases, kind):
    """The no-op test on a random content token (the matched control) and the sink tests on a set of heads at once
    (``head_set_sink_losses``) against the reference's hand-edited attention on the same positions and heads."""
    case = cases(kind)
    L, H, S = case.lm.n_layers, case.lm.n_heads, len(case.segments)
    chosen = np.zeros((L, H), bool)
    chosen[0, 1] = chosen[L - 1, 0] = chosen[L - 1, H - 1] = True
    heads = {(int(l), int(h)) for l, h in zip(*np.nonzero(chosen))}
    tol = loss_tolerance(case)
    control = effects.control_segments(case.lm, case.segments, 2, seed=0)
    for d in range(2):
        name = f"content{d}"
        case.ref.positions[name] = [set(np.flatnonzero(p).tolist()) for p in control.sinks[name]]
        got = effects.head_set_sink_losses(case.lm, control, name, "noop", chosen)
        want = np.array([case.ref.loss(n, sink=(name, heads, "noop")) for n in range(S)])
        np.testing.assert_allclose(got, want, rtol=0, atol=tol, err_msg=name)
        assert np.abs(want - case.base()).max() > 10 * tol
    sink = SINKS[kind][0]
    for mode in MODES:
        got = effects.head_set_sink_losses(case.lm, case.segments, sink, mode, chosen)
        want = np.array([case.ref.loss(n, sink=(sink, heads, mode)) for n in range(S)])
        np.testing.assert_allclose(got, want, rtol=0, atol=tol, err_msg=mode)


def test_held_out_prune_curves_fit_on_one_fold_and_score_the_other(cases):
    """The cross-fitted pruning curves against the reference: the folds interleave; the first step of each fold's
    order removes the heads of lowest layer-normalised importance on that fold alone; every step's losses are the
    reference's on the OTHER fold's segments (held out) and on its own (in sample) with that order's heads removed;
    the measured-D order is the fold's own ``D`` ascending, scored on the other fold; the random orders per segment
    follow their permutations."""
    case = cases("gpt2")
    lm, L, H, S = case.lm, case.lm.n_layers, case.lm.n_heads, len(case.segments)
    single = np.array([[_single(case, [(layer, head)]) for head in range(H)] for layer in range(L)]) - case.base()
    out = effects.held_out_prune_curves(lm, case.segments, single=single, seeds=(0,))
    assert out["folds"] == [0, 1, 0][:S] and out["removed"] == effects.prune_steps(L * H)
    members = [[n for n in range(S) if out["folds"][n] == f] for f in (0, 1)]
    tol = loss_tolerance(case)
    gtol = max(gradient_tolerance(case, n) for n in range(S))
    g = case.gradients()["g"]
    loss = lambda n, removed: case.ref.loss(n, scale={divmod(k, H): 0.0 for k in removed})  # noqa: E731
    for f in (0, 1):
        other = members[1 - f]
        order = out["orders"][f]
        assert sorted(order) == list(range(L * H))
        scores = np.abs(g[members[f]]).mean(0)                              # [L, H]: the fold's importance
        norms = np.linalg.norm(scores, axis=1)
        normalised = (scores / norms[:, None]).ravel()
        slack = (2 * gtol / norms[:, None]).repeat(H, 1).ravel()
        first = order[:out["removed"][1]]
        assert all(normalised[k] - slack[k] <= min(normalised + slack) for k in first), (f, first)
        d = single[..., members[f]].mean(-1).ravel()
        assert out["delta_orders"][f] == sorted(range(L * H), key=lambda k: (d[k], k))
        for i, count in enumerate(out["removed"]):
            for n in other:
                assert abs(out["held_out"][i, n] - loss(n, order[:count])) <= tol, (f, i, n)
                assert abs(out["by_delta"][i, n] - loss(n, out["delta_orders"][f][:count])) <= tol, (f, i, n)
            for n in members[f]:
                assert abs(out["in_sample"][i, n] - loss(n, order[:count])) <= tol, (f, i, n)
    perm = np.random.default_rng(0).permutation(L * H)
    want = np.array([[loss(n, perm[:count].tolist()) for n in range(S)] for count in out["removed"]])
    np.testing.assert_allclose(out["random"][0], want, rtol=0, atol=tol)
    with pytest.raises(ValueError, match="at least 2 segments"):
        effects.held_out_prune_curves(lm, effects.pick(case.segments, [0]))


def test_the_loss_scale_against_counting_and_the_reference(cases, toy_data):
    """The loss's scale: the unigram loss of each segment's targets, against counting GUM dev's tokens by hand (each
    sentence encoded alone, add-one over the vocabulary); every head removed, against the reference with every
    head's context zeroed."""
    import math

    from helpers.ablation.run import UNIGRAM_TREEBANK, run_task, unigram_losses
    from helpers.context import RunContext
    from helpers.data.corpora import load_treebank

    case = cases("bert")
    ctx = RunContext.from_env(data_dir=toy_data, cache_dir=toy_data / "cache", small=False)
    got = unigram_losses(case.lm, ctx, case.segments)
    counts: dict[int, int] = {}
    for sentence in load_treebank(UNIGRAM_TREEBANK, data_dir=toy_data):
        for token in encode_words(case.lm.tokenizer, [sentence.words]).examples[0].input_ids:
            counts[int(token)] = counts.get(int(token), 0) + 1
    total, vocab = sum(counts.values()), len(case.lm.tokenizer)
    for n, labels in enumerate(case.segments.labels):
        targets = [int(y) for y in labels if y != IGNORE]
        want = sum(-math.log((counts.get(y, 0) + 1) / (total + vocab)) for y in targets) / len(targets)
        assert got[n] == pytest.approx(want, rel=0, abs=round_off(want, len(targets), eps=EPS64))
    L, H = case.lm.n_layers, case.lm.n_heads
    removed = run_task(case.lm, {"main": case.segments}, ("all_removed",))[0]
    want = _single(case, [(layer, head) for layer in range(L) for head in range(H)])
    np.testing.assert_allclose(removed, want, rtol=0, atol=loss_tolerance(case))

"""Masked-LM machinery for the gradient analysis of paper §3.2 (Figure 3).

The paper takes the gradient of BERT's own masked-LM loss. A model saved without its masked-LM head
(the offline default, a sentence-embedding model) has no such loss, so we fit a small head on the
**frozen** encoder: a dense layer, GELU and layer norm, then scores against the model's own input
embeddings plus a bias (BERT's head has this shape). It is fitted once (seeded, cached) and its
held-out loss is reported. It is *not* the model's pre-training objective, and the book says so.

Masking is BERT's: 15% of the non-special tokens are chosen; of those 80% become the mask token,
10% a random token and 10% stay unchanged.

>>> head, report = mlm_head(lm, train_batch, heldout_batch, seed=0)      # doctest: +SKIP
>>> report["source"], report["heldout_loss"]                               # doctest: +SKIP
('fitted on the frozen encoder', 4.1)
"""
from __future__ import annotations

import math
import os

import numpy as np
import torch
from torch import nn

from helpers.core.encoding import Encoded, EncodedBatch
from helpers.core.masked_lm import bert_mask, masked_examples, pretrained_head  # noqa: F401 (bert_mask: re-exported)
from helpers.core.extract import bucket, model_inputs
from helpers.core.models import LoadedModel
from helpers.core.threads import FIXED_THREADS, torch_threads
from helpers.data.cache import artifact_path
from helpers.data.files import atomic_write
from helpers.digest import code_digest

class FittedMLMHead(nn.Module):
    """``logits = LayerNorm(GELU(W h + b)) E^T + c`` with ``E`` the frozen input embeddings."""

    def __init__(self, embeddings: torch.Tensor, eps: float = 1e-12):
        super().__init__()
        hidden = embeddings.shape[1]
        self.dense = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)
        self.bias = nn.Parameter(torch.zeros(embeddings.shape[0]))
        self.register_buffer("embeddings", embeddings.detach().clone(), persistent=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.norm(nn.functional.gelu(self.dense(hidden))) @ self.embeddings.T + self.bias


def _final_hidden(lm: LoadedModel, examples: list[Encoded]) -> torch.Tensor:
    with torch.inference_mode():
        return lm.model(**model_inputs(lm, examples)).last_hidden_state


def _collect(lm: LoadedModel, masked: list[tuple[Encoded, np.ndarray]], batch_size: int = 32):
    """Final hidden states at masked positions and their labels (frozen encoder, no gradients)."""
    by_index = {ex.index: labels for ex, labels in masked}
    hidden, targets = [], []
    for group in bucket([ex for ex, _ in masked], batch_size=batch_size):
        h = _final_hidden(lm, group)
        for b, ex in enumerate(group):
            labels = by_index[ex.index]
            pos = np.flatnonzero(labels != -100)
            hidden.append(h[b, pos].float().cpu())
            targets.append(torch.from_numpy(labels[pos]))
    return torch.cat(hidden), torch.cat(targets)


def _mean_loss(head: nn.Module, hidden: torch.Tensor, labels: torch.Tensor, chunk: int = 1024) -> float:
    """Mean cross-entropy (nats) of ``head`` over ``hidden [tokens, dim]``, ``chunk`` tokens at a time: the
    logits of every masked token at once (``[tokens, vocabulary]``, 2.3 GB for 1,000 segments) are never
    held."""
    total = 0.0
    with torch.no_grad():
        for start in range(0, len(labels), chunk):
            total += float(nn.functional.cross_entropy(head(hidden[start : start + chunk]), labels[start : start + chunk],
                                                       reduction="sum"))
    return total / max(len(labels), 1)


# Four passes over the masked tokens of 1,000 segments: with the offline default the held-out loss is
# 6.73 nats after 4 epochs and 6.73 after 8 (6.99, 6.86, 6.79, 6.73, 6.72, 6.67, 6.71, 6.73), so more
# epochs cost time without a better head.
HEAD_EPOCHS = 4


def fit_head(lm: LoadedModel, train: EncodedBatch, heldout: EncodedBatch, *, seed: int = 0,
             epochs: int = HEAD_EPOCHS, lr: float = 2e-3, batch: int = 256, device=None) -> tuple[FittedMLMHead, dict]:
    """Fit :class:`FittedMLMHead` on masked ``train`` segments; report train and held-out loss (nats). The fit
    runs on ``device`` (default: the model's, ``lm.device``): the head is initialised and the order drawn on the
    CPU, the hidden states and the head moved there (the same code on every device); the head is returned
    on the CPU."""
    device = torch.device(lm.device if device is None else device)
    embeddings = lm.model.get_input_embeddings().weight.detach().float().cpu()
    h_train, y_train = _collect(lm, masked_examples(lm, train.examples, seed=seed))
    h_held, y_held = _collect(lm, masked_examples(lm, heldout.examples, seed=seed + 1))
    torch.manual_seed(seed)
    head = FittedMLMHead(embeddings).to(device)
    h_train, y_on, h_held, y_held_on = (t.to(device) for t in (h_train, y_train, h_held, y_held))
    optim = torch.optim.Adam([p for p in head.parameters() if p.requires_grad], lr=lr)
    generator = torch.Generator().manual_seed(seed)
    with torch_threads(FIXED_THREADS):  # the same weights whatever the machine's (or the caller's) thread count
        for _ in range(epochs):
            order = torch.randperm(len(y_train), generator=generator).to(device)
            for start in range(0, len(order), batch):
                idx = order[start : start + batch]
                loss = nn.functional.cross_entropy(head(h_train[idx]), y_on[idx])
                optim.zero_grad()
                loss.backward()
                optim.step()
        head.eval()
        train_loss, held_loss = _mean_loss(head, h_train, y_on), _mean_loss(head, h_held, y_held_on)
    head = head.cpu()
    counts = torch.bincount(y_train, minlength=embeddings.shape[0]).double() + 1.0
    unigram = -float((counts / counts.sum()).log()[y_held].mean())
    return head, {
        "source": "fitted on the frozen encoder", "train_tokens": int(len(y_train)), "heldout_tokens": int(len(y_held)),
        "train_loss": round(train_loss, 4), "heldout_loss": round(held_loss, 4),
        "heldout_unigram_loss": round(unigram, 4), "heldout_perplexity": round(math.exp(held_loss), 2),
        "epochs": epochs, "seed": seed,
    }


def mlm_head(lm: LoadedModel, train: EncodedBatch, heldout: EncodedBatch, *, seed: int = 0,
             cache_root: str | os.PathLike | None = None) -> tuple[nn.Module, dict]:
    """The model's own masked-LM head if it has one, else a fitted head (cached on disk)."""
    own = pretrained_head(lm)
    if own is not None:
        return own, {"source": "the checkpoint's own masked-LM head"}
    from safetensors import safe_open
    from safetensors.torch import load_file

    key = {"model": lm.fingerprint(), "train": train.digest(), "heldout": heldout.digest(), "seed": seed,
           "epochs": HEAD_EPOCHS, "code": code_digest(fit_head)}  # the fit's code: a change to it refits
    path = artifact_path("mlm-head", key, ".safetensors", cache_root)
    embeddings = lm.model.get_input_embeddings().weight.detach().float().cpu()
    if path.is_file():
        try:
            with safe_open(str(path), "pt") as handle:
                report = {k: _parse(v) for k, v in (handle.metadata() or {}).items()}
            head = FittedMLMHead(embeddings)
            head.load_state_dict(load_file(str(path)))
            return head.eval(), {**report, "cached": True}
        except Exception:  # corrupted or incompatible: refit below
            pass
    head, report = fit_head(lm, train, heldout, seed=seed)
    atomic_write(path, lambda h: h.write(_safetensors_bytes(head, report)))
    return head, report


def _safetensors_bytes(head: nn.Module, report: dict) -> bytes:
    from safetensors.torch import save

    return save({k: v.contiguous() for k, v in head.state_dict().items()}, metadata={k: str(v) for k, v in report.items()})


def _parse(value: str):
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value

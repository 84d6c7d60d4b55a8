"""Errors of the core that callers catch by type.
"""
from __future__ import annotations


class ModelNotAvailableError(OSError):
    """A model name could not be resolved locally or on the hub."""


class NoAttentionError(ModelNotAvailableError):
    """A model's forward pass returned no attention probabilities (its attention layers do not compute them)."""


def no_attention(label: str) -> NoAttentionError:
    """The one-line error for a model that returned no attention weights."""
    return NoAttentionError(
        f"model {label}: its forward pass returned no attention weights (output_attentions gave none); the analyses "
        "need them: load it with attn_implementation='eager' (load_model does) or pick a model whose attention "
        "layers return their probabilities")

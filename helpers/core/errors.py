"""Errors of the core that callers catch by type.
"""
from __future__ import annotations


class ModelNotAvailableError(OSError):
    """A model name could not be resolved locally or on the hub."""

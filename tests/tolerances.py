"""Tolerances of the numeric tests, derived once from the arithmetic a comparison covers.

A floating-point result is its exact value rounded to the nearest representable number: off by at most
``eps / 2`` of its magnitude, ``eps`` the machine epsilon of its dtype (:data:`EPS32` = 2**-23 for
float32). A sum or dot product of ``n`` terms rounds ``n`` times, so it is off by at most about
``n * eps / 2`` times the sum of its terms' magnitudes (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., §3.1). In which order a kernel adds the terms differs between CPUs of one family,
thread counts and batch shapes; how many terms it adds does not. So a tolerance written as
``terms * eps * magnitude`` holds on any CPU, where a number tuned on one machine (``atol=1e-5`` on maps of
size 4) failed on the next (issue 40).

Where no such count can be written down, as for two float32 passes through a whole model (its layers
amplify the round-off by amounts no test states), both sides run in float64 (:func:`in_float64`): what is
left is float64 round-off, or the one rounding of each side to the float32 of the maps.
"""
from __future__ import annotations

import copy
import dataclasses
from contextlib import contextmanager

import numpy as np

EPS16 = float(np.finfo(np.float16).eps)  # 2**-10 ~ 9.8e-4
EPS32 = float(np.finfo(np.float32).eps)  # 2**-23 ~ 1.2e-7
EPS64 = float(np.finfo(np.float64).eps)  # 2**-52 ~ 2.2e-16
# Over the leading term: terms * eps is already twice the worst case of the sums (eps / 2 per rounding); the
# factor 2 covers the few roundings outside them (the products, exp, log, sqrt, the cast of the result).
SAFETY = 2
# Two float64 evaluations of one computation in other orders or batches, where no short count of the roundings
# is written down (a forward and backward pass through a model; a fused kernel against autograd): float64
# round-off is 1e-16 relative; amplified a million-fold it is still below this, while any float32 step (1e-7)
# or any real difference is far above it.
FLOAT64_PASSES = 1e-10


def round_off(reference, terms: int = 1, *, eps: float = EPS32, safety: float = SAFETY) -> float:
    """Absolute tolerance for a result computed in precision ``eps`` through sums of at most ``terms``
    terms, on values of the size of ``reference`` (the largest ``|reference|``; pass the sum of the terms'
    magnitudes where they can cancel): ``safety * terms * eps * max|reference|``.

    >>> round_off(np.array([0.5, -4.0]), terms=16)  # float32 sums of 16 terms on values up to 4
    1.52587890625e-05
    """
    return float(safety * terms * eps * np.max(np.abs(np.asarray(reference, dtype=np.float64))))


def decimals(kept: int, value=1.0) -> float:
    """Absolute tolerance for a number rounded to ``kept`` decimals (half the last kept decimal), plus the
    float64 representation of the rounded number (of the size of ``value``)."""
    return 0.5 * 10.0 ** -kept + round_off(value, eps=EPS64)


def float64_passes(reference) -> float:
    """Absolute tolerance for two float64 evaluations of one computation (:data:`FLOAT64_PASSES`) times the
    largest ``|reference|`` (pass the terms' scale where the result cancels to about 0)."""
    return FLOAT64_PASSES * float(np.max(np.abs(np.asarray(reference, dtype=np.float64))))


def in_float64(lm):
    """A float64 copy of a loaded model (``LoadedModel``), with its own fingerprint (so cache keys tell the
    two apart). Its maps are still returned as float32: two float64 passes of one example then give the same
    float32 map up to one rounding of each side, ``round_off(maps)``."""
    return dataclasses.replace(lm, model=copy.deepcopy(lm.model).double(), _fingerprint=None)


@contextmanager
def default_float64():
    """torch's default dtype float64 for the ``with`` block: word-level maps of a float64 model need it (the
    word conversion's matrices are made in the default dtype, and a float32 matrix cannot multiply float64
    maps)."""
    import torch

    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(before)

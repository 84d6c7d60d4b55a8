"""Torch's intra-op thread count, set for a block of work.

Two uses: small per-sentence operations run on one thread (threads waiting on each other at every small
operation cost more than they save), and training whose float sums must not depend on the machine runs
on a fixed number (a reduction split over another number of threads adds in another order, and the
fitted weights differ in their last digits).

>>> with torch_threads(1):                                              # doctest: +SKIP
...     loss.backward()
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

# The thread count of the work whose float sums must not depend on the machine or on how many pages of the
# book run at once: fitting the masked-LM head and the §3 gradient pass (on one thread, the head's weights and
# the gradients differed in their last digits, the §3 gradient ratio by 5e-10). Two: the count every result
# in this project's caches was computed with (2-core machines).
FIXED_THREADS = 2


@contextmanager
def torch_threads(n: int):
    """Torch's intra-op threads set to ``n`` inside the block (restored after)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)

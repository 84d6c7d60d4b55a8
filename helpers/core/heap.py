"""Freed memory handed back to the operating system.

glibc keeps the memory of freed blocks in the process's heap for its next allocations (the size above which it maps
a block instead rises to 32 MiB once a large block is freed), so after a pass over the maps a process's resident
memory stays near the pass's peak although its tensors are gone. Before work that runs beside it (the probes'
training processes beside the command's own), :func:`release_freed` hands that memory back.

>>> release_freed()                                                   # doctest: +SKIP
True
"""
from __future__ import annotations

import ctypes


def release_freed() -> bool:
    """Hand the free memory of this process's heap back to the operating system (glibc's ``malloc_trim(0)``; no value
    changes). ``False``, doing nothing, where the C library has no such call (not glibc)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the symbols the process has loaded, the C library's among them
    except (OSError, AttributeError, TypeError):
        return False
    trim(0)
    return True

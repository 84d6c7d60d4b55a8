"""How a padded batch of maps is cut for the batched statistics, by memory and by length: the smallest pieces of the
batched path, with no import of the package, so that every statistics module can use them without taking on the
model pass (:mod:`helpers.reduce` re-exports them).

>>> length_groups([3, 5, 3])
[(3, [0, 2]), (5, [1])]
>>> stat_chunks(4, CPU_STAT_BYTES // 2, "cpu")
[slice(0, 2, None), slice(2, 4, None)]
"""
from __future__ import annotations

# Bytes of float64 working arrays a batched statistic may hold at once on the CPU (a batch of maps is cut into
# as many examples as fit, at least one) and on an accelerator: ``[batch, layer, head, query, key]`` in float64
# is 8 bytes an entry, so 64 MiB is 7 segments of the default model's 6 x 12 heads at 128 tokens on the CPU
# (in the CPU's caches' reach, and far from the 3 GB a process may use), and 1 GiB a whole batch of 32 of them,
# or 3 of a 16 x 32-head model's, on a GPU. :func:`stat_chunks` cuts by them.
CPU_STAT_BYTES = 64 * 2**20
DEVICE_STAT_BYTES = 2**30


def length_groups(lengths) -> list[tuple[int, list[int]]]:
    """``[(n, positions)]``: the positions in a batch of the examples of each length ``n`` (``lengths``
    ``[batch]``), by increasing ``n``. A length bucket holds few lengths; batched statistics take each group's
    ``[:n, :n]`` corner as one tensor, so padding never enters a sum."""
    groups: dict[int, list[int]] = {}
    for b, n in enumerate(int(n) for n in lengths):
        groups.setdefault(n, []).append(b)
    return sorted(groups.items())


def stat_chunks(n_examples: int, bytes_per_example: int, device) -> list[slice]:
    """Consecutive slices of ``n_examples`` (a batch) whose working arrays stay within :data:`CPU_STAT_BYTES` on
    the CPU or :data:`DEVICE_STAT_BYTES` on an accelerator (``device``, a torch device or its name), each at
    least one example: a batch is sized by memory, not by a count."""
    budget = CPU_STAT_BYTES if str(device).split(":")[0] == "cpu" else DEVICE_STAT_BYTES
    size = max(1, budget // max(1, int(bytes_per_example)))
    return [slice(i, min(i + size, n_examples)) for i in range(0, n_examples, size)]

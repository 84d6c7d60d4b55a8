"""helpers.core.heap: the heap's free memory handed back to the operating system."""
import os
import sys

import pytest

from helpers.core.heap import release_freed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_blocks_pinned_between_live_ones_are_handed_back():
    """200 MB of freed blocks, a live block every 50 between them (so the heap cannot shrink from its top, the only
    memory glibc hands back by itself), leave the resident memory up until release_freed."""
    rss = lambda: int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")  # resident bytes
    blocks = [bytes(4000) for _ in range(50_000)]  # malloc'd (above Python's small-object allocator's 512 bytes)
    kept = blocks[::50]
    del blocks
    before = rss()
    assert release_freed()
    assert before - rss() > 100 * 2**20  # at least half of the 196 MB freed
    assert len(kept) == 1000

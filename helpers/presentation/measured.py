"""The Performance page's tables of what is measured while the book builds (its first kind of figure): each built
from the JSON a benchmark script wrote (:func:`helpers.presentation.performance.run_benchmark`), so that the page's
cell calls one function here and shows what it returns. Nothing is measured here; values are only rounded and
labelled.

>>> clustering_table(run_benchmark("clustering", "--segments", "100"))   # doctest: +SKIP
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays cheap
    import pandas as pd


def clustering_table(clustering: dict) -> "pd.DataFrame":
    """``measure | value`` of ``benchmarks/clustering.py``'s JSON: the Jensen-Shannon distances per segment (batched,
    in float32 and float64; the per-head loop; the original's per-head loop in float16) in milliseconds to 0.1, the
    speed-ups, the seconds over every segment and the peak resident memory, as the script wrote them."""
    import pandas as pd

    per = clustering["per_segment_seconds"]
    ms = lambda key: round(1e3 * per[key], 1)  # noqa: E731
    rows = [
        ("segments", clustering["segments"]),
        ("batched, float32, per segment (ms)", ms("batched_float32")),
        ("batched, float64, per segment (ms)", ms("batched_float64")),
        ("per-head loop, float64 numpy, per segment (ms)", ms("per_head_loop_float64")),
        ("the original's per-head loop, float16 numpy, per segment (ms)", ms("original_per_head_loop_float16")),
        ("speed-up over the per-head loop", clustering["speedup_vs_per_head_loop"]),
        ("speed-up over the original's loop (goal ≥ 50)", clustering["speedup_vs_original_loop"]),
        ("JS distances, all segments (s)", clustering["seconds_js_all_segments"]),
        ("forward passes, all segments (s)", clustering["seconds_forward_all_segments"]),
        ("peak resident memory (MiB; every segment's maps are held for the timing)", clustering["peak_rss_mib"]),
    ]
    return pd.DataFrame(rows, columns=["measure", "value"]).astype({"value": object}).set_index("measure")

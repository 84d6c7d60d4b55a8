"""The Performance page's tables of what is measured while the book builds (its first kind of figure): each built
from the JSON a benchmark script wrote (:func:`helpers.presentation.performance.run_benchmark`), so that the page's
cell calls one function here and shows what it returns. Nothing is measured here; values are only rounded and
labelled.

>>> extraction_table(run_benchmark("extraction", "--sentences", "200"))   # doctest: +SKIP
>>> clustering_table(run_benchmark("clustering", "--segments", "100"))   # doctest: +SKIP
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays cheap
    import pandas as pd


def extraction_table(extraction: dict) -> "pd.DataFrame":
    """``measure | value`` of ``benchmarks/extraction.py``'s JSON, as the script wrote them: the sentences, the bare
    forward pass with attentions and the extraction with word-level maps (seconds) and their ratio, the token→word
    conversion batched and in a per-head Python loop (seconds) and its speed-up, the peak resident memory."""
    return _measures([
        ("sentences (GUM test)", extraction["sentences"]),
        ("bare forward pass with attentions (s)", extraction["seconds_bare_forward"]),
        ("extraction + word-level maps (s)", extraction["seconds_extraction_word_level"]),
        ("ratio to the bare forward pass (goal ≤ 1.2)", extraction["ratio_extraction_over_bare"]),
        ("token→word conversion, batched matrix products (s)", extraction["seconds_conversion_batched"]),
        ("token→word conversion, per-head Python loop (s)", extraction["seconds_conversion_naive_loop"]),
        ("speed-up of the conversion (goal ≥ 20)", extraction["speedup_conversion_over_naive"]),
        ("peak resident memory (MiB)", extraction["peak_rss_mib"]),
    ])


def heads_table(heads: dict) -> "pd.DataFrame":
    """``measure | value`` of ``benchmarks/heads.py``'s JSON, as the script wrote them: the sentences, the bare
    forward pass and the extraction with word maps and the scoring of every head (seconds) and their ratio, the
    scoring alone and a per-word Python loop's (estimated; seconds) and its speed-up, the peak resident memory."""
    return _measures([
        ("sentences", heads["sentences"]),
        ("bare forward pass with attentions (s)", heads["seconds_bare_forward"]),
        ("extraction + word maps + scoring every head, direction and relation (s)", heads["seconds_extract_and_score"]),
        ("ratio to the bare forward pass", heads["ratio_extract_and_score_over_bare"]),
        ("scoring alone (s)", heads["seconds_scoring_only"]),
        ("per-word Python loop scoring, estimated (s)", heads["seconds_naive_scoring_estimated"]),
        ("speed-up of the scoring", heads["speedup_scoring_over_naive"]),
        ("peak resident memory (MiB)", heads["peak_rss_mib"]),
    ])


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
    return _measures(rows)


def _measures(rows: list[tuple[str, object]]) -> "pd.DataFrame":
    """``measure | value``, indexed by ``measure``, the values an object column. The column is inferred before it
    becomes object, so a count among seconds is a float there (``40.0``), as the page has always shown it."""
    import pandas as pd

    return pd.DataFrame(rows, columns=["measure", "value"]).astype({"value": object}).set_index("measure")

"""Shared by the benchmark scripts: write a result as JSON beside the others, with the process's peak memory."""
import json
import resource
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, MiB (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def save(result: dict, out: str | Path) -> None:
    """Write ``result`` as JSON to ``out``. Every benchmark's output carries its peak resident memory:
    ``peak_rss_mib`` (this process, which ran the measured work) is added when the result lacks it."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if "peak_rss_mib" not in result:
        result = {**result, "peak_rss_mib": round(peak_rss_mib(), 1)}
        print(f"peak resident memory of this benchmark: {result['peak_rss_mib']:.0f} MiB")
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")

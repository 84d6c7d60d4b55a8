"""Shared by the benchmark scripts: write a result as JSON beside the others."""
import json
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def save(result: dict, out: str | Path) -> None:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")

"""The generated parts of the two READMEs, written from the recordings in ``benchmarks/results/``, never by hand.

- ``README.md``, between ``<!-- claims:start -->`` and ``<!-- claims:end -->``: every claim of the paper with
  our verdict for the default model, from the newest recorded ``python -m helpers claims --json``
  (``claims-default-DATE.json``: that JSON plus ``model_spec``, ``small`` and a ``recorded`` block, as
  ``benchmarks/common.py`` keeps every recorded measurement);
- ``benchmarks/README.md``, between ``<!-- builds:start -->`` and ``<!-- builds:end -->``: the newest recorded
  book build of each model (``book_build-MODEL-DATE.json``: floor, cold build, their ratio, rebuild, peak
  memory, analysis cache), and between ``<!-- pages:start -->`` and ``<!-- pages:end -->`` each page's time.

    .venv/bin/python scripts/readme_tables.py            # rewrite the tables of both files
    .venv/bin/python scripts/readme_tables.py --check    # exit 1, naming the file, where one is out of date

``tests/unit/test_readme.py`` regenerates both in memory and fails when a file and the recordings differ.
"""
from __future__ import annotations

import argparse
import html
import json
import re
import sys
from pathlib import Path

from helpers.claims import NOT_APPLICABLE, check_row
from helpers.presentation.performance import benchmarks_common, packed_over_floor
from helpers.presentation.verdicts import VERDICT_MARKS, tally_sentence

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
BENCHMARKS_README = ROOT / "benchmarks" / "README.md"

common = benchmarks_common()  # benchmarks/common.py, loaded by its path: `recorded` finds the newest recording

def cell(text) -> str:
    """A Markdown table cell: ``|`` escaped, line breaks and runs of spaces made one space."""
    return " ".join(str(text).split()).replace("|", "\\|")


def recorded_line(data: dict, *, note: bool = False) -> str:
    """When, on what and with which command a recording was made, in one sentence (with ``note``, the note on how
    it was measured that the recording keeps, if any)."""
    r = data["recorded"]
    m = r.get("machine", {})
    machine = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores" + (f", GPU {m['gpu']}" if m.get("gpu") else "")
    line = f"recorded {r.get('date')} at commit {r.get('commit') or '?'} ({machine}) with `{r.get('command')}`"
    return line + (f"; {r['note']}" if note and r.get("note") else "")


# ------------------------------------------------------------------------------------------ README.md: the claims


def claims_recording(results: Path = RESULTS) -> dict:
    """The newest recorded ``claims --json`` of the default model."""
    data = common.recorded("claims", "default", results)
    if data is None:
        raise FileNotFoundError(f"{results}: no recorded claims-default-DATE.json (a `claims --json` with a "
                                "`recorded` block): record one as described in benchmarks/README.md")
    return data

MAX_LINE = 200  # characters a line of README.md may have (tests/unit/test_readme.py)


def claims_table(data: dict) -> str:
    """The tally of verdicts, the table ``§ | claim | paper | ours | verdict`` and where it was recorded.

    The tally names every verdict, zeros included, then "not applicable" where any
    (:func:`helpers.presentation.verdicts.verdict_tally`). Each verdict has its square of colour
    (:data:`~helpers.presentation.verdicts.VERDICT_MARKS`, the colours of the book's tables: GitHub drops inline
    styles). A row that carries its rule's fields (``rule``, ``estimate``, ``interval`` ...) must have the verdict
    they give (:func:`helpers.claims.check_row`); a row recorded before rows carried them is shown as it is.

    An HTML table, each row on two lines (three where the second would pass :data:`MAX_LINE` characters): a
    recorded claim and our number are long sentences, and a Markdown row cannot be broken."""
    claims = data["claims"]
    for c in claims:
        if "rule" in c:
            check_row(c)
    lines = [tally_sentence(claims, f"**{data['model']}**"), "",
             "<table>", "<tr><th>§</th><th>claim</th><th>paper</th><th>ours</th><th>verdict</th></tr>"]
    for c in claims:
        lines.append(f"<tr><td>{html_cell(c['section'].lstrip('§'))}</td><td>{html_cell(c['claim'])}</td>")
        second = f"  <td>{html_cell(c['paper'])}</td><td>{html_cell(ours_cell(c))}</td>"
        verdict = f"<td>{verdict_cell(c['verdict'])}</td></tr>"
        lines += [second + verdict] if len(second + verdict) <= MAX_LINE else [second, "  " + verdict]
    lines += ["</table>", "", f"From the `claims --json` {recorded_line(data)}."]
    return "\n".join(lines)


def ours_cell(row: dict) -> str:
    """The row's ``ours``; for a claim that is not applicable, only its reason's first clause (up to the first
    ``:`` or ``;``): the verdict cell already says "not applicable", and the book gives the whole reason."""
    reason = row.get("reason")
    if row["verdict"] != NOT_APPLICABLE or not reason:
        return row["ours"]
    return re.split(r"[:;]", reason, maxsplit=1)[0].strip()


def verdict_cell(verdict: str) -> str:
    """A verdict after its square of colour, joined by a no-break space: ``"🟦&nbsp;inconclusive"``."""
    if verdict not in VERDICT_MARKS:
        raise ValueError(f"verdict {verdict!r} is not one of {list(VERDICT_MARKS)}")
    return f"{VERDICT_MARKS[verdict]}&nbsp;{html_cell(verdict)}"


def html_cell(text) -> str:
    """An HTML table cell's text: escaped, line breaks and runs of spaces made one space."""
    return html.escape(" ".join(str(text).split()), quote=False)


# ------------------------------------------------------------------------------ benchmarks/README.md: the builds


def build_recordings(results: Path = RESULTS) -> list[dict]:
    """The newest recorded book build of each model (``book_build-*.json``), the default first."""
    models = set()
    for path in results.glob("book_build-*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if "recorded" in data:
            models.add(data.get("model_spec", data.get("model")))
    ordered = sorted(models, key=lambda m: (m != "default", str(m)))
    return [common.recorded("book_build", m, results) for m in ordered]


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def cache_cell(b: dict) -> str:
    """The analysis cache of a recorded build: what the cold build left, and its peak during the build where the
    recording has it (sampled since 2026-11-27; before, the cache only grew, so the end was the peak)."""
    cache, peak = b.get("cache_bytes_cold_build"), b.get("cache_peak_bytes_cold_build")
    if not cache:
        return "not recorded"
    if not peak:
        return f"{_gb(cache['total'])} ({_gb(cache['maps'])} maps)"
    at = b.get("cache_peak_total_sample_cold_build") or peak  # what the cache held at its peak, by kind
    return (f"peak {_gb(peak['total'])} ({_gb(at['maps'])} maps, {_gb(at['probe_batches'])} probe batches), "
            f"end {_gb(cache['total'])}")


def builds_table(builds: list[dict]) -> str:
    """One row per model: floor, cold build, build / floor, the perfectly packed build / floor, rebuild, the
    largest process, the analysis cache after the cold build; then each recording's date, commit and command."""
    lines = ["| model | floor | cold build | build / floor | packed / floor | rebuild | largest process | analysis cache |",
             "|---|---|---|---|---|---|---|---|"]
    notes = []
    for b in builds:
        packed = packed_over_floor(b)
        cache_text = cache_cell(b)
        floor, ratio = b.get("seconds_floor"), b.get("ratio_build_over_floor")  # a build run with --no-floor has none
        lines.append(f"| {cell(b.get('model_spec', b['model']))} | {f'{floor:,.0f} s' if floor else '-'} "
                     f"| {b['seconds_cold_build']:,.0f} s ({b['seconds_cold_build'] / 60:.1f} min) "
                     f"| {f'{ratio:.2f} x' if ratio else '-'} | {f'{packed:.2f} x' if packed is not None else '-'} "
                     f"| {b['seconds_rebuild']:.1f} s | {b['peak_rss_gib']:.2f} GiB | {cache_text} |")
        notes.append(f"- {cell(b.get('model_spec', b['model']))}: {recorded_line(b, note=True)}.")
    return "\n".join([*lines, "", *notes])


def pages_table(builds: list[dict]) -> str:
    """Each page's execution seconds (and its kernel's peak memory) in each model's newest recorded build."""
    pages = sorted({p for b in builds for p in b.get("pages", {})})
    names = [cell(b.get("model_spec", b["model"])) for b in builds]
    lines = ["| page | " + " | ".join(names) + " |", "|---|" + "---|" * len(builds)]
    for page in pages:
        row = []
        for b in builds:
            seconds, peak = b.get("pages", {}).get(page), b.get("page_peak_rss_gib", {}).get(page)
            row.append("-" if seconds is None else f"{seconds:,.0f} s" + (f", {peak:.2f} GiB" if peak is not None else ""))
        lines.append(f"| `{Path(page).name}` | " + " | ".join(row) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- the markers


def replace_between(text: str, name: str, body: str, *, where: str = "the file") -> str:
    """``text`` with what lies between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` replaced by ``body``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if len(pattern.findall(text)) != 1:
        raise ValueError(f"{where}: needs exactly one {start} ... {end} pair")
    return pattern.sub(lambda _: f"{start}\n{body}\n{end}", text)


def generated(results: Path = RESULTS, readme: Path = README, benchmarks_readme: Path = BENCHMARKS_README
              ) -> dict[Path, str]:
    """``{file: its text with every generated table rewritten from the recordings in results}``."""
    builds = build_recordings(results)
    text = replace_between(readme.read_text(encoding="utf-8"), "claims", claims_table(claims_recording(results)),
                           where=str(readme))
    bench = benchmarks_readme.read_text(encoding="utf-8")
    bench = replace_between(bench, "builds", builds_table(builds), where=str(benchmarks_readme))
    bench = replace_between(bench, "pages", pages_table(builds), where=str(benchmarks_readme))
    return {readme: text, benchmarks_readme: bench}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 where a file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, text in generated().items():
        if path.read_text(encoding="utf-8") != text:
            stale.append(path)
            if not args.check:
                path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{path.relative_to(ROOT)}: {'out of date with' if args.check else 'rewritten from'} benchmarks/results/",
              file=sys.stderr if args.check else sys.stdout)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())

"""The READMEs' generated tables are the recordings' (``scripts/readme_tables.py``), and README.md stays a short
page for newcomers whose links lead somewhere."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
readme_tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_tables)

MAX_WORDS = 1500  # the README is an introduction; details live in the book, docs/ and benchmarks/README.md
MAX_LINE = 200


def test_readme_tables_are_the_recordings():
    """Regenerated in memory from benchmarks/results/, both files are unchanged; if not, run
    `.venv/bin/python scripts/readme_tables.py` (after recording, never by editing the tables)."""
    for path, text in readme_tables.generated().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} differs from benchmarks/results/: run .venv/bin/python scripts/readme_tables.py")


def test_the_claims_table_has_every_recorded_claim():
    data = readme_tables.claims_recording()
    table = re.search(r"<!-- claims:start -->(.*?)<!-- claims:end -->", (ROOT / "README.md").read_text(), re.S).group(1)
    rows = re.findall(r"<tr><td>.*?</tr>", table, re.S)
    assert len(rows) == len(data["claims"]) > 0
    for row, claim in zip(rows, data["claims"]):
        assert row.endswith(f"<td>{readme_tables.verdict_cell(claim['verdict'])}</td></tr>")
        assert f"<td>{claim['section'].lstrip('§')}</td>" in row
    # the full-size run of the default model, never the small configuration's
    assert data["recorded"]["commit"] and data["model_spec"] == "default" and data.get("small") is False


def _copy_results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    results.mkdir()
    for path in readme_tables.RESULTS.glob("*.json"):
        shutil.copy(path, results / path.name)
    return results


def test_a_changed_claims_recording_fails_the_check(tmp_path):
    """A verdict changed in the recording no longer matches README.md; a row that carries its rule's fields
    cannot be given a verdict its rule did not give."""
    from helpers.claims import RULE_FIELDS

    results = _copy_results(tmp_path)
    newest = max(results.glob("claims-default-*.json"), key=lambda p: p.name)
    data = json.loads(newest.read_text())
    first = data["claims"][0]
    flipped = "partly" if first["verdict"] != "partly" else "reproduced"
    first["verdict"] = flipped
    newest.write_text(json.dumps(data))
    if first.get("rule") is not None:
        with pytest.raises(ValueError, match=first["id"]):
            readme_tables.generated(results)
        for key in RULE_FIELDS:  # as a row recorded before rows carried their rule: shown as it is
            first.pop(key, None)
        newest.write_text(json.dumps(data))
    text = readme_tables.generated(results)[readme_tables.README]
    assert text != readme_tables.README.read_text(encoding="utf-8")
    assert f"<td>{readme_tables.verdict_cell(flipped)}</td></tr>" in text


def _recording(claims: list[dict]) -> dict:
    return {"model": "m", "claims": claims, "model_spec": "default", "small": False,
            "recorded": {"date": "2999-01-01", "commit": "abc", "command": "claims --json", "machine": {}}}


def _row(cid: str, verdict: str, **rule) -> dict:
    from helpers.claims import FIELDS, RULE_FIELDS

    row = dict.fromkeys((*FIELDS, *RULE_FIELDS))
    row.update(id=cid, section="§3.1", claim=f"claim {cid}", paper="p", ours="o", value=1.0, verdict=verdict, **rule)
    return row


def test_the_tally_counts_every_verdict_and_the_rows_carry_their_rules():
    """Rows with the convention's fields (an "inconclusive", a "not applicable" with its reason, a "reproduced" and
    a "partly" on their intervals): the sentence names all four verdicts, zeros included, then the one not
    applicable; each verdict cell has its colour's square. A row whose verdict does not follow from its fields is
    refused; an old row without them is shown as it is."""
    effect = dict(rule="effect", null=0.0, paper_level=10.0, resampled="segments", n=40)
    rows = [_row("a", "reproduced", estimate=12.0, interval=[11.0, 13.0], **effect),
            _row("b", "partly", estimate=5.0, interval=[1.0, 8.0], **effect),
            _row("c", "inconclusive", estimate=5.0, interval=[-1.0, 11.0], **effect),
            {**_row("d", "not applicable"), "reason": "[SEP] is no sink", "ours": "not applicable: [SEP] is no sink"},
            {k: v for k, v in _row("e", "reproduced").items() if k in ("id", "section", "claim", "paper", "ours",
                                                                         "value", "verdict")}]
    table = readme_tables.claims_table(_recording(rows))
    assert table.startswith("Of the paper's 5 claims tested on **m**: 2 reproduced, 1 partly, 1 inconclusive, "
                            "0 not reproduced, 1 not applicable.\n")
    for verdict in ("reproduced", "partly", "inconclusive", "not applicable"):
        assert f"<td>{readme_tables.VERDICT_MARKS[verdict]}&nbsp;{verdict}</td></tr>" in table
    assert len(set(readme_tables.VERDICT_MARKS.values())) == 5
    wrong = _row("f", "reproduced", estimate=5.0, interval=[-1.0, 11.0], **effect)  # holds the null: inconclusive
    with pytest.raises(ValueError, match="does not follow"):
        readme_tables.claims_table(_recording([*rows, wrong]))
    without = [r for r in rows if r["verdict"] != "not applicable"]
    assert "0 not reproduced." in readme_tables.claims_table(_recording(without))  # "not applicable" only where any


def test_a_newer_build_recording_fails_the_check(tmp_path):
    """A newer recorded build replaces the old one's row in benchmarks/README.md."""
    results = _copy_results(tmp_path)
    newest = readme_tables.common.recorded("book_build", "default", results)
    newer = {**newest, "seconds_cold_build": newest["seconds_cold_build"] + 60.0,
             "recorded": {**newest["recorded"], "date": "2999-01-01"}}
    (results / "book_build-default-2999-01-01.json").write_text(json.dumps(newer))
    text = readme_tables.generated(results)[readme_tables.BENCHMARKS_README]
    assert text != readme_tables.BENCHMARKS_README.read_text(encoding="utf-8")
    assert f"{newer['seconds_cold_build']:,.0f} s" in text and "2999-01-01" in text


def test_markers_must_be_there_once():
    with pytest.raises(ValueError, match="exactly one"):
        readme_tables.replace_between("no markers here", "claims", "x")
    assert readme_tables.replace_between("a <!-- t:start -->old<!-- t:end --> b", "t", "new") == (
        "a <!-- t:start -->\nnew\n<!-- t:end --> b")


def test_readme_is_short_and_its_lines_are_too():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.split()) <= MAX_WORDS
    long = [n for n, line in enumerate(text.splitlines(), 1) if len(line) > MAX_LINE]
    assert not long, f"README.md lines over {MAX_LINE} characters: {long}"


@pytest.mark.parametrize("name", ["README.md", "benchmarks/README.md", "docs/command_line.md", "docs/notebooks.md"])
def test_relative_links_lead_to_files(name):
    path = ROOT / name
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
        if not re.match(r"[a-z]+:", target):
            assert (path.parent / target).exists(), f"{name}: link to {target} leads nowhere"


DOCUMENTED_COMMANDS = ["README.md", "docs/command_line.md", "book/intro.md", "book/running_at_scale.md"]


def _command_options() -> dict[str, set[str]]:
    import argparse

    from helpers.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: {o for action in parser._actions for o in action.option_strings} for name, parser in sub.choices.items()}


@pytest.mark.parametrize("name", [n for n in DOCUMENTED_COMMANDS if (ROOT / n).exists()])
def test_documented_command_lines_use_real_commands_and_options(name):
    """Every ``python -m helpers COMMAND --option`` written in the docs names a command and options it has."""
    options = _command_options()
    wrong = []
    for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
        for command, rest in re.findall(r"-m helpers ([a-z][a-z-]*)([^`|]*)", line):
            if command not in options:
                wrong.append(f"unknown command {command!r}: {line.strip()}")
                continue
            for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest.split("#")[0]):
                if option not in options[command]:
                    wrong.append(f"{command} has no {option}: {line.strip()}")
    assert not wrong, f"{name}:\n" + "\n".join(wrong)


def test_the_builds_table_gives_the_caches_peak_where_it_was_recorded():
    """A recording since issue #42 has the analysis cache's peak during the build beside what the build left;
    an older one only what it left (its peak then, since nothing was removed)."""
    end = {"maps": 2e9, "probe_batches": 0, "results": 3e7, "models": 0, "total": 2.03e9}
    peak = {"maps": 2.5e9, "probe_batches": 1.2e9, "results": 3e7, "models": 0, "total": 3.6e9}
    assert readme_tables.cache_cell({"cache_bytes_cold_build": end}) == "2.0 GB (2.0 GB maps)"
    assert readme_tables.cache_cell({"cache_bytes_cold_build": end, "cache_peak_bytes_cold_build": peak}) == (
        "peak 3.6 GB (2.5 GB maps, 1.2 GB probe batches), end 2.0 GB")
    assert readme_tables.cache_cell({}) == "not recorded"


def test_rows_judged_again_on_the_measured_sink_are_verdicts_not_claims():
    """A not-applicable row that names its claim's row on the measured sink: the sentence counts the paper's claims
    apart from the verdicts, and the README shows only the reason's first clause for the row not applicable."""
    reason = ("[SEP] is not a sink of this model: it takes at most 0.02 of any layer's attention; the claim is judged "
              "on the measured sink instead (sink-x)")
    rows = [_row("sep-x", "not applicable", reason=reason), _row("sink-x", "not reproduced"),
            _row("other", "not applicable", reason="a decoder has no [SEP]")]
    from helpers.presentation.verdicts import tally_sentence

    assert tally_sentence(rows, "m") == ("Of the paper's 2 claims tested on m (3 verdicts: 1 judged again on the "
                                         "model's measured sink): 0 reproduced, 0 partly, 0 inconclusive, "
                                         "1 not reproduced, 2 not applicable.")
    assert tally_sentence(rows[1:], "m").startswith("Of the paper's 2 claims tested on m: ")
    assert readme_tables.ours_cell(rows[0]) == "[SEP] is not a sink of this model"
    assert readme_tables.ours_cell(rows[1]) == "o"

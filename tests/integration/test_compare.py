"""``python -m helpers compare``: the JSON layout, SPECs, and each model's numbers equal to the ``claims`` command's."""
import json
import shutil
from pathlib import Path

import pytest

from claim_rows import claim_as
from helpers.compare import run as cmp
from helpers.presentation import compare_view as view
from helpers.claims import INCONCLUSIVE, NOT_APPLICABLE, PARTLY, REPRODUCED, NOT_REPRODUCED, RULE_FIELDS, Claim, check_row
from helpers.cli import main
from helpers.context import RunContext

FIXTURES = Path(__file__).parents[1] / "fixtures"


def test_section_key():
    assert [cmp.section_key(s) for s in ("§3.1", "§3.4", "§4.2", "§4.3", "§5", "§6", "§3")] == \
        ["3", "3", "4.2", "4.3", "5", "6", "3"]
    with pytest.raises(ValueError, match="§7"):
        cmp.section_key("§7")


def test_specs(monkeypatch):
    assert cmp.parse_spec("default") == ("default", False)
    assert cmp.parse_spec(" random:/some/dir ") == ("/some/dir", True)
    assert cmp.parse_specs("default, random:default,default,") == ["default", "random:default"]
    with pytest.raises(ValueError, match="--models"):
        cmp.parse_specs(" , ")
    with pytest.raises(ValueError, match="random:"):
        cmp.parse_specs("default,random:")
    monkeypatch.setenv(cmp.COMPARE_ENV, "bert-base-uncased,random:bert-base-uncased")
    assert cmp.default_specs(RunContext.from_env()) == ["bert-base-uncased", "random:bert-base-uncased"]  # the entry's
    monkeypatch.delenv(cmp.COMPARE_ENV)
    monkeypatch.delenv("BERT_ATTENTION_MODEL", raising=False)

    def ctx(small):  # the entry point's context, read from the environment now
        return RunContext.from_env(small=small)

    monkeypatch.setattr(cmp, "installed_optional_specs", lambda cache_root=None: [])
    assert cmp.default_specs(ctx(False)) == ["default", "random:default"]  # an extra that is not installed is dropped
    monkeypatch.setattr(cmp, "installed_optional_specs", lambda cache_root=None: ["mpnet-base"])
    assert cmp.default_specs(ctx(False)) == ["default", "random:default", "mpnet-base"]
    assert cmp.default_specs(ctx(True)) == ["default", "random:default"]  # the test configuration stays small
    assert cmp.chapter_sizes("default", ctx(False)) == {} and cmp.chapter_sizes("default", ctx(True)) == {}
    assert cmp.chapter_sizes("random:default", ctx(True)) == cmp.SMALL_REDUCED_SIZES
    assert cmp.chapter_sizes("mpnet-base", ctx(False)) == cmp.REDUCED_SIZES
    monkeypatch.setenv("BERT_ATTENTION_MODEL", "mpnet-base")  # the book's model leads, at the chapters' sizes
    assert cmp.default_specs(ctx(False)) == ["mpnet-base", "random:mpnet-base", "default"]  # the offline default too
    assert cmp.default_specs(ctx(True)) == ["mpnet-base", "random:mpnet-base"]
    assert cmp.chapter_sizes("mpnet-base", ctx(False)) == {} and cmp.chapter_sizes("default", ctx(False)) != {}
    assert cmp.default_specs(RunContext(small=True)) == ["default", "random:default"]  # the context, not the environment


def _result(spec, random_init, verdicts):
    claims = [claim_as(cid, "§4.2", v) for cid, v in verdicts.items()]
    return cmp.ModelResult(spec, {"name": spec, "layers": 2, "heads": 2, "random_init": random_init}, claims)


def test_findings_group_by_pretrained_verdicts():
    """Only "reproduced" holds: a claim partly for one model is model-dependent, partly for both is reproduced by
    none (and counted as partly for each); a control whose "partly" rests on the same numbers as its model's (the
    difference's interval holds 0) reproduces the claim too (more in tests/unit/test_compare_findings.py)."""
    from helpers.compare.findings import findings

    a = _result("a", False, {"x": REPRODUCED, "y": REPRODUCED, "z": NOT_REPRODUCED, "w": PARTLY, "v": REPRODUCED})
    b = _result("b", False, {"x": PARTLY, "y": NOT_REPRODUCED, "z": NOT_REPRODUCED, "w": PARTLY, "v": REPRODUCED})
    r = _result("random:a", True, {"x": NOT_REPRODUCED, "y": NOT_REPRODUCED, "z": NOT_REPRODUCED, "w": PARTLY,
                                   "v": INCONCLUSIVE})
    got = findings([a, b, r])
    assert (got.shared, got.model_dependent, got.none) == (["v"], ["x", "y"], ["z", "w"])
    assert got.partly == {"a": ["w"], "b": ["x", "w"]} and got.inconclusive == {"a": [], "b": []}
    assert got.random_too == ["w"] and got.random_own_verdict == [] and got.random_learned == []
    assert cmp.id_list(["x", "w", "y"]) == "x, w and y" and cmp.id_list([]) == "none"


def test_compare_command_equals_claims(tiny_model_dir, toy_data, tmp_path):
    """compare on the tiny model and its random-init copy: the contract's layout, and each model's
    rows equal to ``claims`` run alone on the same inputs, each in a cache of its own (so every number is
    computed twice independently, never read back from the cache ``compare`` filled)."""
    data = toy_data
    sizes = ["--segments", "3", "--seeds", "2", "--epochs", "1", "--permutations", "20", "--max-length", "60"]
    common = ["--data-dir", str(data), "--quiet"]
    out = tmp_path / "compare.json"
    model = str(tiny_model_dir)
    specs = [model, "random:" + model]
    assert main(["compare", "--models", ",".join(specs), "--max-sentences", "100", *sizes, *common,
                 "--cache-dir", str(tmp_path / "c1"), "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert list(result) == ["models", "claims"]
    assert [list(m) for m in result["models"]] == [["spec", "name", "layers", "heads", "random_init"]] * 2
    assert [m["spec"] for m in result["models"]] == specs
    assert [m["random_init"] for m in result["models"]] == [False, True]
    assert all(m["layers"] == 2 and m["heads"] == 4 for m in result["models"])  # the tiny BERT's config
    for row in result["claims"]:
        assert list(row) == ["id", "section", "claim", "paper", "results"]
        assert row["section"] in cmp.SECTIONS and list(row["results"]) == specs
        for got in row["results"].values():
            assert list(got) == ["ours", "value", "verdict", *RULE_FIELDS]  # the contract, extended by the rule's fields
            assert got["verdict"] in (REPRODUCED, PARTLY, INCONCLUSIVE, NOT_REPRODUCED, NOT_APPLICABLE)
            assert got["value"] is None or isinstance(got["value"], float)  # the contract: float|null
            if got["rule"] is not None:  # a row judged by the convention: its verdict follows from the fields it carries
                check_row({"id": row["id"], "section": row["section"], "claim": row["claim"], "paper": row["paper"],
                           **got})
    assert [r["section"] for r in result["claims"]] == sorted((r["section"] for r in result["claims"]),
                                                              key=cmp.SECTIONS.index)

    # --max-sentences 100 reads ceil(100 / 25) = 4 coreference documents: say so to claims
    docs = str(cmp.coref_documents(100))
    for spec, extra, cache in ((model, [], "c2"), ("random:" + model, ["--random-init"], "c3")):  # caches of their own
        single = tmp_path / f"claims-{cache}.json"
        assert main(["claims", "--model", model, *extra, "--max-sentences", "100", "--max-documents", docs, *sizes,
                     *common, "--cache-dir", str(tmp_path / cache), "--json", str(single)]) == 0
        alone = json.loads(single.read_text())["claims"]
        assert [c["id"] for c in alone] == [r["id"] for r in result["claims"]]
        for c, row in zip(alone, result["claims"]):
            assert cmp.section_key(c["section"]) == row["section"] and c["paper"] == row["paper"]
            assert row["results"][spec] == {k: c[k] for k in ("ours", "value", "verdict", *RULE_FIELDS)}, c["id"]


def test_isolated_compare_equals_in_process(tiny_model_dir, toy_data, tmp_path):
    """The chapter's ``isolate=True`` (each model in a spawned child process): the same claims and depth
    profile as in-process (the random-init copy: its seed must reach the child too), with the child's wall time and peak memory filled in; an error in the child
    reaches the caller."""
    sizes = dict(n_segments=3, max_sentences=100, max_documents=4, seeds=(0,), epochs=1, n_perm=20, max_length=60)
    model = str(tiny_model_dir)
    a, b = (RunContext.from_env(data_dir=toy_data, cache_dir=tmp_path / name, small=False) for name in "ab")
    isolated = cmp.compare(["random:" + model], a, isolate=True, **sizes)
    local = cmp.compare(["random:" + model], b, **sizes)
    for got, want in zip(isolated, local):
        assert [c.to_json() for c in got.claims] == [c.to_json() for c in want.claims]
        assert got.depth == want.depth and got.card == want.card and got.sizes == want.sizes
        assert got.seconds > 0 and 0.05 < got.peak_rss_gib < 20
        assert want.seconds is None and want.peak_rss_gib is None  # measured only in a process of its own
    with pytest.raises(Exception, match="nothing-here"):
        cmp.compare([str(tmp_path / "nothing-here")], a, isolate=True, **sizes)


def test_compare_refuses_bad_specs(tmp_path, capsys):
    assert main(["compare", "--models", "default,random:", "--json", str(tmp_path / "o.json")]) == 2
    assert "--models" in capsys.readouterr().err
    assert main(["compare", "--models", str(tmp_path / "nothing-here"), "--model", "default"]) == 2
    assert "--models" in capsys.readouterr().err


def test_relative_depth_and_charts():
    """Layers are placed at (index + 1) / layers, so a 2-layer and a 4-layer model end at 1; the figures
    and the table build from the same results."""
    shallow = _result("a", False, {"det-head": REPRODUCED, "probe-attn-over-right-branching": PARTLY})
    deep = _result("b", True, {"det-head": NOT_REPRODUCED, "probe-attn-over-right-branching": PARTLY})
    shallow.depth = {"cls": [0.1, 0.2], "sep": [0.3, 0.4], "punct": [0.0, 0.1], "entropy": [2.0, 1.0], "uniform_entropy": 3.0}
    deep.depth = {k: [0.5] * 4 for k in ("cls", "sep", "punct", "entropy")}
    deep.card["name"] = "b (random init)"
    frame = view.depth_frame([shallow, deep])
    got = frame[frame["series"] == "[CLS]"].groupby("model")["relative_depth"].apply(list).to_dict()
    assert got == {"a": [0.5, 1.0], "b (random init)": [0.25, 0.5, 0.75, 1.0]}
    assert frame[(frame["model"] == "a") & (frame["series"] == "entropy")]["value"].tolist() == [2.0, 1.0]
    for chart in (view.depth_chart([shallow, deep]), view.depth_chart([shallow, deep], entropy=True),
                  view.value_chart([shallow, deep], ["det-head"], y_title="acc")):
        chart.to_dict()
    html = view.compare_html([shallow, deep])
    assert html.count("<tr>") == 3 and view.VERDICT_COLOURS[NOT_REPRODUCED] in html


def test_every_verdict_has_its_own_colour():
    """Five verdicts, five colours; the comparison's table colours an inconclusive cell with inconclusive's, and
    its legend names every verdict on its colour."""
    assert set(view.VERDICT_COLOURS) == {REPRODUCED, PARTLY, INCONCLUSIVE, NOT_REPRODUCED, NOT_APPLICABLE}
    assert len(set(view.VERDICT_COLOURS.values())) == 5
    a = _result("a", False, {"x": INCONCLUSIVE, "y": REPRODUCED})
    html = view.compare_html([a])
    assert f'<td style="background:{view.VERDICT_COLOURS[INCONCLUSIVE]}" title="o"><b>inconclusive</b>' in html
    legend = html[:html.index("<table")]
    assert all(f'background:{c};padding:0 0.4em">{v}</span>' in legend for v, c in view.VERDICT_COLOURS.items())


def test_cached_claims_follow_the_code_of_every_layer_they_run(tmp_path):
    """The cached claims' key is the code digest of :func:`helpers.results.all_claims` (its import closure): a
    changed rule in any layer under it (here §4.2's claims) changes the key; a changed comment does not."""
    import os
    import subprocess
    import sys

    import helpers.compare.run as run_mod

    def key(root: Path) -> str:
        code = "from helpers.digest import code_digest\nfrom helpers.results import all_claims\nprint(code_digest(all_claims))"
        done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(root)})
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    copy = tmp_path / "copy"
    shutil.copytree(Path(run_mod.__file__).resolve().parents[1], copy / "helpers",
                    ignore=shutil.ignore_patterns("__pycache__"))
    before = key(copy)
    rules = copy / "helpers" / "syntax" / "claims.py"
    rules.write_text(rules.read_text() + "\n# a comment on a rule\n")
    assert key(copy) == before
    rules.write_text(rules.read_text() + "\nA_CHANGED_RULE = 1\n")
    assert key(copy) != before


def test_a_decoder_joins_the_depth_figures_only(tmp_path, toy_data):
    """The comparison chapter's decoder (:func:`cmp.decoder_spec`): the one named by the context, else an installed
    smollm2 (none here), never the book's model again. Run with ``claims=False`` it has no claims and a depth profile
    equal to its §3 layer means, with no [SEP] line (absent, not zero), which the depth figures then leave out."""
    import dataclasses

    import tiny_decoders as td
    from helpers.results import section

    folder = str(td.save_llama(tmp_path / "llama"))
    ctx = RunContext.from_env(data_dir=toy_data, cache_dir=tmp_path / "cache", small=False)
    assert cmp.decoder_spec(dataclasses.replace(ctx, decoder=None)) is None  # nothing installed in this cache
    ctx = dataclasses.replace(ctx, decoder=folder)
    assert cmp.decoder_spec(ctx) == folder
    assert cmp.decoder_spec(dataclasses.replace(ctx, model=folder)) is None  # already the book's model
    (got,) = cmp.compare([folder], ctx, claims=False, n_segments=3, max_length=60)
    assert got.claims == [] and got.card["causal"] is True
    from helpers.core.models import load_model

    stats = section("surface").run(load_model(folder), ctx, n_segments=3, max_length=60).stats
    assert set(got.depth) == {"cls", "punct", "entropy", "uniform_entropy"}
    for key in ("cls", "punct", "entropy"):
        assert got.depth[key] == stats.layer_means(key).tolist()
    frame = view.depth_frame([got])
    assert set(frame["series"]) == {"[CLS]", ". or ,", "entropy"} and set(frame["relative_depth"]) == {0.5, 1.0}
    view.depth_chart([got]).to_dict()
    assert got.card["name"] in view.decoder_note(got) and "install-model smollm2" in view.decoder_note(None)

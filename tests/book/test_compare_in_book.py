"""The comparison command at the comparison chapter's CI sizes, on the analyses the small book's build cached."""
from __future__ import annotations

import json

import pytest

from helpers.claims import RULE_FIELDS
from helpers.cli import main
from helpers.compare import run as cmp

pytestmark = pytest.mark.book


def test_compare_ci_sized_on_the_real_corpora(shared_data, small_book, tmp_path):
    """``compare --models random:default`` on the real corpora and the offline default's random-init copy, at the
    sizes the comparison chapter gives a second model in the small configuration (:data:`SMALL_REDUCED_SIZES`), in
    the analysis cache of the small book's build (:func:`tests.book.conftest.small_book`, the default model): it reads
    the analyses the comparison chapter computed there for its random-init child. Its rows equal those of ``claims
    --random-init`` on the same inputs (read back from the same cache). The trained default is left out: no chapter
    reads it at these sizes, and ``test_compare_command_equals_claims`` (tests/integration/test_compare.py) checks a
    trained model's rows against ``claims`` computed apart."""
    reduced = cmp.SMALL_REDUCED_SIZES
    sizes = ["--segments", str(reduced["n_segments"]), "--max-sentences", str(reduced["max_sentences"]),
             "--max-documents", str(reduced["max_documents"]), "--epochs", str(reduced["epochs"]),
             "--cache-dir", str(small_book.parents[1] / "cache")]
    out = tmp_path / "compare.json"
    assert main(["compare", "--models", "random:default", *sizes, "--quiet", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [(m["spec"], m["random_init"]) for m in result["models"]] == [("random:default", True)]
    for spec, extra in (("random:default", ["--random-init"]),):
        single = tmp_path / f"claims-{spec.replace(':', '-')}.json"
        assert main(["claims", "--model", "default", *extra, *sizes, "--quiet", "--json", str(single)]) == 0
        alone = json.loads(single.read_text())["claims"]
        assert [c["id"] for c in alone] == [r["id"] for r in result["claims"]]
        for c, row in zip(alone, result["claims"]):
            assert row["results"][spec] == {k: c[k] for k in ("ours", "value", "verdict", *RULE_FIELDS)}, c["id"]

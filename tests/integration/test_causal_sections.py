"""Every section's command on a tiny decoder (GPT-2 with BOS, GQA Llama with and without BOS) on the toy corpora:
each runs, writes its JSON with the causal mark (the mask and the section's definition under it, said once on the
record), leaves out what a causal map does not have (with the reason), and ``claims`` says "not applicable" with
a reason where a claim cannot apply. An encoder's JSON has no such mark."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from helpers.claims import NOT_APPLICABLE, VERDICTS
from helpers.cli import main
from helpers.results import SECTIONS
from helpers.section import CAUSAL_MASK

import tiny_decoders as td
from tolerances import decimals

SIZES = {"segments": ["--segments", "3", "--max-length", "60"], "words": ["--max-length", "60"]}
COMMANDS = {  # each section's command at toy sizes
    "surface": ["surface", *SIZES["segments"]],
    "heads": ["heads", "--conllu", "gum:test", *SIZES["words"]],
    "coref": ["coref", "--max-documents", "1", *SIZES["words"]],
    "probe": ["probe", "--seeds", "1", "--epochs", "1", *SIZES["words"]],
    "cluster": ["cluster", "--permutations", "20", *SIZES["segments"]],
    "norms": ["norms", *SIZES["segments"]],
    "sinks": ["sinks", *SIZES["segments"]],
}
NOT_APPLICABLE_CLAIMS = {"next-token-heads", "sep-attention-middle-layers", "sep-self-attention",
                         "cls-broad-last-layer", "sep-gradient-small", "sink-self-attention"}
# judged on the measured sink, a decoder's first position, where it is a sink of the model (a premise, not a mask)
PREMISED_CLAIMS = {"sink-gradient-small"}


@pytest.fixture(scope="module")
def decoder_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("causal-decoders")
    return {"gpt2": td.save_gpt2(root / "gpt2"), "llama": td.save_llama(root / "llama")}


def _run(argv, out, cache) -> dict:
    rc = main([*argv, "--quiet", "--json", str(out), "--cache-dir", str(cache)])
    assert rc == 0, argv
    return json.loads(out.read_text())


def _mark_of(key: str) -> dict:
    return next(s for s in SECTIONS if s.key == key).causal


@pytest.mark.parametrize("kind,no_bos", [("llama", False), ("gpt2", False), ("llama", True)])
def test_every_section_command_runs_on_a_decoder(decoder_dirs, toy_data, tmp_path, kind, no_bos):
    common = ["--model", str(decoder_dirs[kind]), "--data-dir", str(toy_data), *(["--no-bos"] if no_bos else [])]
    keys = {"surface": "surface", "heads": "syntax", "coref": "coref", "probe": "probe", "cluster": "cluster",
            "norms": "norms", "sinks": "sinks"}
    outs = {}
    for name, argv in COMMANDS.items():
        out = _run([*argv, *common], tmp_path / f"{name}.json", tmp_path / "c")
        mark = out["causal"]
        if name == "sinks":  # its fixed layout's own "causal" (a contract): whether the model is causal
            assert mark is True and out["bos"] is (not no_bos)
            outs[name] = out
            continue
        assert mark == {"mask": CAUSAL_MASK, "bos": not no_bos, "definition": _mark_of(keys[name])}, name
        assert mark["definition"], f"{keys[name]}: no definition under a causal mask"
        outs[name] = out
    surface = outs["surface"]
    absent = {"sep", "sep_sep", "rest_sep", "next", "entropy_cls", "cls_cls"}
    assert set(surface["undefined"]) == absent and all(surface["undefined"].values())
    assert absent.isdisjoint(surface["per_head"]) and absent.isdisjoint(surface["layer_means"])
    assert surface["next_heads"] is None and isinstance(surface["prev_heads"], list)
    assert surface["gradients"]["sep"] is None and len(surface["gradients"]["cls"]) == len(surface["per_head"]["cls"])
    assert "language-model head" in surface["mlm_head"]["source"] and "heldout_loss" not in surface["mlm_head"]
    assert not list((tmp_path / "c" / "artifacts").glob("mlm-head-*"))  # nothing fitted
    # the uniform entropy of the visible prefix is below log n of the longest segment, above 0
    assert 0 < surface["uniform_entropy"] < np.log(surface["segments"]["max_length"])
    assert "sep" not in outs["norms"]["layers"]["1"]["weights"] and "sep" in outs["norms"]["undefined"]
    # §3's attention to the first position is Gu et al.'s alpha_1 of the sinks command, on the same segments
    sinks = _run(["sinks", *SIZES["segments"], *common], tmp_path / "sinks.json", tmp_path / "c")
    np.testing.assert_allclose(surface["per_head"]["cls"], sinks["first_token_share"], rtol=0, atol=2 * decimals(6))
    assert outs["heads"]["relations"]["all"]["count"] > 0


def test_claims_on_a_decoder_are_not_applicable_where_due(decoder_dirs, toy_data, tmp_path):
    out = _run(["claims", "--model", str(decoder_dirs["llama"]), "--data-dir", str(toy_data), "--segments", "3",
                "--max-sentences", "100", "--max-documents", "1", "--seeds", "1", "--epochs", "1", "--permutations", "20",
                "--max-length", "60"], tmp_path / "claims.json", tmp_path / "c")
    verdicts = {c["id"]: c for c in out["claims"]}
    for cid, claim in verdicts.items():
        if cid in NOT_APPLICABLE_CLAIMS:
            assert claim["verdict"] == NOT_APPLICABLE and claim["reason"] and claim["value"] is None, cid
            assert claim["reason"] in claim["ours"]
        elif cid in PREMISED_CLAIMS and claim["verdict"] == NOT_APPLICABLE:
            assert "the first position is not a sink of this model" in claim["reason"], cid
        elif cid.endswith("-head") and claim["verdict"] == NOT_APPLICABLE:
            # the toy corpus lacks some relations: a relation's head claim has no words to be judged on
            assert re.fullmatch(r"no \S+ word evaluated on both GUM dev and GUM test", claim["reason"]), cid
        else:
            assert claim["verdict"] in VERDICTS and "reason" not in claim, cid
    assert NOT_APPLICABLE_CLAIMS <= set(verdicts)
    assert set(out["causal"]) == {s.key for s in SECTIONS if s.in_paper}
    assert all(m["mask"] == CAUSAL_MASK and m["definition"] for m in out["causal"].values())


def test_an_encoders_json_has_no_causal_mark(tiny_model_dir, toy_data, tmp_path):
    common = ["--model", str(tiny_model_dir), "--data-dir", str(toy_data)]
    surface = _run([*COMMANDS["surface"], "--no-gradients", *common], tmp_path / "s.json", tmp_path / "c")
    heads = _run([*COMMANDS["heads"], *common], tmp_path / "h.json", tmp_path / "c")
    norms = _run([*COMMANDS["norms"], *common], tmp_path / "n.json", tmp_path / "c")
    assert "causal" not in surface and "undefined" not in surface and "causal" not in heads
    assert "causal" not in norms and "undefined" not in norms and "sep" in norms["layers"]["1"]["weights"]
    assert {"sep", "next", "entropy_cls"} <= set(surface["per_head"]) and isinstance(surface["next_heads"], list)

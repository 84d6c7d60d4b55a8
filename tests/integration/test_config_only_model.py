"""The case of issue 51 end to end: ``probe --random-init all`` on a folder with a config and a tokenizer but no
weights (here a tiny Llama's, in bfloat16) ran for minutes and then stopped at its control ("no weights file")."""
from __future__ import annotations

import json
import shutil

import tiny_decoders as td


def test_probes_of_a_config_only_decoder_all_random_in_bfloat16(toy_data, tmp_path):
    """The probes' control of an all-random model is all-random too: it needs no weights, and the run finishes."""
    from helpers.cli import main

    folder = tmp_path / "no-weights"
    shutil.copytree(td.save_llama(tmp_path / "llama"), folder,
                    ignore=lambda _, names: [n for n in names if n.startswith(("model.", "generation_config"))])
    out = tmp_path / "probe.json"
    code = main(["probe", "--seeds", "1", "--epochs", "1", "--max-length", "60", "--model", str(folder),
                 "--random-init", "all", "--dtype", "bfloat16", "--data-dir", str(toy_data), "--quiet",
                 "--json", str(out), "--cache-dir", str(tmp_path / "c")])
    assert code == 0
    report = json.loads(out.read_text())
    assert report["model"].endswith("(random init of all weights, seed 0; bfloat16 weights)")

"""Bad input and faults (issue 18): every case gives one line naming the file, line or argument,
exit status 2, before any model loads, and loses nothing already computed."""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import helpers.data.cache as cache_mod
import helpers.cli as cli
from helpers.data.files import strict_dumps, write_text
import helpers.core.models as models_mod
from helpers.pipeline.argtypes import IntRange
from helpers.data.cache import cache_entries, cached_json
from helpers.pipeline.extraction import extract
from helpers.cli import build_parser, main
from helpers.data.conllu_io import ConllError, read_conllu, tree_problem
from helpers.core.encoding import encode_words
from tolerances import round_off

ROOT = Path(__file__).resolve().parents[2]

GOOD = """# sent_id = s1
# text = The cat sat on the mat.
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_
4\ton\ton\tADP\tIN\t_\t6\tcase\t_\t_
5\tthe\tthe\tDET\tDT\t_\t6\tdet\t_\t_
6\tmat\tmat\tNOUN\tNN\t_\t3\tobl\t_\t_
7\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

"""
SECOND = """# sent_id = s2
1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_

"""


def _line(text: str, word: int) -> str:
    return next(l for l in text.splitlines() if l.startswith(f"{word}\t"))


def _set_head(text: str, word: int, head: int, deprel: str | None = None) -> str:
    cols = _line(text, word).split("\t")
    cols[6] = str(head)
    if deprel:
        cols[7] = deprel
    return text.replace(_line(text, word), "\t".join(cols))


@pytest.fixture
def no_model(monkeypatch):
    """Fail the test if any model is loaded: input errors must come first."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr(models_mod, "load_model", refuse)


def _one_line_error(capsys, *fragments: str) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


# ------------------------------------------------------------------------------- 1. trees

NOT_TREES = {
    # words 3 -> 6 and 6 -> 4 -> 6: a HEAD cycle and no root (word 3 keeps its label "root")
    "cycle without root": (_set_head(_set_head(GOOD, 3, 6), 6, 4), ["HEAD cycle", "6 -> 4 -> 6", "no word has HEAD 0"]),
    "own head": (_set_head(GOOD, 5, 5), ["word 5 is its own HEAD"]),
    "two roots": (_set_head(GOOD, 7, 0, "root"), ["words 3, 7", "one root"]),
    "cycle beside the root": (_set_head(_set_head(GOOD, 4, 5), 5, 4), ["4 -> 5 -> 4"]),
    "root label off the root": (_set_head(GOOD, 7, 3, "root"), ["word 7 has DEPREL 'root' but HEAD 3"]),
}


@pytest.mark.parametrize("case", sorted(NOT_TREES))
def test_not_a_tree_is_rejected_naming_the_sentence(tmp_path, case):
    body, fragments = NOT_TREES[case]
    path = tmp_path / "t.conllu"
    path.write_text(GOOD.replace("s1", "s0") + body.replace("s1", "bad"), encoding="utf-8")
    with pytest.raises(ConllError) as err:
        read_conllu(path)
    first_line = len(GOOD.splitlines()) + 1  # the bad sentence's first line
    assert str(err.value).startswith(f"{path}:{first_line}: sentence bad is not a tree: ")
    for fragment in fragments:
        assert fragment in str(err.value)


def test_tree_problem_against_brute_force():
    """Every HEAD assignment of up to 4 words: accepted exactly when one root reaches every word."""
    import itertools

    def is_tree(heads):
        if sum(h == 0 for h in heads) != 1:
            return False
        for w in range(1, len(heads) + 1):
            seen, x = set(), w
            while x != 0:
                if x in seen:
                    return False
                seen.add(x)
                x = heads[x - 1]
        return True

    for n in range(1, 5):
        for heads in itertools.product(range(n + 1), repeat=n):
            assert (tree_problem(list(heads)) is None) == is_tree(heads), heads


def test_cli_rejects_a_cycle_before_loading_the_model(tmp_path, capsys, no_model):
    bad = tmp_path / "cycle.conllu"
    bad.write_text(NOT_TREES["cycle without root"][0], encoding="utf-8")
    assert main(["heads", "--conllu", str(bad), "--quiet", "--cache-dir", str(tmp_path / "c")]) == 2
    _one_line_error(capsys, f"{bad}:1:", "HEAD cycle")


# --------------------------------------------------------------------- 2. encoding, BOM, dirs


def test_non_utf8_byte_names_file_line_and_column(tmp_path, capsys, no_model):
    bad = tmp_path / "latin1.conllu"
    bad.write_bytes((GOOD + SECOND.replace("dog", "d\u00f6g")).encode("latin-1"))
    with pytest.raises(ConllError, match=rf"{bad}:13: not UTF-8 \(byte 0xf6 at column 4\)"):
        read_conllu(bad)
    assert main(["extract", "--conllu", str(bad), "--quiet", "--cache-dir", str(tmp_path / "c")]) == 2
    _one_line_error(capsys, f"{bad}:13:", "0xf6")


def test_byte_order_mark_is_accepted(tmp_path):
    plain, bom = tmp_path / "plain.conllu", tmp_path / "bom.conllu"
    plain.write_text(GOOD + SECOND, encoding="utf-8")
    bom.write_text(GOOD + SECOND, encoding="utf-8-sig")
    assert bom.read_bytes()[:3] == b"\xef\xbb\xbf"
    a, b = read_conllu(plain), read_conllu(bom)
    assert [(s.words, s.heads, s.sent_id, s.line) for s in a] == [(s.words, s.heads, s.sent_id, s.line) for s in b]


def test_directory_as_conllu(tmp_path, capsys, no_model):
    folder = tmp_path / "trees.conllu"
    folder.mkdir()
    assert main(["heads", "--conllu", str(folder), "--cache-dir", str(tmp_path / "c")]) == 2
    _one_line_error(capsys, str(folder), "is a directory")


# ------------------------------------------------------------------------------ 3. devices


@pytest.mark.parametrize("spec, fragment", [("tpu9", "is not a torch device"), ("meta", "not supported"),
                                            ("cuda", "CUDA is not available")])
def test_bad_device_is_refused_before_anything_loads(tmp_path, capsys, no_model, monkeypatch, spec, fragment):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["extract", "--conllu", str(tmp_path / "missing.conllu"), "--device", spec]) == 2
    _one_line_error(capsys, "--device", fragment)


def test_cuda_index_past_the_devices(capsys, no_model, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert main(["info", "--device", "cuda:3"]) == 2
    _one_line_error(capsys, "--device", "1 CUDA device")


# ------------------------------------------------------------------------------ 4. --json


def _read_only_dir(tmp_path) -> Path:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        (folder / "x").write_text("")
    except OSError:
        return folder
    (folder / "x").unlink()  # root ignores modes: use a read-only file system instead
    for candidate in (Path("/sys"), Path("/proc/self")):
        try:
            (candidate / "bert-attention-write-test").write_text("")
        except OSError:
            return candidate
    pytest.skip("no read-only place on this machine")


@pytest.mark.parametrize("where", ["directory", "under a file", "read-only"])
def test_unwritable_json_is_refused_before_the_work(tmp_path, toy_conllu, capsys, no_model, where):
    (tmp_path / "file").write_text("")
    target = {"directory": tmp_path, "under a file": tmp_path / "file" / "out.json",
              "read-only": _read_only_dir(tmp_path) / "out.json"}[where]
    assert main(["extract", "--conllu", str(toy_conllu), "--json", str(target), "--cache-dir", str(tmp_path / "c")]) == 2
    _one_line_error(capsys, f"--json {target}")


def test_result_is_kept_in_the_cache_when_json_cannot_be_written(tmp_path, capsys, monkeypatch):
    cache = tmp_path / "c"
    assert main(["info", "--no-model", "--data-dir", str(tmp_path), "--cache-dir", str(cache)]) == 0
    expected = json.loads(capsys.readouterr().out)
    target = tmp_path / "gone" / "out.json"
    (tmp_path / "gone").write_text("")  # the folder became a file after the check passed
    monkeypatch.setattr(cli, "check_output_path", lambda *a, **k: None)
    assert main(["info", "--no-model", "--data-dir", str(tmp_path), "--cache-dir", str(cache), "--json", str(target)]) == 2
    err = _one_line_error(capsys, f"cannot write --json {target}", "the result was saved to ")
    saved = Path(err.rsplit("saved to ", 1)[1])
    assert saved.parent == cache / "results" and saved.name.startswith("info-")
    assert json.loads(saved.read_text()) == expected


# -------------------------------------------------------------------- 5. numeric options, NaN


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _numeric_options() -> list[tuple[str, argparse.Action]]:
    return [(name, action) for name, p in _commands().items() for action in p._actions
            if action.type in (int, float) or isinstance(action.type, IntRange)]


def _bad_values(kind: IntRange) -> list[str]:
    values = ["abc", "", str(kind.minimum - 1)]
    if kind.maximum is not None:
        values.append(str(kind.maximum + 1))
    return values + ["1.5"]


def _required(parser: argparse.ArgumentParser) -> list[str]:
    """Valid values for a command's required options and positional arguments."""
    out = []
    for a in parser._actions:
        if a.required:
            value = sorted(a.choices)[0] if a.choices else "x"
            out += [a.option_strings[0], value] if a.option_strings else [value]
    return out


NUMERIC = _numeric_options()
CASES = [(name, action.option_strings[0], value) for name, action in NUMERIC
         if isinstance(action.type, IntRange) for value in _bad_values(action.type)]


def test_every_numeric_option_has_a_range():
    assert len(NUMERIC) >= 15  # seed in every command, counts and lengths
    bare = [f"{name} {action.option_strings[0]}" for name, action in NUMERIC if action.type in (int, float)]
    assert not bare, f"use helpers.pipeline.argtypes.IntRange (or a checking type) for {bare}"
    for name, action in NUMERIC:  # defaults are in range, and so is the smallest allowed value
        kind = action.type
        if action.default is not None:
            assert kind.minimum <= action.default <= (kind.maximum or math.inf), (name, action.dest)
        parser = _commands()[name]
        args = parser.parse_args([action.option_strings[0], str(kind.minimum), *_required(parser)])
        assert getattr(args, action.dest) == kind.minimum


@pytest.mark.parametrize("command, option, value", CASES)
def test_bad_numeric_value_is_one_line_exit_2(command, option, value, capsys, no_model):
    required = _required(_commands()[command])
    assert main([command, f"{option}={value}", *required]) == 2
    _one_line_error(capsys, f"argument {option}")


@pytest.mark.parametrize("argv", [["probe", "--epochs", "0"], ["probe", "--seeds", "0"],
                                  ["cluster", "--permutations", "-1"]])
def test_the_reported_cases(argv, capsys, no_model):
    assert main(argv) == 2
    _one_line_error(capsys, f"argument {argv[1]}: must be at least 1")


def test_writer_refuses_nan(tmp_path):
    out = tmp_path / "r.json"
    with pytest.raises(ValueError, match=r"nan at rows\.Attn\.runs\[1\]"):
        write_text(out, strict_dumps({"rows": {"Attn": {"runs": [1.0, float("nan")]}}}))
    with pytest.raises(ValueError, match="inf at x"):
        write_text(out, strict_dumps({"x": float("inf")}))
    assert not out.exists() and not list(tmp_path.iterdir())


def test_cache_never_stores_nan(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"mean": float("nan")}

    with pytest.raises(ValueError, match="nan at value.mean"):
        cached_json("t", {"k": 1}, compute, cache_root=tmp_path)
    assert not list((tmp_path / "artifacts").glob("*.json"))
    # a file holding NaN (written by an older version) is recomputed, not returned
    path = cache_mod.artifact_path("t", {"k": 2}, ".json", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text('{"key": {"k": 2}, "value": {"mean": NaN}}')
    assert cached_json("t", {"k": 2}, lambda: {"mean": 1.5}, cache_root=tmp_path) == {"mean": 1.5}
    assert json.loads(path.read_text())["value"] == {"mean": 1.5}


def test_undefined_numbers_in_a_result_are_null(tmp_path, monkeypatch, capsys):
    def nan_command(args):
        return {"accuracy": {"all": 50.0, "proper": float("nan")}, "per_head": [[1.0, float("nan")]]}

    monkeypatch.setattr(cli, "COMMANDS", tuple(dataclasses.replace(c, handler=nan_command) if c.name == "info" else c
                                              for c in cli.COMMANDS))
    out = tmp_path / "r.json"
    assert main(["info", "--json", str(out)]) == 0
    text = out.read_text()
    assert "NaN" not in text
    assert json.loads(text) == {"accuracy": {"all": 50.0, "proper": None}, "per_head": [[1.0, None]]}


# ------------------------------------------------------------------------------------ 6. cache

SENTS = [["the", "cat", "sat"] * k for k in range(1, 7)]


@pytest.fixture
def batch(tiny_lm):
    return encode_words(tiny_lm.tokenizer, SENTS)


@pytest.mark.parametrize("damage", ["garbage", "not an object", "truncated", "deleted"])
def test_damaged_meta_is_repaired(tiny_lm, batch, tmp_path, damage):
    store = extract(tiny_lm, batch, cache_root=tmp_path, shard_size=2, progress=False)
    meta_path = store.directory / "meta.json"
    good = json.loads(meta_path.read_text())
    if damage == "garbage":
        meta_path.write_bytes(b"\x00\xff{")
    elif damage == "not an object":
        meta_path.write_text("[1, 2]")
    elif damage == "truncated":
        meta_path.write_text(meta_path.read_text()[:40])
    else:
        meta_path.unlink()
    again = extract(tiny_lm, batch, cache_root=tmp_path, shard_size=2, progress=False)
    assert again.stats["shards_computed"] == 0  # the shards were fine
    assert json.loads(meta_path.read_text()) == good


def test_meta_is_complete_after_a_damaged_shard_is_redone(tiny_lm, batch, tmp_path):
    store = extract(tiny_lm, batch, cache_root=tmp_path, shard_size=2, progress=False)
    (store.directory / "shard-00001.npz").write_bytes(b"garbage")
    again = extract(tiny_lm, batch, cache_root=tmp_path, shard_size=2, progress=False)
    assert again.stats["shards_computed"] == 1
    assert json.loads((store.directory / "meta.json").read_text())["complete"] is True


def test_cache_deleted_during_a_run_is_completed(tiny_lm, batch, tmp_path, monkeypatch):
    import shutil

    reference = {ex.index: a for ex, a in extract(tiny_lm, batch, cache_root=tmp_path / "ref", shard_size=2,
                                                  progress=False)}
    import helpers.pipeline.shards as shards

    real, calls = shards.iter_map_batches, {"n": 0}  # a shard's passes (the shard task, extract's and the route's)

    def clearing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # someone clears the cache while shard 1 is being computed
            shutil.rmtree(tmp_path / "c")
        return real(*args, **kwargs)

    monkeypatch.setattr(shards, "iter_map_batches", clearing)
    store = extract(tiny_lm, batch, cache_root=tmp_path / "c", shard_size=2, progress=False)
    meta = json.loads((store.directory / "meta.json").read_text())
    assert meta["complete"] and all((store.directory / f"shard-{k:05d}.npz").is_file() for k in range(meta["shards"]))
    got = {ex.index: a for ex, a in store}
    assert sorted(got) == sorted(reference)
    for i in reference:
        np.testing.assert_array_equal(got[i], reference[i])


def test_tmp_left_by_a_killed_writer_is_removed_and_not_counted(tiny_lm, batch, tmp_path):
    store = extract(tiny_lm, batch, cache_root=tmp_path, shard_size=2, progress=False)
    bytes_before = cache_entries(tmp_path)[0]["bytes"]
    # a writer killed with SIGKILL in the middle of writing a shard into this directory
    code = ("import sys, time; from pathlib import Path; from helpers.data.files import atomic_write\n"
            "def slow(h):\n h.write(b'x' * 1000); h.flush(); print('writing', flush=True); time.sleep(60)\n"
            "atomic_write(Path(sys.argv[1]), slow)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen([sys.executable, "-c", code, str(store.directory / "shard-00001.npz")],
                              stdout=subprocess.PIPE, env=env, text=True)
    assert writer.stdout.readline().strip() == "writing"
    live = list(store.directory.glob("*.tmp"))
    assert len(live) == 1
    assert cache_mod.remove_stale_tmp(store.directory) == 0 and live[0].exists()  # a live writer's file stays
    writer.kill()
    writer.wait()
    assert live[0].exists()
    assert cache_entries(tmp_path)[0]["bytes"] == bytes_before  # not counted
    again = extract(tiny_lm, batch, cache_root=tmp_path, shard_size=2, progress=False)
    assert again.stats["shards_computed"] == 0 and not list(store.directory.glob("*.tmp"))
    # info removes them too, in every cache folder
    old = store.directory / "shard-00000.npz.deadbeef-1.abc.tmp"  # another machine's, an hour old
    old.write_bytes(b"x")
    os.utime(old, (time.time() - 7200,) * 2)
    cache_entries(tmp_path, remove_stale=True)
    assert not old.exists()


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_files_follow_the_umask(tiny_lm, batch, tmp_path, umask):
    previous = os.umask(umask)
    try:
        store = extract(tiny_lm, batch, cache_root=tmp_path, shard_size=2, progress=False)
        write_text(tmp_path / "out.json", strict_dumps({"a": 1}))
        cached_json("t", {"k": 1}, lambda: {"a": 1}, cache_root=tmp_path)
    finally:
        os.umask(previous)
    files = [tmp_path / "out.json", store.directory / "meta.json", *store.directory.glob("*.npz"),
             *(tmp_path / "artifacts").glob("*.json")]
    assert len(files) >= 5
    for path in files:
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path


# ------------------------------------------------------------------------ 7. inputs come first


def test_probe_input_errors_come_before_the_model(fake_data, tmp_path, capsys, no_model):
    assert main(["probe", "--data-dir", str(tmp_path / "nowhere"), "--quiet"]) == 2
    _one_line_error(capsys, "--data-dir")
    bad = fake_data / "gum" / "dep" / "GUM_b.conllu"
    bad.write_text(NOT_TREES["own head"][0], encoding="utf-8")
    (fake_data / "ud-english-ewt").mkdir()
    (fake_data / "ud-english-ewt" / "en_ewt-ud-dev.conllu").write_text(GOOD, encoding="utf-8")
    assert main(["probe", "--data-dir", str(fake_data), "--quiet", "--cache-dir", str(tmp_path / "c")]) == 2
    _one_line_error(capsys, f"{bad}:1:", "its own HEAD")


def test_glove_and_model_directory_are_checked_first(tmp_path, capsys, no_model, toy_conllu):
    assert main(["probe", "--glove", str(tmp_path / "none.txt")]) == 2
    _one_line_error(capsys, "--glove")
    empty = tmp_path / "model"
    empty.mkdir()
    assert main(["extract", "--conllu", str(toy_conllu), "--model", str(empty)]) == 2
    _one_line_error(capsys, "config.json")


def test_cache_dir_that_is_a_file(tmp_path, capsys, no_model, toy_conllu):
    (tmp_path / "c").write_text("")
    assert main(["extract", "--conllu", str(toy_conllu), "--cache-dir", str(tmp_path / "c")]) == 2
    _one_line_error(capsys, "--cache-dir", "is a file")


# ================================================================ issue 27: the third round
# Each test below failed on the code before the fix (checked by running this file against that commit).

def _toy_gum(root: Path, *, sentences: int = 40) -> Path:
    """A data folder whose one GUM train document is long enough for segments of about 100 tokens."""
    dep = root / "gum" / "dep"
    dep.mkdir(parents=True)
    text = (ROOT / "tests" / "fixtures" / "toy.conllu").read_text(encoding="utf-8")
    blocks = [b for b in text.split("\n\n") if b.strip()]
    doc = "\n\n".join(blocks[k % len(blocks)].replace("toy-", f"toy{k}-") for k in range(sentences)) + "\n\n"
    (dep / "GUM_long.conllu").write_text(doc, encoding="utf-8")
    (dep / "GUM_dev.conllu").write_text(text, encoding="utf-8")
    (root / "gum" / "splits.md").write_text("## dev\n\n  * GUM_dev\n\n## test\n\n## test2\n\n")
    return root


# 1. --max-length above the model's positions, on commands that build segments (the tiny model has 64)

@pytest.mark.parametrize("command", [["surface", "--no-gradients"], ["norms"], ["extract", "--corpus", "segments"],
                                     ["cluster", "--no-linguistic", "--permutations", "2"], ["segments"]])
def test_segments_longer_than_the_model_takes_are_refused(command, tiny_model_dir, tmp_path, capsys):
    data = _toy_gum(tmp_path / "data")
    rc = main([*command, "--model", str(tiny_model_dir), "--data-dir", str(data), "--segments", "5",
               "--max-length", "100", "--quiet", "--cache-dir", str(tmp_path / "c")])
    assert rc == 2
    _one_line_error(capsys, "--max-length 100", "limit of 64 positions")


# 2. damaged model folders: the folder and what is wrong with it, never "not in the Hugging Face cache"

class _Payload:
    """Unpickling this would create a file: a pickle that ran code would leave it behind."""

    def __init__(self, mark: Path):
        self.mark = mark

    def __reduce__(self):
        return (Path.touch, (self.mark,))


def _damage_model(folder: Path, damage: str) -> None:
    weights = folder / "model.safetensors"
    if damage == "random bytes":
        weights.write_bytes(np.random.default_rng(0).bytes(4096))
    elif damage == "truncated weights":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif damage == "pickle only":
        import torch

        weights.unlink()
        torch.save({"embeddings.word_embeddings.weight": _Payload(folder / "pickle-ran")}, folder / "pytorch_model.bin")
    elif damage == "invalid config":
        (folder / "config.json").write_text("{not json")
    elif damage == "config not an object":
        (folder / "config.json").write_text("[1, 2]")
    elif damage == "no weights":
        weights.unlink()
    elif damage == "no tokenizer":
        for path in folder.iterdir():
            if "token" in path.name or "vocab" in path.name or "special" in path.name:
                path.unlink()


MODEL_DAMAGE = {"random bytes": "model.safetensors", "truncated weights": "truncated",
                "pickle only": "pytorch_model.bin", "invalid config": "config.json is not valid JSON",
                "config not an object": "config.json holds a JSON list", "no weights": "no weights file",
                "no tokenizer": "no tokenizer files"}


@pytest.mark.parametrize("damage", sorted(MODEL_DAMAGE))
def test_damaged_model_folder_is_named_with_what_is_wrong(damage, tiny_model_dir, toy_conllu, tmp_path, capsys):
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    _damage_model(folder, damage)
    rc = main(["extract", "--conllu", str(toy_conllu), "--model", str(folder), "--max-length", "32", "--quiet",
               "--cache-dir", str(tmp_path / "c")])
    assert rc == 2
    err = _one_line_error(capsys, str(folder), MODEL_DAMAGE[damage])
    assert "Hugging Face cache" not in err
    assert not (folder / "pickle-ran").exists()  # the pickled payload never ran


def test_damaged_model_folder_is_named_by_load_model(tiny_model_dir, tmp_path):
    import shutil

    from helpers.core.errors import ModelNotAvailableError

    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    _damage_model(folder, "random bytes")
    with pytest.raises(ModelNotAvailableError, match="model.safetensors"):
        models_mod.load_model(str(folder))


# 3. compare: every SPEC is checked before the first model's analysis

@pytest.mark.parametrize("bad, fragment", [("random:/no/such/dir", "no such folder"),
                                           ("nobody/nothing", "not in the local Hugging Face cache"),
                                           ("./relative/missing", "no such folder")])
def test_compare_checks_every_spec_before_any_analysis(bad, fragment, tiny_model_dir, tmp_path, capsys, no_model):
    rc = main(["compare", "--models", f"{tiny_model_dir},{bad}", "--max-length", "60", "--quiet",
               "--cache-dir", str(tmp_path / "c")])
    assert rc == 2
    _one_line_error(capsys, "--models", fragment)


def test_a_missing_path_is_not_taken_for_a_hub_name(capsys, toy_conllu, no_model):
    assert main(["extract", "--conllu", str(toy_conllu), "--model", "/no/such/dir"]) == 2
    _one_line_error(capsys, "--model /no/such/dir", "no such folder")


# 4. the parsed-treebank cache: damaged or foreign entries are parsed again

def _parsed_entry(cache: Path) -> Path:
    (entry,) = (cache / "parsed").glob("*.json")
    return entry


def _craft(path: Path) -> None:
    """The stored sentences with a HEAD cycle and other words (a digest, where there is one, made to match)."""
    entry = json.loads(path.read_text())
    rows = entry["sentences"] if isinstance(entry, dict) else entry
    rows[0]["heads"] = [2, 1] + list(rows[0]["heads"][2:])
    rows[0]["words"] = ["evil"] * len(rows[0]["words"])
    if isinstance(entry, dict) and "digest" in entry:
        import helpers.data.corpora as corpora

        entry["digest"] = corpora._rows_digest(rows)
    path.write_text(json.dumps(entry))


@pytest.mark.parametrize("damage", ["[]", "{}", "crafted", "foreign", "garbage"])
def test_damaged_parsed_entry_is_parsed_again(damage, toy_conllu, tiny_model_dir, tmp_path):
    import helpers.data.corpora as corpora

    cache = tmp_path / "c"
    expected = read_conllu(toy_conllu)
    corpora._read_cached.cache_clear()
    assert list(corpora.load_treebank(str(toy_conllu), cache_root=cache)) == expected
    entry = _parsed_entry(cache)
    if damage == "crafted":
        _craft(entry)
    elif damage == "foreign":  # another file's entry under this file's name
        other = tmp_path / "other.conllu"
        other.write_text(SECOND, encoding="utf-8")
        corpora.load_treebank(str(other), cache_root=tmp_path / "c2")
        entry.write_bytes(_parsed_entry(tmp_path / "c2").read_bytes())
    elif damage == "garbage":
        entry.write_bytes(b"\x00\xff")
    else:
        entry.write_text(damage)
    corpora._read_cached.cache_clear()
    out = tmp_path / "e.json"
    assert main(["extract", "--conllu", str(toy_conllu), "--model", str(tiny_model_dir), "--max-length", "32",
                 "--quiet", "--cache-dir", str(cache), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["examples"] == len(expected)
    corpora._read_cached.cache_clear()
    assert list(corpora.load_treebank(str(toy_conllu), cache_root=cache)) == expected
    # the entry was rewritten whole: read back as it is, it gives the file's sentences
    assert corpora.parsed_entry_problem(json.loads(entry.read_text()), entry.stem, toy_conllu.read_bytes()) is None


# 5. shards whose values are NaN, or whose rows do not sum to 1, are damaged and recomputed

@pytest.mark.parametrize("damage", ["nan", "infinite", "rows off", "negative"])
def test_shard_with_damaged_values_is_recomputed(damage, tiny_model_dir, toy_conllu, tmp_path, capsys):
    common = ["heads", "--conllu", str(toy_conllu), "--model", str(tiny_model_dir), "--max-length", "32",
              "--quiet", "--cache-dir", str(tmp_path / "c")]
    assert main([*common, "--json", str(tmp_path / "a.json")]) == 0
    (shard,) = (tmp_path / "c").glob("*/shard-00000.npz")
    arrays = dict(np.load(shard))
    data = arrays["data"]
    if damage == "nan":
        data[:] = np.nan
    elif damage == "infinite":
        data[5] = np.inf
    elif damage == "rows off":
        data *= 2
    else:  # rows still sum to 1, one weight is negative
        data[0], data[1] = data[0] + 1, data[1] - 1
    np.savez(shard, **arrays)  # the key and the layout intact
    assert main([*common, "--json", str(tmp_path / "b.json")]) == 0
    assert (tmp_path / "b.json").read_text() == (tmp_path / "a.json").read_text()
    with np.load(shard) as npz:  # rewritten: finite, non-negative, rows of 1 (as the fix checks, to 1e-3)
        data, sizes = npz["data"], npz["sizes"]
        assert np.isfinite(data).all() and data.min() >= 0
        rows = np.concatenate([m.reshape(-1, n).sum(-1) for m, n in zip(np.split(data, np.cumsum(2 * 4 * sizes**2)[:-1]), sizes)])
        # tolerance: float32 softmax rows of at most 32 tokens (--max-length), then the word conversion's two
        # products of at most 32 tokens
        np.testing.assert_allclose(rows, 1, rtol=0, atol=round_off(1.0, 3 * 32))


def test_norm_maps_pass_the_shard_check(tiny_lm, tmp_path):
    """Norm maps are not attention weights (rows do not sum to 1): valid ones are never recomputed."""
    sentences = [["the", "cat", "sat"] * k for k in range(1, 6)]
    batch = encode_words(tiny_lm.tokenizer, sentences)
    extract(tiny_lm, batch, cache_root=tmp_path, shard_size=2, progress=False, maps="norms")
    again = extract(tiny_lm, batch, cache_root=tmp_path, shard_size=2, progress=False, maps="norms")
    assert again.stats["shards_computed"] == 0 and again.stats["shards_recomputed"] == 0
    weights = extract(tiny_lm, batch, cache_root=tmp_path, shard_size=2, progress=False)
    assert extract(tiny_lm, batch, cache_root=tmp_path, shard_size=2, progress=False).stats["shards_computed"] == 0
    assert weights.stats["shards_computed"] == 3


# 6. --json - is standard output

def test_json_dash_is_standard_output(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["info", "--no-model", "--data-dir", str(tmp_path), "--cache-dir", str(tmp_path / "c"),
                 "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["cache"]["dir"] == str(tmp_path / "c")
    assert not (tmp_path / "-").exists() and "wrote" not in captured.err


# 7. operating-system errors name the option and the file; the cache folder is checked first

def test_read_only_cache_is_refused_before_the_model(tmp_path, toy_conllu, capsys, no_model):
    cache = _read_only_dir(tmp_path) / "bert-cache"
    assert main(["extract", "--conllu", str(toy_conllu), "--cache-dir", str(cache)]) == 2
    _one_line_error(capsys, f"--cache-dir {cache}", "cannot write")


def test_cache_under_a_file_is_refused_before_the_model(tmp_path, toy_conllu, capsys, no_model):
    (tmp_path / "file").write_text("")
    assert main(["heads", "--conllu", str(toy_conllu), "--cache-dir", str(tmp_path / "file" / "cache")]) == 2
    _one_line_error(capsys, "--cache-dir", "is a file")


def test_file_size_limit_names_the_option_and_the_file(tiny_model_dir, toy_conllu, tmp_path):
    import resource

    import helpers

    limit = 4096  # the parsed trees (1.6 kB) and meta.json fit, the shard (7 kB) does not

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    cache = tmp_path / "c"
    env = {**os.environ, "PYTHONPATH": str(Path(helpers.__file__).resolve().parents[1]), "PYTHONDONTWRITEBYTECODE": "1",
           "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "helpers", "extract", "--conllu", str(toy_conllu), "--model",
                           str(tiny_model_dir), "--max-length", "32", "--quiet", "--cache-dir", str(cache)],
                          capture_output=True, text=True, env=env, preexec_fn=small_files, timeout=300)
    assert done.returncode == 2, done.stderr
    err = done.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert f"--cache-dir {cache}" in err and "shard-00000.npz" in err and "File too large" in err, err


def test_an_os_error_without_a_file_name_says_where_the_command_writes(tmp_path, monkeypatch, capsys):
    def full_disk(args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli, "COMMANDS", tuple(dataclasses.replace(c, handler=full_disk) if c.name == "info" else c
                                              for c in cli.COMMANDS))
    assert main(["info", "--no-model", "--cache-dir", str(tmp_path / "c")]) == 2
    _one_line_error(capsys, "No space left on device", "the disk is full", f"--cache-dir {tmp_path / 'c'}")


# 8. counts that ask for more than exists are said, on standard error and in the JSON

def test_capped_segment_count_is_said(tiny_model_dir, tmp_path, capsys):
    data = _toy_gum(tmp_path / "data")
    out = tmp_path / "s.json"
    assert main(["segments", "--model", str(tiny_model_dir), "--data-dir", str(data), "--segments", "1000000000",
                 "--max-length", "60", "--quiet", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    produced = len(result["segments"])
    assert result["counts"] == {"segments": {"asked": 1000000000, "produced": produced}}
    assert f"--segments 1000000000: only {produced} exist" in capsys.readouterr().err


def test_capped_sentence_count_is_said(tiny_model_dir, toy_conllu, tmp_path, capsys):
    out = tmp_path / "h.json"
    assert main(["heads", "--conllu", str(toy_conllu), "--model", str(tiny_model_dir), "--max-length", "32",
                 "--max-sentences", "100000", "--quiet", "--json", str(out), "--cache-dir", str(tmp_path / "c")]) == 0
    result = json.loads(out.read_text())
    assert result["counts"] == {"max_sentences": {"asked": 100000, "produced": 3}}
    assert "--max-sentences 100000: only 3 exist" in capsys.readouterr().err
    assert main(["heads", "--conllu", str(toy_conllu), "--model", str(tiny_model_dir), "--max-length", "32",
                 "--max-sentences", "2", "--quiet", "--json", str(out), "--cache-dir", str(tmp_path / "c")]) == 0
    assert "counts" not in json.loads(out.read_text())  # nothing capped: the layout is the usual one


# 9. library calls check their arguments and never echo a long text whole

def test_explore_none_is_refused_before_a_model_loads(no_model):
    import helpers

    with pytest.raises(TypeError, match=r"text: give a sentence \(str\) or its words"):
        helpers.explore(None)


def test_long_text_is_not_echoed_whole(tiny_lm):
    from helpers.presentation.explore import analyse

    text = "cat " * 1250  # 5,000 characters
    with pytest.raises(ValueError) as err:
        analyse(text, tiny_lm, max_length=32)
    assert len(str(err.value)) < 300 and "(5000 characters)" in str(err.value)


@pytest.mark.parametrize("call, fragment", [
    (lambda lm: __import__("helpers").load_treebank(None), "the corpus must be a name"),
    (lambda lm: __import__("helpers").load_model(42), "a model name or folder"),
    (lambda lm: __import__("helpers").encode_words(lm.tokenizer, ["the cat sat"]), "split it first"),
    (lambda lm: __import__("helpers").encode_words(lm.tokenizer, None), "a list of sentences"),
    (lambda lm: __import__("helpers").encode_texts(lm.tokenizer, "the cat sat"), "one text is"),
    (lambda lm: __import__("helpers").paper_segments([], lm.tokenizer, n="5"), "a whole number"),
    (lambda lm: __import__("helpers.presentation.explore").presentation.explore.analyse(["the", "cat"], lm,
                                                                                        max_length="128"), "max_length"),
    (lambda lm: __import__("helpers.presentation.explore").presentation.explore.predicted_heads(
        np.zeros((1, 1, 4, 4)), ["[CLS]", "a", "b", "[SEP]"], layer=3, head=0), "0-based"),
])
def test_library_calls_check_their_arguments(call, fragment, tiny_lm):
    with pytest.raises((TypeError, ValueError), match=fragment):
        call(tiny_lm)


# 10. inputs that exist but are no files, link loops, and raw control characters

def test_device_and_fifo_are_not_called_missing(tmp_path, capsys, no_model):
    fifo = tmp_path / "trees.conllu"
    os.mkfifo(fifo)
    for path, fragment in (("/dev/null", "character device"), (str(fifo), "named pipe")):
        assert main(["extract", "--conllu", path, "--cache-dir", str(tmp_path / "c")]) == 2
        err = _one_line_error(capsys, path, fragment)
        assert "no such" not in err


def test_symlink_loop_is_named(tmp_path, capsys, no_model):
    loop = tmp_path / "trees"
    loop.symlink_to(loop)
    assert main(["extract", "--conllu", str(loop), "--cache-dir", str(tmp_path / "c")]) == 2
    _one_line_error(capsys, str(loop), "symbolic link in a loop")


def test_control_characters_from_the_input_are_escaped(tmp_path, capsys, no_model):
    bad = tmp_path / "t.conllu"
    bad.write_text(NOT_TREES["own head"][0].replace("s1", "s1\x1b[2J\u202eevil"), encoding="utf-8")
    with pytest.raises(ConllError) as err:
        read_conllu(bad)
    assert "\x1b" not in str(err.value) and "\u202e" not in str(err.value)
    assert main(["heads", "--conllu", str(bad), "--cache-dir", str(tmp_path / "c")]) == 2
    line = _one_line_error(capsys, "s1\\x1b[2J\\u202eevil", "its own HEAD")
    assert line.isprintable()


def test_control_characters_in_an_option_are_escaped(tmp_path, capsys, no_model):
    assert main(["extract", "--conllu", str(tmp_path / "x\x1b[2J\u202e.conllu"), "--cache-dir", str(tmp_path / "c")]) == 2
    assert _one_line_error(capsys, "x\\x1b[2J\\u202e.conllu", "no such CoNLL-U file").isprintable()


# 11. the distributed engine's address (no Dask needed: checked before it is imported)

@pytest.mark.parametrize("address", ["nonsense", "tcp://host", "http://127.0.0.1:8786", "tcp://:8786"])
def test_bad_scheduler_address_is_refused(address, toy_conllu, capsys, no_model):
    assert main(["heads", "--conllu", str(toy_conllu), "--address", address]) == 2
    _one_line_error(capsys, f"--address {address}", "not a Dask scheduler address")


def test_json_into_a_pipe_is_written_in_place(tmp_path):
    """`--json /dev/stdout` or a named pipe: written into, never replaced by a renamed regular file."""
    import stat
    import threading

    fifo = tmp_path / "result.pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    assert main(["info", "--no-model", "--data-dir", str(tmp_path), "--cache-dir", str(tmp_path / "c"),
                 "--json", str(fifo)]) == 0
    reader.join(timeout=30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the pipe
    assert received and json.loads(received[0])["cache"]["dir"] == str(tmp_path / "c")


@pytest.mark.parametrize("option", ["--cache-dir", "--data-dir", "--json", "--model", "--conllu"])
def test_a_symbolic_link_loop_in_any_path_option_is_named(option, tmp_path, toy_conllu, capsys, no_model):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    args = {"--conllu": str(toy_conllu), "--cache-dir": str(tmp_path / "c"), option: str(loop)}
    assert main(["extract", *[x for pair in args.items() for x in pair]]) == 2
    err = _one_line_error(capsys, f"{option} {loop}" if option != "--conllu" else str(loop))
    assert "symbolic link" in err
    assert loop.is_symlink()  # nothing replaced it


def test_json_through_a_symbolic_link_keeps_the_link(tmp_path):
    link, target = tmp_path / "latest.json", tmp_path / "run-1.json"
    link.symlink_to(target)
    assert main(["info", "--no-model", "--data-dir", str(tmp_path), "--cache-dir", str(tmp_path / "c"),
                 "--json", str(link)]) == 0
    assert link.is_symlink() and json.loads(target.read_text())["cache"]["dir"] == str(tmp_path / "c")

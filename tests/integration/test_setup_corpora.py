"""The corpus step of the two commands' set-up (``scripts/setup.sh`` runs ``scripts/corpora.py``): corpora
found are left alone; missing ones are fetched, and where that fails (no network) one line says what to do and
the set-up fails. No test here reaches a network: the download goes through a proxy on a closed local port."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "corpora.py"


def closed_port() -> int:
    """A local port nothing listens on (bound, then released): a connection to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_step(data: Path) -> subprocess.CompletedProcess:
    """``scripts/corpora.py`` with ``$BERT_ATTENTION_DATA=data`` and every request sent to a closed port."""
    proxy = f"http://127.0.0.1:{closed_port()}"
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update({"BERT_ATTENTION_DATA": str(data), "HF_HUB_OFFLINE": "1", "http_proxy": proxy, "https_proxy": proxy,
                "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "no_proxy": "", "NO_PROXY": ""})
    return subprocess.run([sys.executable, str(SCRIPT)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_offline_without_corpora_one_line_and_failure(tmp_path):
    empty = tmp_path / "data"
    empty.mkdir()
    done = run_step(empty)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: no corpora in $BERT_ATTENTION_DATA={empty}")
    assert "connect to the internet and run this again, or set BERT_ATTENTION_DATA" in lines[0]
    assert list(empty.iterdir()) == []  # nothing half-written


def test_offline_with_a_data_folder_that_does_not_exist(tmp_path):
    done = run_step(tmp_path / "absent")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "absent").exists()


def test_corpora_found_are_left_alone(tmp_path):
    """Every required file of the manifest present (empty here): found, nothing fetched, status 0."""
    manifest = json.loads((ROOT / "helpers" / "data" / "data_manifest.json").read_text())
    data = tmp_path / "data"
    for entry in manifest["files"]:
        if not entry.get("optional"):
            (data / entry["path"]).parent.mkdir(parents=True, exist_ok=True)
            (data / entry["path"]).write_bytes(b"")
    done = run_step(data)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"corpora: found in {data}"


def test_setup_runs_the_corpus_step_last():
    """Both commands call ``scripts/setup.sh``; under ``set -e`` a failed corpus step stops them."""
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "set -euo pipefail" in setup
    assert setup.rstrip().splitlines()[-1] == ".venv/bin/python scripts/corpora.py"
    for script in ("build_book.sh", "test.sh"):
        assert "bash scripts/setup.sh" in (ROOT / "scripts" / script).read_text()

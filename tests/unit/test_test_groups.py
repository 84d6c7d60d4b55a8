"""The test command's work sharing takes effect: items of one group run on one xdist worker.

``scripts/test.sh`` runs the suite on two processes with ``--dist loadgroup``; :data:`tests.conftest.SHARED_WORK`
marks the items that share one expensive fixture (the small book build) or one cache (the chapters). xdist
applies a group by appending ``@group`` to the item's node id, a private attribute: pytest 9.2 stores node ids
elsewhere, the suffix was silently dropped and each worker built the small book and recomputed the chapters'
analyses (about 270 s each). This runs a synthetic suite through the same hook and options and checks that a
session fixture shared by a group is set up once, on one worker.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
import os
import pytest
from tests.conftest import pytest_collection_modifyitems  # the suite's own grouping hook

@pytest.fixture(scope="session")
def small_book():
    with open(os.environ["SETUPS_LOG"], "a") as log:
        log.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")
    return 1
"""


def test_a_shared_fixture_is_set_up_on_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name in ("a", "b"):  # grouped and ungrouped items in two files, as in tests/book
        body = "".join(f"def test_book_{i}(small_book):\n    assert small_book == 1\n\n"
                       f"def test_other_{i}():\n    pass\n\n" for i in range(4))
        (tmp_path / f"test_{name}.py").write_text(textwrap.dedent(body))
    log = tmp_path / "setups.log"
    env = {**os.environ, "SETUPS_LOG": str(log), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "loadgroup", str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "16 passed" in done.stdout, done.stdout[-2000:]
    workers = log.read_text().split()
    assert len(workers) == 1 and workers[0].startswith("gw"), (
        f"the small-book group's fixture was set up on {workers}: the group did not hold "
        "(check that pytest and pytest-xdist in requirements.txt keep xdist's group suffix)")

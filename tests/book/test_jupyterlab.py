"""A real JupyterLab, offline: chapter 1 opens in headless Chromium, every cell runs, and the bertviz
head view, an Altair chart and the explorer must draw with no request leaving the machine.

The server, its kernel and Chromium run together in a new network namespace (``unshare -n``) where
only loopback exists, so nothing *can* leave; Chromium's DevTools protocol also records every request
the page makes, and the test asserts that each went to 127.0.0.1. The notebook is a temporary copy
(with one cell appended that opens :func:`helpers.presentation.explore`), so nothing in the repository is written.
Run as a script (``python tests/book/test_jupyterlab.py drive ROOT NOTEBOOK``) it is the driver that runs
inside the namespace and prints its findings as JSON.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import urlopen

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "notebooks/02_attention_maps.ipynb"  # bertviz head and model views, Altair heat maps
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
EXPLORER_CELL = 'helpers.explore("The keys to the cabinet are on the table.", lm=lm)'
BUDGET_S = 110  # the whole drive, server start to last assertion (the limit: 2 minutes)

try:
    import pytest
except ImportError:  # the driver runs without pytest
    pytest = None
else:
    pytestmark = pytest.mark.browser


def _require(condition: bool, why: str) -> None:
    if not condition:
        if os.environ.get("CI"):
            pytest.fail(why)  # the test set-up installs all of these; in CI a missing one is a failure
        pytest.skip(why)


def test_chapter_runs_and_draws_offline_in_jupyterlab(tmp_path):
    import importlib.util

    from helpers.config import DataNotFoundError, data_dir
    from helpers.presentation.views import bertviz_libraries_local

    _require(CHROMIUM is not None, "chromium not installed")
    _require(shutil.which("unshare") is not None, "unshare not available")
    _require(importlib.util.find_spec("jupyterlab") is not None, "jupyterlab not installed (requirements.txt)")
    _require(importlib.util.find_spec("websocket") is not None, "websocket-client not installed (requirements.txt)")
    _require(bertviz_libraries_local(), "book JavaScript not installed (scripts/setup.sh needs npm)")
    try:
        data_dir()
    except DataNotFoundError as err:
        pytest.skip(str(err))

    nb = json.loads((ROOT / CHAPTER).read_text())
    nb["cells"].append({"cell_type": "code", "execution_count": None, "id": "explorer", "metadata": {},
                        "outputs": [], "source": EXPLORER_CELL})
    (tmp_path / "chapter.ipynb").write_text(json.dumps(nb))
    env = {**os.environ, "BERT_ATTENTION_SMALL": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    done = subprocess.run(["unshare", "-n", sys.executable, __file__, "drive", str(tmp_path), "chapter.ipynb"],
                          env=env, capture_output=True, text=True, timeout=BUDGET_S + 30)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["errors"] == [], report["errors"]  # no cell raised
    assert report["ran_all"], report
    assert report["head_view_lines"] > 0, "the bertviz head view drew no lines"
    assert report["model_view_lines"] > 0, "the bertviz model view drew no lines"
    assert report["charts_drawn"] >= 2, f"Altair charts drawn: {report['charts_drawn']} of {report['charts']}"
    assert report["explorer"]["view_lines"] > 0 and report["explorer"]["chart"], report["explorer"]
    assert "predicted head" in report["explorer"]["table"], report["explorer"]
    assert report["waiting_notes"] == 0, "a view was still waiting for its JavaScript"
    assert report["exceptions"] == [], report["exceptions"]  # no uncaught script error on the page
    assert len(report["requests"]) > 10  # the recorder saw the page load
    outside = [u for u in report["requests"] if urlparse(u).scheme in ("http", "https", "ws", "wss")
               and urlparse(u).hostname not in ("127.0.0.1", "localhost")]
    outside += [u for u in report["requests"] if urlparse(u).scheme not in ("http", "https", "ws", "wss", "data", "blob")]
    assert outside == [], f"requests left the machine: {outside}"
    assert elapsed < 120, f"took {elapsed:.0f} s: {report['timings']}"
    print(f"JupyterLab test: {elapsed:.0f} s in all; seconds from start: {report['timings']}")


# ------------------------------------------------------------------------------------------- driver
def _loopback_up() -> None:
    """``ip link set lo up`` without iproute2: a fresh network namespace starts with lo down."""
    import fcntl
    import struct

    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0))[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, check, deadline: float, every: float = 0.25):
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"timed out waiting for {what}")


class DevTools:
    """A minimal Chrome DevTools Protocol client over one page's websocket."""

    def __init__(self, ws_url: str):
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=120, suppress_origin=True, max_size=None)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, timeout: float = 60, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        self.ws.settimeout(timeout)
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def js(self, expression: str, timeout: float = 60):
        result = self.call("Runtime.evaluate", timeout=timeout, expression=expression, awaitPromise=True,
                           returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def pump(self, seconds: float = 0.2) -> None:
        """Read pending events for a moment (events arrive between calls too)."""
        import websocket

        self.ws.settimeout(seconds)
        try:
            while True:
                self.events.append(json.loads(self.ws.recv()))
        except websocket.WebSocketTimeoutException:
            pass


# The notebook's panel (found by path: headless Chromium has no focus, so no "current" widget).
PANEL = """((path) => { const app = window.jupyterapp; if (!app) return null;
  for (const w of app.shell.widgets('main')) { if (w.context && w.context.path === path) return w; } return null; })(%s)"""
NOTEBOOK_READY = """(() => { const w = PANEL; if (w) window.jupyterapp.shell.activateById(w.id);
  return !!(w && w.context.isReady && w.sessionContext.session && w.sessionContext.session.kernel
            && w.sessionContext.session.kernel.status === 'idle'); })()"""
CELL_ERRORS = """(() => { const w = PANEL; const errors = [];
  w.content.widgets.forEach((c, i) => { const j = c.model.toJSON();
    (j.outputs || []).forEach(o => { if (o.output_type === 'error') errors.push(`cell ${i}: ${o.ename}: ${o.evalue}`); }); });
  return errors; })()"""
DRAWN = """(() => {
  const heads = [...document.querySelectorAll('.jp-Notebook [id^=bertviz-]')];
  const lines = v => v.querySelectorAll('svg line').length;
  const charts = [...document.querySelectorAll('.jp-Notebook [id^=altair-viz-]')];
  const drawn = c => !!c.querySelector('canvas, svg');
  const panel = document.querySelector('.jp-Notebook .widget-vbox');
  const panelView = panel && panel.querySelector('[id^=bertviz-]');
  const panelChart = panel && panel.querySelector('[id^=altair-viz-]');
  return {
    head_view_lines: heads.filter(v => v.querySelector('#layer')).reduce((n, v) => n + lines(v), 0),
    model_view_lines: heads.filter(v => !v.querySelector('#layer')).reduce((n, v) => n + lines(v), 0),
    charts: charts.length, charts_drawn: charts.filter(drawn).length,
    waiting_notes: document.querySelectorAll('.jp-Notebook .helpers-note').length,
    explorer: {view_lines: panelView ? lines(panelView) : 0, chart: !!(panelChart && drawn(panelChart)),
               table: panel ? (panel.querySelector('table') || {}).textContent || '' : ''},
  }; })()"""


def drive(root: Path, notebook: str) -> dict:
    start = time.monotonic()
    deadline = start + BUDGET_S
    timings = {}
    mark = lambda name: timings.__setitem__(name, round(time.monotonic() - start, 1))  # noqa: E731
    _loopback_up()
    work = Path(tempfile.mkdtemp(prefix="jlab-"))
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(work / "config"), "JUPYTER_RUNTIME_DIR": str(work / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(work / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(work / "workspaces")}
    port, token = _free_port(), secrets.token_hex(16)
    server_log = open(work / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--allow-root", "--expose-app-in-browser", "--LabApp.news_url=None", "--LabApp.extension_manager=readonly",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=server_log, stderr=subprocess.STDOUT, cwd=root)
    browser = None
    try:
        base = f"http://127.0.0.1:{port}"

        def server_up():
            try:
                with urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                    return r.status == 200
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError("jupyter lab exited: " + (work / "server.log").read_text()[-2000:])
                return False

        _wait("the JupyterLab server", server_up, deadline)
        mark("server up")
        profile = work / "chromium"
        browser = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", "--window-size=1280,1000", "--disable-background-networking",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        active = profile / "DevToolsActivePort"
        _wait("Chromium's DevTools port", lambda: active.is_file() and active.read_text().strip(), deadline)
        cdp_port = int(active.read_text().split()[0])

        def page_target():
            try:
                with urlopen(f"http://127.0.0.1:{cdp_port}/json", timeout=5) as r:
                    return next((t for t in json.load(r) if t["type"] == "page"), None)
            except OSError:  # not listening yet, or slow under load
                return None

        tools = DevTools(_wait("a Chromium page", page_target, deadline)["webSocketDebuggerUrl"])
        tools.call("Network.enable")
        tools.call("Runtime.enable")
        tools.call("Page.enable")
        tools.call("Page.navigate", url=f"{base}/lab/tree/{notebook}?token={token}")
        left = lambda: max(1.0, deadline - time.monotonic())  # noqa: E731
        panel = PANEL % json.dumps(notebook)
        ready = NOTEBOOK_READY.replace("PANEL", panel)
        _wait("the notebook and its kernel", lambda: tools.js(ready), deadline, every=0.5)
        mark("notebook open, kernel idle")
        ran_all = tools.js("window.jupyterapp.commands.execute('notebook:run-all-cells')", timeout=left())
        mark("all cells ran")
        errors = tools.js(CELL_ERRORS.replace("PANEL", panel))
        drawn = None

        def everything_drawn():
            nonlocal drawn
            drawn = tools.js(DRAWN)
            return (drawn["head_view_lines"] and drawn["model_view_lines"] and drawn["charts"]
                    and drawn["charts_drawn"] == drawn["charts"] and drawn["explorer"]["view_lines"]
                    and drawn["explorer"]["chart"] and drawn["explorer"]["table"]) or errors
        try:
            _wait("the views to draw", everything_drawn, deadline, every=0.5)
        except TimeoutError:
            pass  # report what was drawn; the test says what is missing
        mark("views drawn")
        tools.pump()
        if os.environ.get("JLAB_SCREENSHOT"):
            import base64

            shot = tools.call("Page.captureScreenshot")["data"]
            Path(os.environ["JLAB_SCREENSHOT"]).write_bytes(base64.b64decode(shot))
        requests = [e["params"]["request"]["url"] for e in tools.events if e.get("method") == "Network.requestWillBeSent"]
        requests += [e["params"]["url"] for e in tools.events if e.get("method") == "Network.webSocketCreated"]
        exceptions = [e["params"]["exceptionDetails"].get("exception", {}).get("description", "")[:300]
                      or e["params"]["exceptionDetails"].get("text", "")
                      for e in tools.events if e.get("method") == "Runtime.exceptionThrown"]
        return {"ran_all": ran_all, "errors": errors, **drawn, "exceptions": exceptions, "requests": requests,
                "timings": timings}
    finally:
        if browser is not None:
            browser.kill()
            browser.wait()
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__" and sys.argv[1:2] == ["drive"]:
    print(json.dumps(drive(Path(sys.argv[2]), sys.argv[3])))

"""Chapters as a learner sees them in a real JupyterLab: a JupyterLab server from this
virtualenv (no network, its own settings, workspaces and kernelspec in tmp folders) serves a
copy of chapters/; headless Chromium opens a chapter in JupyterLab's light or dark theme, runs
all its cells, and checks that no cell failed, that no output scrolls sideways, that IR diff lines
keep their columns (code right of its +/- marker), that (chapter 02)
the schedule stepper is a live widget whose "next" button moves it on a step, and that (chapters
03 and 07) the graphs are drawn and fusion leaves fewer calls in the "after" panel of a diff.
Every chapter and classroom demo runs in the light theme; for the chapters with widgets or
pictures the page then switches to the dark theme, as a learner's toggle does, and the views are
checked again (the outputs restyle with the theme's variables, so nothing is run twice).
Screenshots land in pytest's tmp_path, whose path the test prints (see it with ``-s``)."""
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from ipykernel.kernelspec import write_kernel_spec

pytestmark = pytest.mark.notebook   # it runs chapters top to bottom, in JupyterLab

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 120
RUN_ALL_TIMEOUT_S = 300
THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}
SETTINGS = {
    # Every cell stays in the DOM, so the prompts and outputs of all of them can be checked.
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    # No news fetched, no update check.
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
}

# The state of the open notebook: kernel status, and each code cell's prompt.
NOTEBOOK_STATE = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    const prompts = Array.from(panel.node.querySelectorAll(".jp-Notebook .jp-CodeCell .jp-InputPrompt"),
                               prompt => prompt.textContent.trim());
    return {status: panel.sessionContext.kernelDisplayStatus, prompts};
}"""
# In the open notebook: error outputs (JupyterLab shows them as stderr) and stderr with a traceback.
ERRORS = """() => Array.from(jupyterapp.shell.currentWidget.node.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"], '
        + '.jp-RenderedText[data-mime-type*="error"]'),
    output => output.textContent).filter(text => /Traceback|Error/.test(text))"""
# In the open notebook: outputs wider than the notebook column, which would scroll sideways.
OVERFLOWING = """() => Array.from(jupyterapp.shell.currentWidget.node.querySelectorAll(".jp-OutputArea-output"))
    .filter(output => output.scrollWidth > output.clientWidth + 2)
    .map(output => ({scrollWidth: output.scrollWidth, clientWidth: output.clientWidth,
                     mime: output.dataset.mimeType || "", text: output.textContent.slice(0, 120)}))"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def require_jupyterlab() -> None:
    """JupyterLab comes with the ``test`` extra; like the browser, skip without it, but fail in CI."""
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        reason = "the JupyterLab test needs jupyterlab (pip install -e '.[test]')"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set, so it fails rather than skips", pytrace=False)
        pytest.skip(reason)


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


class Lab:
    """A running JupyterLab server: its URL, token, root and settings folders."""

    def __init__(self, tmp: Path):
        self.root, self.settings, self.log_path = tmp / "root", tmp / "settings", tmp / "server.log"
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        kernels, workspaces, home = tmp / "kernels", tmp / "workspaces", tmp / "jupyter"
        for folder in (self.root, kernels, workspaces, home):
            folder.mkdir()
        # The one `python3` kernel launches this interpreter (see kernel_config in test_notebooks).
        write_kernel_spec(kernels / "python3")
        for name, values in SETTINGS.items():
            self.write_setting(name, values)
        self.set_theme("light")
        command = [
            sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={self.port}",
            "--ip=127.0.0.1", "--ServerApp.port_retries=0", f"--ServerApp.token={self.token}",
            f"--ServerApp.root_dir={self.root}", f"--LabApp.user_settings_dir={self.settings}",
            f"--LabApp.workspaces_dir={workspaces}", "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            f"--KernelSpecManager.kernel_dirs={kernels}", "--KernelSpecManager.ensure_native_kernel=False",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")
        env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
                   JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"))
        env.pop("MPLBACKEND", None)   # conftest's Agg; in JupyterLab figures show inline, as a learner sees
        self.log = open(self.log_path, "wb")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)

    def api(self, path: str) -> str:
        return f"{self.url}{path}?token={self.token}"

    def wait_until_up(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}:\n{self.log_text()}")
            try:
                get_json(self.api("/api/status"))
                return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"JupyterLab did not answer in {START_TIMEOUT_S} s:\n{self.log_text()}")

    def write_setting(self, name: str, values: dict) -> None:
        path = self.settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")

    def set_theme(self, theme: str) -> None:
        """Takes effect for a page loaded afterwards: JupyterLab reads its settings at start."""
        self.write_setting("@jupyterlab/apputils-extension/themes.jupyterlab-settings", {"theme": THEMES[theme]})

    def shut_down_kernels(self) -> None:
        for session in get_json(self.api("/api/sessions")):
            request = urllib.request.Request(self.api(f"/api/sessions/{session['id']}"), method="DELETE")
            urllib.request.urlopen(request, timeout=30).close()

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-5000:]

    def stop(self) -> None:
        """SIGTERM (the server shuts its kernels down), then SIGKILL to the whole process group."""
        try:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    pass
            try:
                os.killpg(self.process.pid, signal.SIGKILL)   # kernels left behind, if any
            except (ProcessLookupError, PermissionError):
                pass
            self.process.wait(timeout=10)
        finally:
            self.log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory, chromium):
    """One JupyterLab server for the module (``chromium`` first: without a browser, skip before starting it)."""
    require_jupyterlab()
    server = Lab(tmp_path_factory.mktemp("jupyterlab"))
    try:
        server.wait_until_up()
        yield server
    finally:
        server.stop()


def open_notebook(page, lab: Lab, workspace: str, notebook: str) -> None:
    """Let the page reach this server (the fixture blocks all http), open the notebook in a new
    workspace (the default one would reopen an earlier case's notebook), wait for its kernel."""
    page.route(re.compile(rf"^http://127\.0\.0\.1:{lab.port}/"), lambda route: route.continue_())
    page.goto(f"{lab.url}/lab/workspaces/{workspace}/tree/{notebook}?token={lab.token}",
              timeout=START_TIMEOUT_S * 1000)
    page.wait_for_function("() => window.jupyterapp && jupyterapp.shell.currentWidget"
                           " && jupyterapp.shell.currentWidget.sessionContext",
                           timeout=START_TIMEOUT_S * 1000)
    page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=START_TIMEOUT_S * 1000)
    page.evaluate("""async () => {
        const panel = jupyterapp.shell.currentWidget;
        await panel.context.ready;
        await panel.sessionContext.ready;
    }""")
    page.wait_for_function("() => jupyterapp.shell.currentWidget.sessionContext.kernelDisplayStatus === 'idle'",
                           timeout=START_TIMEOUT_S * 1000)


def run_all_cells(page) -> list:
    """Run All Cells, then wait until the kernel is idle and no prompt shows ``[*]``; the prompts."""
    page.evaluate("() => { jupyterapp.commands.execute('notebook:run-all-cells'); }")
    page.wait_for_function("() => Array.from(jupyterapp.shell.currentWidget.node"
                           ".querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt'))"
                           ".some(prompt => /\\[[*\\d]+\\]/.test(prompt.textContent))", timeout=60_000)
    deadline, settled = time.monotonic() + RUN_ALL_TIMEOUT_S, 0
    while time.monotonic() < deadline:
        state = page.evaluate(NOTEBOOK_STATE)
        busy = state["status"] != "idle" or any("*" in prompt for prompt in state["prompts"])
        settled = 0 if busy else settled + 1
        if settled >= 2:   # idle twice, a second apart: not between two queued cells
            return state["prompts"]
        page.wait_for_timeout(1000)
    pytest.fail(f"cells still running after {RUN_ALL_TIMEOUT_S} s: {page.evaluate(NOTEBOOK_STATE)}")


def check_stepper(page, shots: Path, name: str) -> None:
    """The stepper is a live widget; its "next" button shows step 2, and the slider follows."""
    slider = page.locator(".jp-OutputArea-output .widget-slider")
    assert slider.count() == 1, f"{slider.count()} stepper sliders (want a live ipywidgets slider)"
    widget = page.locator(".jp-OutputArea-output .widget-vbox").filter(has=page.locator(".widget-slider"))
    widget.scroll_into_view_if_needed()
    call = widget.locator(".mlc-lab-step-call")
    assert re.match(r"step 1/\d+:", call.inner_text()), call.inner_text()
    first = call.inner_text()
    widget.screenshot(path=shots / f"{name}-stepper-step1.png")
    widget.get_by_role("button", name=re.compile("next")).click()
    page.wait_for_function("element => /^step 2\\//.test(element.textContent.trim())",
                           arg=call.element_handle(), timeout=30_000)
    assert call.inner_text() != first
    assert slider.locator(".widget-readout").inner_text().strip() == "2"
    widget.screenshot(path=shots / f"{name}-stepper-step2.png")


# In the open notebook: diff lines whose code overlaps their +/- marker (JupyterLab's sanitizer
# dropping what lays the columns out would do that).
OVERLAPPING_DIFF_LINES = """() => Array.from(jupyterapp.shell.currentWidget.node.querySelectorAll(".mlc-uline, .mlc-side"))
    .map(row => [row.querySelector(":scope > .mlc-mark"), row.querySelector(":scope > .mlc-code")])
    .filter(([mark, code]) => mark && code && mark.getBoundingClientRect().width > 0
            && code.getBoundingClientRect().left < mark.getBoundingClientRect().right - 1)
    .map(([mark, code]) => code.textContent.slice(0, 80))"""

# The calls of every drawn graph, and of each panel of every graph diff (before, after).
GRAPHS = """() => {
    const node = jupyterapp.shell.currentWidget.node;
    const calls = svg => svg.querySelectorAll("g.node.call").length;
    return {graphs: Array.from(node.querySelectorAll("svg.mlc-graph"), calls),
            diffs: Array.from(node.querySelectorAll(".mlc-graph-diff"),
                              diff => Array.from(diff.querySelectorAll("svg.mlc-graph"), calls))};
}"""


def check_graphs(page, shots: Path, name: str) -> None:
    """Every graph has calls; every diff has two panels, fusion leaving fewer calls after."""
    found = page.evaluate(GRAPHS)
    assert found["graphs"] and all(found["graphs"]), f"graphs without calls: {found}"
    assert found["diffs"], "no before/after graph diff drawn"
    for before, after in (panels for panels in found["diffs"]):
        assert 0 < after < before, f"fusion should leave fewer calls: {found['diffs']}"
    diff = page.locator(".mlc-graph-diff").last
    diff.scroll_into_view_if_needed()
    diff.screenshot(path=shots / f"{name}-graph-diff.png")


CHAPTERS = sorted(f"chapters/{path.name}" for path in (REPO / "chapters").glob("*.ipynb"))
DEMOS = sorted(f"demos/{path.name}" for path in (REPO / "demos").glob("*.ipynb"))
DARK = {"02", "03", "06", "07"}       # the stepper, graphs, GPU pictures and pass pipeline
CASES = [(notebook, "light") for notebook in CHAPTERS + DEMOS]


def case_name(notebook: str, theme: str) -> str:
    stem = Path(notebook).stem
    chapter = stem[:2] if notebook.startswith("chapters/") else ""
    return f"{chapter or stem}-{theme}" + ("+dark" if chapter in DARK else "")


def switch_to_dark(page) -> None:
    """The theme toggle of a running JupyterLab, as a learner uses it."""
    page.evaluate("() => jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
    page.wait_for_timeout(500)      # the stylesheet swap settles


def check_views(page, notebook: str, theme: str, chapter: str, shots: Path, name: str) -> None:
    overflowing = page.evaluate(OVERFLOWING)
    assert not overflowing, f"{notebook} ({theme}): outputs scroll sideways: {overflowing}"
    overlapping = page.evaluate(OVERLAPPING_DIFF_LINES)
    assert not overlapping, f"{notebook} ({theme}): diff lines overlap their markers: {overlapping[:5]}"
    if chapter in ("03", "07"):
        check_graphs(page, shots, f"{name}-{theme}")


@pytest.mark.parametrize("relative,theme", CASES, ids=[case_name(n, t) for n, t in CASES])
def test_chapter_runs_cleanly_in_jupyterlab(lab, page, tmp_path, relative, theme):
    # A fresh copy of the notebook's folder for each case: a new kernel, untouched notebooks.
    source, name = REPO / relative, case_name(relative, theme)
    notebook, chapter = source.name, source.name[:2] if relative.startswith("chapters/") else ""
    folder = name.replace("+", "-")      # a URL path segment
    shutil.copytree(source.parent, lab.root / folder)
    lab.set_theme(theme)
    print(f"\nJupyterLab screenshots of {notebook} ({theme}): {tmp_path}")
    try:
        open_notebook(page, lab, folder, f"{folder}/{notebook}")
        assert page.locator("body").get_attribute("data-jp-theme-light") == str(theme == "light").lower()
        prompts = run_all_cells(page)
        page.screenshot(path=tmp_path / f"{name}-end.png")

        errors = page.evaluate(ERRORS)
        assert not errors, f"{notebook}: error outputs:\n" + "\n---\n".join(text[:2000] for text in errors)
        unrun = [index for index, prompt in enumerate(prompts) if not re.fullmatch(r"\[\d+\]:", prompt)]
        assert not unrun, f"{notebook}: code cells {unrun} have no execution count: {prompts}"
        expected = sum(cell["cell_type"] == "code" for cell in
                       json.loads(source.read_text(encoding="utf-8"))["cells"])
        assert len(prompts) == expected, f"{notebook}: {len(prompts)} code cells shown, {expected} in the file"

        outputs = page.evaluate("() => jupyterapp.shell.currentWidget.node.querySelectorAll('.jp-OutputArea-output').length")
        assert outputs > 0, f"{notebook}: no outputs shown, so nothing was checked"
        check_views(page, notebook, theme, chapter, tmp_path, name)
        if chapter == "02":
            check_stepper(page, tmp_path, name)
        if chapter in DARK:
            switch_to_dark(page)
            page.screenshot(path=tmp_path / f"{name}-dark-end.png")
            check_views(page, notebook, "dark", chapter, tmp_path, name)
    except BaseException:
        page.screenshot(path=tmp_path / f"{name}-failure.png")
        print(f"JupyterLab server log (tail):\n{lab.log_text()}")
        raise
    finally:
        lab.shut_down_kernels()

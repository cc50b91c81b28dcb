"""A Gradescope autograder for one homework: a zip with ``setup.sh`` (installs bubblewrap, and
mlc_lab with the grader from PyPI), ``run_autograder`` (grades the one submitted notebook and
writes ``/autograder/results/results.json``) and the source notebook, which only the grader reads.

``run_autograder`` calls ``python -m autograder.gradescope``: the submitted notebook is opened
without following links (a symlink to the source is refused, as are hard links, FIFOs and
oversized files), graded in the sandbox as ``mlc-lab grade`` grades, and results.json is written
last and atomically, also when grading fails (score 0 and the reason). Gradescope runs this as
root; the student's kernel never is (``autograder.sandbox``). Where the container forbids the
user namespaces bubblewrap needs, the results say so; a zip made with ``--no-sandbox`` then
grades without the sandbox, in Gradescope's throwaway container.
"""
from __future__ import annotations

import json
import os
import sys
import time
import zipfile
from dataclasses import asdict
from pathlib import Path

from . import notebook, report

SETUP = """#!/usr/bin/env bash
set -euo pipefail
apt-get update -qq
apt-get install -y -qq python3 python3-pip python3-venv bubblewrap libseccomp2 >/dev/null
python3 -m venv /opt/mlc-lab
/opt/mlc-lab/bin/pip install --quiet "mlc_lab[grade]=={version}"
chmod -R a+rX /opt/mlc-lab
"""

RUN = """#!/usr/bin/env bash
# Grade the submitted notebook against the source; the results go where Gradescope reads them.
chmod 700 /autograder/source
exec /opt/mlc-lab/bin/python -m autograder.gradescope /autograder/source/homework/{source} \\
    /autograder/submission /autograder/results/results.json --timeout {timeout}{flags}
"""


def package(source: Path, out: Path, timeout: float = 900, sandbox: bool = True) -> Path:
    """Write the autograder zip for ``source`` (checked first: a malformed source fails here)."""
    from importlib.metadata import version
    notebook.release(notebook.read(source))       # validates the format
    out.parent.mkdir(parents=True, exist_ok=True)
    run = RUN.format(source=source.name, timeout=int(timeout), flags="" if sandbox else " --no-sandbox")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (("setup.sh", SETUP.format(version=version("mlc_lab"))), ("run_autograder", run)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            z.writestr(info, text)
        z.write(source, f"homework/{source.name}")
    return out


def run_autograder(source: Path, submitted: Path, results: Path, timeout: float = 900, sandbox: bool = True) -> dict:
    """Grade the one notebook in folder ``submitted`` against ``source``; write ``results``."""
    from .batch import grade_one, read_submission
    from .runner import Limits
    tasks = notebook.tasks(notebook.read(source))
    start = time.monotonic()
    try:
        found = sorted(e for e in os.listdir(submitted) if e.endswith(".ipynb"))
        if len(found) != 1:
            result = report.failure("submission", tasks, f"Submit exactly one .ipynb notebook (found {len(found)}).", 0.0)
        else:
            data, result = read_submission(Path(submitted) / found[0], "submission", tasks)
            if data is not None:
                limits = asdict(Limits(notebook_timeout=float(timeout), sandbox=sandbox))
                result = grade_one(Path(source).read_bytes(), data, "submission", limits)
    except Exception as exc:
        result = report.failure("submission", tasks, f"grading failed: {type(exc).__name__}: {str(exc)[:500]}",
                                time.monotonic() - start)
    report.write_results(Path(results), result)
    return result


def main(argv=None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m autograder.gradescope")
    parser.add_argument("source", type=Path)
    parser.add_argument("submitted", type=Path, help="the folder Gradescope puts the submission in")
    parser.add_argument("results", type=Path)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--no-sandbox", action="store_true")
    args = parser.parse_args(argv)
    result = run_autograder(args.source, args.submitted, args.results, args.timeout, not args.no_sandbox)
    print(json.dumps({"score": result["score"], "output": result["output"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

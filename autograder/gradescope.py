"""A Gradescope autograder for one homework: a zip with ``setup.sh`` (installs mlc_lab with the
grader from PyPI), ``run_autograder`` (grades the one submitted notebook with ``mlc-lab grade``
and writes ``/autograder/results/results.json``) and the source notebook, which only the grader
reads: Gradescope runs the script as root, so the student's kernel runs as another user and,
where the container allows namespaces, with the source folder hidden."""
from __future__ import annotations

import zipfile
from pathlib import Path

from . import notebook

SETUP = """#!/usr/bin/env bash
set -euo pipefail
apt-get update -qq && apt-get install -y -qq python3 python3-pip python3-venv >/dev/null
python3 -m venv /opt/mlc-lab
/opt/mlc-lab/bin/pip install --quiet "mlc_lab[grade]=={version}"
chmod -R a+rX /opt/mlc-lab
"""

RUN = """#!/usr/bin/env bash
# Grade the submitted notebook against the source; the results go where Gradescope reads them.
set -uo pipefail
chmod 700 /autograder/source
shopt -s nullglob
notebooks=(/autograder/submission/*.ipynb)
mkdir -p /autograder/results
if [ ${{#notebooks[@]}} -ne 1 ]; then
    printf '{{"score": 0, "output": "Submit exactly one .ipynb notebook (found %d)."}}\\n' \\
        "${{#notebooks[@]}}" > /autograder/results/results.json
    exit 0
fi
mkdir -p /tmp/mlc-lab-submission && cp "${{notebooks[0]}}" /tmp/mlc-lab-submission/submission.ipynb
/opt/mlc-lab/bin/mlc-lab grade /autograder/source/homework/{source} /tmp/mlc-lab-submission/submission.ipynb \\
    --out /tmp/mlc-lab-out \\
    --jobs 1 --quiet --timeout {timeout}
cp /tmp/mlc-lab-out/submission/results.json /autograder/results/results.json
"""


def package(source: Path, out: Path, timeout: float = 900) -> Path:
    """Write the autograder zip for ``source`` (checked first: a malformed source fails here)."""
    from importlib.metadata import version
    notebook.release(notebook.read(source))       # validates the format
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (("setup.sh", SETUP.format(version=version("mlc_lab"))),
                           ("run_autograder", RUN.format(source=source.name, timeout=int(timeout)))):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            z.writestr(info, text)
        z.write(source, f"homework/{source.name}")
    return out

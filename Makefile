# Set-up and checks for mlc_lab. Everything is installed into $(VENV); nothing global is touched.
VENV ?= .venv
PYTHON ?= python3
VENV_CMD ?= $(PYTHON) -m venv
PY = $(VENV)/bin/python

.PHONY: lab test bench book strip git-filter clean exercises

# JupyterLab refuses to start as root (e.g. in a container) unless told that is intended.
ROOT_FLAG = $(if $(filter 0,$(shell id -u)),--allow-root,)
# Extra options for `jupyter lab`, e.g. on a remote machine:
#   make lab LAB_ARGS="--no-browser --port 8888 --ip 0.0.0.0"
LAB_ARGS ?=

NOTEBOOKS = $(sort $(shell find chapters exercises demos -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' 2>/dev/null))
# Stdlib only, so it runs (as git's filter too) without importing mlc_lab or installing anything.
STRIP_NOTEBOOKS = mlc_lab/testing/strip_notebooks.py

lab: $(VENV)/.installed-lab git-filter
	$(VENV)/bin/jupyter lab $(ROOT_FLAG) $(LAB_ARGS) chapters/

test: $(VENV)/.installed-test git-filter
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=20

# The student versions of the homework (exercises/*.ipynb) from their instructor sources.
exercises: $(VENV)/.installed-test
	@for source in exercises/instructor/hw*.ipynb; do $(VENV)/bin/mlc-lab assign "$$source" --out exercises; done

# The course as a website with every output, in _build/book/ (open index.html): executes the
# chapters (a few minutes), then renders them with Sphinx and myst-nb.
book: $(VENV)/.installed-book
	$(PY) book/build.py --out _build/book

# Executed copies of the classroom demos, demos/html/NAME.html: the fallback when a live run fails
# in class (a few minutes; full settings), sharing one copy of the template's stylesheet (lab.css).
# The export keeps no widget state, so each widget shows
# the static view it publishes beside itself. tests/test_demos_html.py fails on a stale copy.
.PHONY: demos-html
demos-html: $(VENV)/.installed-test
	env -u MLC_LAB_DEMO_QUICK $(VENV)/bin/jupyter nbconvert --to html --template lab --execute \
		--ExecutePreprocessor.kernel_name=python3 --ExecutePreprocessor.timeout=600 \
		--ExecutePreprocessor.store_widget_state=False --output-dir demos/html demos/*.ipynb
	$(PY) demos/share_css.py demos/html/*.html

# Clear the outputs saved in the notebooks' files (git's filter already keeps them out of commits).
strip:
	$(if $(NOTEBOOKS),$(PYTHON) $(STRIP_NOTEBOOKS) $(NOTEBOOKS),@echo "no notebooks to strip")

# Register the filter .gitattributes names, so `git add` stores notebooks without outputs while
# the files on disk keep them. Outside a git checkout there is nothing to do.
git-filter:
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
		git config filter.strip-notebook-outputs.clean "$(PYTHON) $(STRIP_NOTEBOOKS)" \
			|| echo "note: could not register the notebook filter; run 'make strip' before committing" >&2; \
	fi

bench: $(VENV)/.installed-bench
	@for script in bench/*.py; do \
		[ -e "$$script" ] || { echo "no benchmark scripts in bench/"; break; }; \
		echo "== $$script"; \
		$(PY) "$$script" || exit 1; \
	done

$(PY):
	$(VENV_CMD) $(VENV)
	$(PY) -m pip install --upgrade pip

# One stamp per extra, so a repeated `make test` or `make lab` skips the install
# until pyproject.toml changes.
$(VENV)/.installed-%: pyproject.toml | $(PY)
	$(PY) -m pip install -e ".[$*]"
	touch $@

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -name .ipynb_checkpoints -type d -prune -exec rm -rf {} +

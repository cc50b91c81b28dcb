# Set-up and checks for mlc_lab. Everything is installed into $(VENV); nothing global is touched.
VENV ?= .venv
PYTHON ?= python3
VENV_CMD ?= $(PYTHON) -m venv
PY = $(VENV)/bin/python

.PHONY: lab test bench clean

# JupyterLab refuses to start as root (e.g. in a container) unless told that is intended.
ROOT_FLAG = $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(VENV)/.installed-lab
	$(VENV)/bin/jupyter lab $(ROOT_FLAG) chapters/

test: $(VENV)/.installed-test
	$(PY) -m pytest -q -p no:cacheprovider

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

# agent-memory: set-up and everyday commands. A fresh machine needs only python3 and make.
#
#   make venv    create .venv and install the project with its test extras (re-run: no-op
#                until pyproject.toml changes)
#   make run     the main job: the research-agent demo
#   make test    the test suite
#   make bench   the benchmarks on the real data in $(DATA)
#   make clean   remove .venv, build metadata and caches (never memory data)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DATA   ?= ../shared/data
# torch 2.13.0 is the CPU wheel these machines hold locally; any other torch requirement pulls a
# multi-GB CUDA build, so it is installed first, on its own.
TORCH  := torch==2.13.0
# Nothing is ever fetched from the Hugging Face hub: the embedding model is a local package.
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

.PHONY: venv run test bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install '$(TORCH)'
	$(PY) -m pip install -e '.[test]'
	touch $@

run: venv
	$(OFFLINE) $(PY) examples/research_demo.py

test: venv
	$(OFFLINE) $(PY) -m pytest -q

bench: venv
	$(OFFLINE) $(PY) benchmarks/bench_memory.py --data $(DATA)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

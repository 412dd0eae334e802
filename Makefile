# Herald — run `make help` for the targets.
SHELL := /bin/bash
GO    ?= go
ADDR  ?= 127.0.0.1:8080
DATA  ?= ./.herald
BIN   := bin

.DEFAULT_GOAL := help

.PHONY: help run test build bench vet clean

help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z_-]+:.*## /{printf "  make %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

run: ## start Herald locally (API, workers, sandbox providers) on $(ADDR), data in $(DATA)
	$(GO) run ./cmd/herald dev --addr $(ADDR) --data $(DATA) $(if $(CONFIG),--config $(CONFIG))

test: ## vet, then run every test (unit, conformance suites, pipeline, API, kill-and-restart end to end)
	@echo "==> go vet"
	$(GO) vet ./...
	@echo "==> go test (offline; builds the herald binary for the end-to-end tests)"
	$(GO) test -count=1 -timeout 20m ./...

build: ## build the herald CLI into bin/
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/herald ./cmd/herald

bench: build ## print throughput figures: pipeline vs raw SDK to the sandbox, stores, queue
	$(BIN)/herald bench --recipients $(or $(RECIPIENTS),100000)
	$(GO) test -run '^$$' -bench . -benchtime 3x ./internal/sqlite/ ./internal/fcm/ ./internal/apns/

clean: ## remove build output and the local data directory
	rm -rf $(BIN) $(DATA)

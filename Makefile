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

test: ## vet, start DynamoDB Local, run every test (suites on SQLite and AWS adapters, pipeline, API, kill-and-restart)
	@echo "==> go vet"
	$(GO) vet ./...
	@set -e; ep=$$(scripts/dynamodb-local.sh start); trap 'scripts/dynamodb-local.sh stop' EXIT; \
	echo "==> go test (DynamoDB Local at $$ep; builds the herald binary for the end-to-end tests)"; \
	HERALD_DYNAMODB_ENDPOINT=$$ep $(GO) test -count=1 -timeout 30m ./...

build: ## build the herald CLI into bin/
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/herald ./cmd/herald

bench: build ## print throughput figures: pipeline vs raw SDK to the sandbox, stores, queue
	$(BIN)/herald bench --recipients $(or $(RECIPIENTS),100000)
	$(GO) test -run '^$$' -bench . -benchtime 3x ./internal/sqlite/ ./internal/fcm/ ./internal/apns/

clean: ## remove build output and the local data directory
	rm -rf $(BIN) $(DATA)

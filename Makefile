# Herald — run `make help` for the targets.
SHELL := /bin/bash
GO    ?= go
ADDR  ?= 127.0.0.1:8080
DATA  ?= ./.herald
BIN   := bin

.DEFAULT_GOAL := help

.PHONY: help run test build bench vet clean tools invoke docs

help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z_-]+:.*## /{printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

run: ## start Herald locally (API, workers, sandbox providers) on $(ADDR), data in $(DATA)
	$(GO) run ./cmd/herald dev --addr $(ADDR) --data $(DATA) $(if $(CONFIG),--config $(CONFIG))

# go test would run a subset of vet's checks on every package again: -vet=off, go vet ran them all.
test: ## vet, start DynamoDB Local, run every test (suites on SQLite and AWS adapters, pipeline, API, kill-and-restart, functions under the emulator, console in Chromium, CDK, the stack end to end)
	@echo "==> gofmt, go vet"
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.tools/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags costbench ./cmd/herald
	@$(MAKE) --no-print-directory tools test-binaries browser
	@set -e; ep=$$(scripts/dynamodb-local.sh start); trap 'scripts/dynamodb-local.sh stop' EXIT; \
	echo "==> go test (DynamoDB Local at $$ep; the herald and function binaries from $(TESTBIN))"; \
	HERALD_CHROMIUM=$$($(CHROMIUM_FIND)) HERALD_SCREENSHOTS=$(TESTBIN)/screenshots HERALD_AXE=$(CURDIR)/$(AXE) \
	HERALD_DYNAMODB_ENDPOINT=$$ep HERALD_RIE=$(RIE) HERALD_ASL_VALIDATOR=$(ASL_VALIDATE) HERALD_BIN=$(TESTBIN)/herald HERALD_FUNCTIONS_BIN=$(TESTBIN)/fn \
	$(GO) test -vet=off -count=1 -timeout 30m -skip '^TestContract|^TestDocExamples$$' ./...; \
	echo "==> idempotency key races under the race detector (both stores, the API on SQLite and on DynamoDB)"; \
	HERALD_DYNAMODB_ENDPOINT=$$ep $(GO) test -vet=off -count=1 -race -run 'TestStore/ClaimKey' ./internal/sqlite/ ./internal/ddb/; \
	HERALD_DYNAMODB_ENDPOINT=$$ep $(GO) test -vet=off -count=1 -race -run 'TestKeyRace|TestRacingRequests' ./internal/awsenv/ ./internal/local/; \
	echo "==> the Go client (clients/go, its own module)"; \
	(cd clients/go && $(GO) vet ./... && $(GO) test -count=1 -race ./...); \
	set -o pipefail; \
	if command -v node >/dev/null && command -v npm >/dev/null; then \
	  echo "==> the TypeScript client (clients/typescript: npm ci, tsc, the types checked against the OpenAPI document, node --test)"; \
	  (cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error && npm test 2>&1 | grep -E '^# (tests|pass|fail)|^not ok|^ok [0-9]+ -|rror'); \
	  ts=required; \
	else echo "==> the TypeScript client: skipped, no node and npm on this machine (it needs Node 20)"; ts=; fi; \
	echo "==> the docs' shell examples, run against herald dev (each block of README.md and docs/ by file and line)"; \
	HERALD_BIN=$(TESTBIN)/herald $(GO) test -vet=off -count=1 -v -run '^TestDocExamples$$' ./cmd/herald | grep -E '^(example:|ok|FAIL|--- FAIL|panic|    )'; \
	echo "==> the producer clients' contract suite (each case, client and transport)"; \
	HERALD_CONTRACT_TS=$$ts HERALD_DYNAMODB_ENDPOINT=$$ep HERALD_CHROMIUM= $(GO) test -vet=off -count=1 -v -run '^TestContract' ./clients/contract/ | grep -E '^(contract:|ok|FAIL|--- FAIL|panic)|_test.go:'
	@echo "==> CDK assertion tests and cdk-nag (infra/, its own module)"
	@$(MAKE) --no-print-directory test-infra
	@$(MAKE) --no-print-directory e2e-aws

docs: ## write the API reference (docs/api, a page per tag) from internal/api/openapi.json; a test fails when it is stale
	$(GO) run ./internal/apidoc/gen --openapi internal/api/openapi.json --out docs/api

# Fuzzing: every func FuzzXxx in the module's tests (their seed corpora run in `go test` too).
FUZZTIME ?= 30s
# Minimizing each new interesting input may take 60s by default, the whole FUZZTIME of a slow
# target; a few seconds keeps the time fuzzing.
FUZZMINIMIZETIME ?= 5s

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME (default 30s) each, one after another (FUZZPARALLEL=n limits the workers); findings go to the package's testdata/fuzz
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' cmd internal functions events | sort); do \
	  for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    echo "==> $$name (./$$(dirname $$f), $(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $(if $(FUZZPARALLEL),-parallel $(FUZZPARALLEL)) ./$$(dirname $$f); \
	  done; \
	done

build: ## build the herald CLI into bin/ and every Lambda into bin/lambda/<name>/bootstrap (linux/arm64)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/herald ./cmd/herald
	@$(MAKE) --no-print-directory build-lambda

bench: build tools ## print figures: single sends end to end (rates, backlog, rows per send), pipeline vs raw SDK throughput, a campaign (wall time, real-time latency during it, writes per recipient), a 1,000,000-row export (rows/s, peak heap), the AWS bill per million recipients (DynamoDB Local), function init and size, stores, queue
	$(BIN)/herald bench single --duration $(or $(SINGLE_DURATION),20s)
	$(BIN)/herald bench single --duration $(or $(SINGLE_DURATION),20s) --inbox
	$(BIN)/herald bench --recipients $(or $(RECIPIENTS),100000)
	$(BIN)/herald bench campaign --devices $(or $(DEVICES),300000)
	$(BIN)/herald bench export --rows $(or $(EXPORT_ROWS),1000000)
	@# the cost meter links the AWS fakes: only this benchmarking herald carries it, never the shipped one
	CGO_ENABLED=0 $(GO) build -trimpath -tags costbench -o $(BIN)/herald-bench ./cmd/herald
	@set -e; ep=$$(scripts/dynamodb-local.sh start); trap 'scripts/dynamodb-local.sh stop' EXIT; \
	$(BIN)/herald-bench bench cost --dynamodb-endpoint $$ep $(if $(COST_SENDS),--sends $(COST_SENDS)) $(if $(COST_DEVICES),--devices $(COST_DEVICES)); \
	echo "==> functions under aws-lambda-rie"; \
	HERALD_FUNCTION_BENCH=1 HERALD_DYNAMODB_ENDPOINT=$$ep HERALD_RIE=$(RIE) $(GO) test -count=1 -run TestReportInitAndSize -v ./functions/ | grep -v '^=== \|^--- \|^PASS\|^ok\|INFO'
	$(GO) test -run '^$$' -bench . -benchtime 3x ./internal/sqlite/ ./internal/apns/ ./internal/api/
	@echo "==> the Go producer client to the SQS fake: 20,000 sends from 50 callers (msgs/s, CPU per 10,000 messages)"
	$(GO) test -run '^$$' -bench 'GoClientSQS' -benchtime 20000x ./clients/contract/
	$(GO) test -run '^$$' -bench 'FCMSend$$' -benchtime 3x ./internal/fcm/
	@echo "==> single FCM pushes from 50 callers: the sender against the raw SDK's multicast of one token"
	$(GO) test -run '^$$' -bench 'FCMSendOne' -benchtime 20000x ./internal/fcm/
	@echo "==> storing deliveries: 100,000 in batches of 500 (the README's figures)"
	$(GO) test -run '^$$' -bench 'Deliveries500|RecordBatch' -benchtime 200x ./internal/sqlite/
	@echo "==> receiving large messages from the SQLite queue (the receive alone, µs/receive)"
	$(GO) test -run '^$$' -bench 'QueueReceiveLarge' -benchtime 2000x ./internal/sqlite/

# The binaries the end-to-end and emulator tests run, built once per `make test` for this host with
# the settings `go vet` and `go test` compile with (no -trimpath, no CGO_ENABLED or GOARCH change:
# any of those recompiles every package, minutes on a cold cache), so the packages come from the
# build cache they fill and only the mains (and the few packages lambda.norpc changes) are
# compiled. -s -w only skips writing DWARF and symbols: it changes no compile and links faster.
# The shipped artifacts are `make build`'s, not these.
TESTBIN := $(CURDIR)/.build

.PHONY: test-binaries
test-binaries: ## build the herald binary and every function for the tests into .build/ (host, from the build cache)
	@echo "==> $(TESTBIN)/herald and $(TESTBIN)/fn/<function>"
	$(GO) build -ldflags='-s -w' -o $(TESTBIN)/herald ./cmd/herald
	$(GO) build -tags lambda.norpc -ldflags='-s -w' -o $(TESTBIN)/fn/ ./functions/...

# Headless Chromium for the console's browser test (internal/local): Debian's package, installed
# when no chromium is found and we are root; otherwise the test skips, saying how to install it.
CHROMIUM_FIND := command -v chromium || command -v chromium-browser || true

.PHONY: browser
browser: ## install Debian's chromium for the console's browser test when none is found (as root)
	@if [ -n "$$($(CHROMIUM_FIND))" ]; then echo "==> chromium: $$($(CHROMIUM_FIND))"; \
	elif [ "$$(id -u)" = 0 ]; then echo "==> installing chromium (apt-get)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	else echo "==> no chromium: the console's browser test will skip; install it with: sudo apt-get install -y chromium"; fi

# aws-lambda-rie, pinned, built from the Go module proxy into .tools/bin.
RIE         := $(CURDIR)/.tools/bin/aws-lambda-rie
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d

# asl-validator, pinned in .tools/asl-validator (npm), run through scripts/asl-validate.sh.
ASL_VALIDATE  := $(CURDIR)/scripts/asl-validate.sh
ASL_VALIDATOR := .tools/asl-validator/node_modules/.bin/asl-validator

# axe-core, pinned in .tools/axe-core (npm): the console's browser tests inject it into every page.
AXE := .tools/axe-core/node_modules/axe-core/axe.min.js

tools: $(RIE) $(ASL_VALIDATOR) $(AXE) ## install the test tools the project pins (aws-lambda-rie, asl-validator, axe-core)

$(AXE): .tools/axe-core/package.json .tools/axe-core/package-lock.json
	cd .tools/axe-core && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(ASL_VALIDATOR): .tools/asl-validator/package.json .tools/asl-validator/package-lock.json
	$(ASL_VALIDATE) --install
	@touch $@

$(RIE):
	@echo "==> installing aws-lambda-rie $(RIE_VERSION) into .tools/bin"
	GOBIN=$(CURDIR)/.tools/bin $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

invoke: tools test-binaries ## run a function binary under aws-lambda-rie on an event: make invoke FN=ingest EVENT=events/ingest/sqs-batch-with-poison.json
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo "usage: make invoke FN=<function> EVENT=<events/… file>"; exit 2; }
	@set -e; ep=$$(scripts/dynamodb-local.sh start); trap 'scripts/dynamodb-local.sh stop' EXIT; \
	HERALD_INVOKE_FN=$(FN) HERALD_INVOKE_EVENT=$(EVENT) HERALD_DYNAMODB_ENDPOINT=$$ep HERALD_RIE=$(RIE) HERALD_FUNCTIONS_BIN=$(TESTBIN)/fn \
	$(GO) test -count=1 -run '^TestInvoke$$' -v ./functions/ | grep -v '^=== \|^--- \|^PASS\|^ok'


clean: ## remove build output and the local data directory
	rm -rf $(BIN) $(DATA) $(TESTBIN)

# ---- AWS: Lambda packages and the CDK app (infra/ is its own Go module) ----
ENV        ?= dev
LAMBDA_DIR := $(BIN)/lambda
CDK        := .tools/cdk/node_modules/.bin/cdk
# Offline-safe: no version check, no telemetry, no Node end-of-life banner from jsii.
CDK_ENV    := CDK_DISABLE_VERSION_CHECK=1 CDK_DISABLE_CLI_TELEMETRY=1 JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20

.PHONY: build-lambda synth deploy cdk-bootstrap test-infra e2e-aws

build-lambda: ## build every functions/<name> into bin/lambda/<name>/bootstrap (linux/arm64, for Lambda)
	@set -e; for d in functions/*/; do \
	  [ -d "$$d" ] || continue; n=$$(basename "$$d"); \
	  echo "==> $(LAMBDA_DIR)/$$n/bootstrap"; mkdir -p $(LAMBDA_DIR)/$$n; \
	  GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' \
	    -o $(LAMBDA_DIR)/$$n/bootstrap ./functions/$$n; \
	done

synth: build-lambda ## synthesize ENV=dev|prod into infra/cdk.out (offline, no credentials, no Docker; runs cdk-nag)
	rm -rf infra/cdk.out
	cd infra && $(CDK_ENV) CDK_CONTEXT_JSON='{"env":"$(ENV)"}' $(GO) run -mod=mod .

deploy: synth $(CDK) ## deploy ENV=dev|prod with the CDK CLI (AWS credentials; `make cdk-bootstrap` once per account/region)
	$(CDK_ENV) $(CDK) deploy --app infra/cdk.out --require-approval broadening herald-$(ENV)

cdk-bootstrap: synth $(CDK) ## once per account/region: CDK's bootstrap stack (ACCOUNT=… REGION=… or the credentials' defaults)
	$(CDK_ENV) $(CDK) bootstrap --app infra/cdk.out $(if $(ACCOUNT),aws://$(ACCOUNT)/$(REGION))

$(CDK): .tools/cdk/package.json .tools/cdk/package-lock.json
	cd .tools/cdk && npm ci --no-audit --no-fund
	@touch $@

test-infra: ## CDK assertion tests and cdk-nag AwsSolutions checks for dev and prod (infra/)
	cd infra && $(CDK_ENV) $(GO) test -mod=mod -count=1 -timeout 20m ./...

e2e-aws: tools ## the synthesized dev template end to end on this machine: functions under aws-lambda-rie, fakes of SQS, Step Functions, Scheduler, every AWS call checked against the template's IAM
	@set -e; dir=$$(mktemp -d); ep=$$(scripts/dynamodb-local.sh start); \
	trap 'scripts/dynamodb-local.sh stop; rm -rf "$$dir"' EXIT; \
	echo "==> building functions/* for this machine into $$dir/lambda"; \
	CGO_ENABLED=0 $(GO) build -tags lambda.norpc -o $$dir/bin/ ./functions/...; \
	for b in $$dir/bin/*; do n=$$(basename $$b); mkdir -p $$dir/lambda/$$n; mv $$b $$dir/lambda/$$n/bootstrap; done; \
	echo "==> synthesizing herald-dev with those assets into $$dir/cdk.out"; \
	(cd infra && $(CDK_ENV) CDK_OUTDIR=$$dir/cdk.out CDK_CONTEXT_JSON='{"env":"dev","lambdaAssets":"'"$$dir/lambda"'","nag":"false"}' $(GO) run -mod=mod .); \
	echo "==> the stack in a box (DynamoDB Local at $$ep)"; \
	HERALD_STACKBOX_TEMPLATE=$$dir/cdk.out/herald-dev.template.json HERALD_STACKBOX_BIN=$$dir/lambda HERALD_STACKBOX_ALLOWLIST=$(CURDIR)/infra/iam-allowlist.txt \
	HERALD_DYNAMODB_ENDPOINT=$$ep HERALD_RIE=$(RIE) HERALD_ASL_VALIDATOR=$(ASL_VALIDATE) \
	HERALD_CONTRACT_TS=$$(command -v node >/dev/null && test -f clients/typescript/dist/index.js && echo required) \
	$(GO) test -count=1 -timeout 10m -run '^TestStackInABox$$' -v ./internal/stackbox/run/ 2>&1 | tee $$dir/box.log; \
	if [ "$${PIPESTATUS[0]}" != 0 ]; then \
	  echo "==> the stack in a box failed; what its scenarios said (the box's logs are above):"; \
	  grep -E '^(scenario: |    [a-z_]+_test\.go:[0-9]+: |--- FAIL|    --- FAIL)' $$dir/box.log | grep -vE '^    box_test.go:[0-9]+: (box (logs|warnings)|the send function)' | cut -c1-600; \
	  sed -n '/the send function (last/,/^[^ ]/p' $$dir/box.log | grep -E 'batch sent|START|END|Task timed out|level' | cut -c1-300 | tail -60; \
	  sed -n '/box warnings and errors/,/^[^ ]/p' $$dir/box.log | cut -c1-400; \
	  exit 1; \
	fi

# Herald: the two commands a newcomer needs are `make run` and `make test`.
GO       ?= go
MODULES  := schemas pkg services e2e
PACKAGES := $(addprefix ./,$(addsuffix /...,$(MODULES)))
CONFIG   ?=

.PHONY: run build test vet fmt-check bench fuzz clean

## run: build and start `herald dev` (embedded NATS, switchboard, messenger, butlers)
run: build
	./bin/herald dev $(if $(CONFIG),--config $(CONFIG))

## build: every binary into ./bin
build:
	$(GO) build -o bin/ ./services/cmd/...

## test: everything CI runs: formatting, vet, lint, and all tests with the race detector
test: fmt-check vet lint
	$(GO) test -race -shuffle=on -count=1 -timeout 20m $(PACKAGES)

vet:
	$(GO) vet $(PACKAGES)
	@for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) build ./...) || exit 1; done

fmt-check:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## lint: staticcheck, and deadcode twice: over the tests too (nothing at all may be
## unreachable), and over the binaries alone (no production code only tests use, but
## for the seams listed below). Both tools are built from the Go module proxy into
## bin/tools at the versions pinned here.
STATICCHECK_VERSION ?= v0.8.2
XTOOLS_VERSION      ?= v0.52.0
# Production functions only tests call, kept on purpose (deadcode without -test):
#   audit.Decode, reload.Watcher.Current, deliver.Channels/Channel.Receives: readers
#     of a package's own records and registry, the API its tests and the schema
#     generator check it by;
#   obs.Server.Handler, butler.Butler.Handler/MCPServer: the in-process embedding of
#     a listener and a butler's MCP server, which tests drive without a port;
#   email.NewReceiverFactory/WithLookupTXT: the DNS seam the DKIM/SPF tests fill;
#   slack.Mrkdwn: the converter alone, which its tests and the butler's check.
DEADCODE_SEAMS := audit.go:.*Decode|watcher.go:.*Watcher.Current|registry.go:.*(Channels|Channel.Receives)|server.go:.*Server.Handler|butler.go:.*Butler.(Handler|MCPServer)|email/receiver.go:.*(NewReceiverFactory|WithLookupTXT)|mrkdwn.go:.*Mrkdwn
.PHONY: lint
lint:
	@GOBIN=$(CURDIR)/bin/tools $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@GOBIN=$(CURDIR)/bin/tools $(GO) install golang.org/x/tools/cmd/deadcode@$(XTOOLS_VERSION)
	@for m in $(MODULES); do (cd $$m && $(CURDIR)/bin/tools/staticcheck ./...) || exit 1; done
	@# Example functions without an Output comment are compiled, not run: docs.
	@bin/tools/deadcode -test $(PACKAGES) > bin/tools/deadcode-test.out
	@out=$$(grep -v ': unreachable func: Example' bin/tools/deadcode-test.out); \
	if [ -n "$$out" ]; then echo "deadcode -test: unreachable:"; echo "$$out"; exit 1; fi
	@# Test kits (packages named *test, and pkg/testkit) exist for tests.
	@bin/tools/deadcode $(PACKAGES) > bin/tools/deadcode.out
	@out=$$(grep -v -E '[a-z]+test/|/testkit/|$(DEADCODE_SEAMS)' bin/tools/deadcode.out); \
	if [ -n "$$out" ]; then echo "deadcode: only tests use (move it to a _test.go file, or list it in DEADCODE_SEAMS with why):"; echo "$$out"; exit 1; fi
	@echo "lint: staticcheck and deadcode clean"

## bench: every measurement of docs/performance.md in one table, each goal beside
## its figure with its verdict (about 4 minutes on 2 cores): the raw JetStream
## baseline, the route pipeline, herald dev (bin/herald) over MCP HTTP, a minute held
## at 500/s, the 100/1,000-butler fleets, and mcp-go alone as the MCP rows' floor. ROWS='raw|route' runs only those rows (raw,
## route, mcp, hold, scale, floor); PROFILE=1 also writes CPU and allocation profiles of
## every measured process to a directory it prints; HERALD_BIN=path measures another
## herald binary (an older build, say); CLUSTER=3 runs the rows on NATS (raw, route,
## mcp) on a 3-node cluster of nats-server processes, replicas 3, beside the floor.
ROWS       ?=
PROFILE    ?=
CLUSTER    ?=
HERALD_BIN ?= $(CURDIR)/bin/herald
bench: build
	@dir=""; if [ -n "$(PROFILE)" ]; then dir=$$(mktemp -d "$${TMPDIR:-/tmp}/herald-profiles.XXXXXX"); echo "profiles go to $$dir"; fi; \
	cd e2e && HERALD_BIN=$(HERALD_BIN) BENCH_PROFILE_DIR=$$dir BENCH_CLUSTER=$(CLUSTER) $(GO) test -run '^$$' \
		-bench '^BenchmarkHerald$$$(if $(ROWS),/^($(ROWS))$$)' -benchtime 1x -count 1 -timeout 20m \
		$$([ -n "$$dir" ] && echo "-o $$dir/e2e.test -cpuprofile $$dir/bench.cpu.pprof -memprofile $$dir/bench.allocs.pprof") . ; \
	status=$$?; if [ -n "$$dir" ]; then \
		echo; echo "Profiles in $$dir (bench.*: this benchmark's own process: rows raw and route, the MCP client, the Telegram fake;"; \
		echo "herald-<process>-<phase>.*: herald dev while it was measured):"; ls "$$dir" | grep pprof | sed 's/^/  /'; \
		echo "Read one with: go tool pprof -top $$dir/herald-mcp-cl.cpu.pprof (allocations: -sample_index=alloc_space)"; \
	fi; exit $$status

## fuzz: a short run of every fuzz target in the tree (FUZZTIME each)
FUZZTIME ?= 20s
fuzz:
	@grep -rl --include='*_test.go' '^func Fuzz' $(MODULES) | sort | while read -r file; do \
		dir=$$(dirname "$$file"); \
		for fn in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' "$$file" | cut -d' ' -f2); do \
			echo "== $$dir $$fn"; $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) ./$$dir || exit 1; \
		done; \
	done

## schemas: writes the messenger's list of channels (services/messenger/channels)
## from the folders that register a sender, then the channel lists of schemas/
## (delivery.channel's types, the source_channel enums) from the channels built in.
.PHONY: schemas
schemas:
	cd services && $(GO) test -count=1 -run TestChannelsImportsEverySender ./messenger/channels/ -update
	cd services && $(GO) test -count=1 -run TestSchemasListTheRegisteredChannels ./messenger/channels/ -update

clean:
	rm -rf bin .herald

## chaos: the fault scenarios with the real binaries as processes, against a
## nats-server built from its Go module (never downloaded); SCENARIO=name runs one
SCENARIO ?=
.PHONY: chaos
chaos:
	$(GO) build -o bin/ ./services/cmd/...
	cd e2e && $(GO) build -o ../bin/nats-server github.com/nats-io/nats-server/v2
	cd e2e && HERALD_BIN=$(CURDIR)/bin $(GO) test -tags chaos -count=1 -timeout 25m -v $(if $(SCENARIO),-run 'TestChaos/$(SCENARIO)') ./chaos/

## soak: a month of steady load in SOAK (default 10m): 50 notifies/s and 5 inbound/s
## through the real binaries, one kill -9 of each service, then per process RSS, open
## files and goroutines an hour after the warm-up and the 30-day projection against
## the budget of docs/reliability.md ("A month of steady load")
SOAK ?= 10m
.PHONY: soak
soak:
	$(GO) build -o bin/ ./services/cmd/...
	cd e2e && $(GO) build -o ../bin/nats-server github.com/nats-io/nats-server/v2
	cd e2e && HERALD_BIN=$(CURDIR)/bin CHAOS_SOAK=$(SOAK) $(GO) test -tags 'chaos soak' -count=1 -timeout 2h -v -run '^TestSoak$$' ./chaos/

## claude-test: the Claude Code CLI at CLAUDE_CODE_VERSION against herald dev, as a
## user connects it (the banner's claude mcp add line, the README's .mcp.json, the
## plugin), with a stand-in of the Anthropic API on loopback so nothing leaves the
## machine (about 90 s once built). npm installs the CLI once into CLAUDE_CODE_DIR;
## without npm (or tmux, which the interactive session needs) the test says so and skips.
CLAUDE_CODE_VERSION ?= 2.1.332
CLAUDE_CODE_DIR     ?= $${XDG_CACHE_HOME:-$$HOME/.cache}/herald/claude-code-$(CLAUDE_CODE_VERSION)
.PHONY: claude-test
claude-test:
	$(GO) build -o bin/ ./services/cmd/...
	@dir="$(CLAUDE_CODE_DIR)"; cli="$$dir/node_modules/.bin/claude"; \
	if "$$cli" --version 2>/dev/null | grep -q '^$(CLAUDE_CODE_VERSION) '; then \
		echo "Claude Code $(CLAUDE_CODE_VERSION): $$cli"; \
	elif ! command -v npm >/dev/null; then \
		echo "npm is not installed, so Claude Code $(CLAUDE_CODE_VERSION) cannot be: the test skips (apt-get install npm)"; cli=""; \
	elif echo "installing Claude Code $(CLAUDE_CODE_VERSION) (npm @anthropic-ai/claude-code) into $$dir"; \
		npm install --prefix "$$dir" --no-audit --no-fund --loglevel=error '@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)' && \
		"$$cli" --version | grep -q '^$(CLAUDE_CODE_VERSION) '; then \
		echo "Claude Code $(CLAUDE_CODE_VERSION): $$cli"; \
	else \
		echo "npm could not install @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) (see above): the test skips"; cli=""; \
	fi; \
	cd e2e && CLAUDE_BIN="$$cli" HERALD_BIN=$(CURDIR)/bin $(GO) test -tags claude -count=1 -timeout 10m -v ./claude/

## images: the fleet's images with no registry: herald:local (herald, switchboard,
## messenger, butler) and herald-nats:local (nats-server from its Go module), static
## binaries built here on scratch with the final stages of deploy/Dockerfile
.PHONY: images
images:
	GO=$(GO) sh deploy/images.sh

## alerts-test: deploy/alerts.yml through Prometheus's own promtool (check rules,
## check config, and test rules with deploy/alerts_test.yml: each alert fires on its
## condition), and every metric the rules and the Grafana dashboard name served by a
## real herald dev on deploy/herald.yaml. promtool is built from the Go module proxy
## at PROMTOOL_VERSION and cached in PROMTOOL (about 9 minutes the first time on 2
## cores); a build that fails fails the target.
PROMTOOL_VERSION ?= v0.316.0
PROMTOOL         ?= $${XDG_CACHE_HOME:-$$HOME/.cache}/herald/promtool-$(PROMTOOL_VERSION)
.PHONY: promtool alerts-test
promtool:
	@p="$(PROMTOOL)"; if [ -x "$$p" ]; then echo "promtool $(PROMTOOL_VERSION): $$p"; exit 0; fi; \
	echo "building promtool $(PROMTOOL_VERSION) from the Go module proxy into $$p (about 9 minutes the first time)"; \
	tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/herald-promtool.XXXXXX") && \
	(cd / && GOWORK=off GOBIN="$$tmp" CGO_ENABLED=0 $(GO) install github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)) && \
	"$$tmp/promtool" --version >/dev/null && mkdir -p "$$(dirname "$$p")" && mv "$$tmp/promtool" "$$p"; \
	status=$$?; rm -rf "$$tmp"; \
	if [ $$status != 0 ]; then echo "promtool $(PROMTOOL_VERSION) could not be built (see above): make alerts-test cannot check deploy/alerts.yml" >&2; fi; exit $$status
alerts-test: promtool
	cd e2e && PROMTOOL="$(PROMTOOL)" $(GO) test -count=1 -timeout 10m -v -run '^(TestAlertRulesPromtool|TestAlertsNameServedMetrics)$$' .

## compose-test: the compose fleet of deploy/ in real containers under a dockerd of its
## own (docs/fleet.md walks the same steps); installs docker.io and builds Compose v2
## from the Go module proxy (cached) when they are missing. Needs root. docs/fleet.md's
## claude mcp add lines run with the CLI make claude-test installed (else they skip).
COMPOSE_VERSION ?= v2.40.3
.PHONY: compose-test
compose-test:
	@plugin=$$(COMPOSE_VERSION=$(COMPOSE_VERSION) GO=$(GO) sh e2e/compose/prepare.sh) || exit 1; \
	cli="$(CLAUDE_CODE_DIR)/node_modules/.bin/claude"; [ -x "$$cli" ] || cli=""; \
	cd e2e && COMPOSE_PLUGIN="$$plugin" CLAUDE_BIN="$$cli" $(GO) test -tags compose -count=1 -timeout 25m -v ./compose/; \
	status=$$?; sh compose/cleanup.sh; exit $$status

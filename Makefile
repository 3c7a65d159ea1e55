GO      ?= go
BIN     ?= bin/peakline
DATA    ?= $(CURDIR)/data
LISTEN  ?= 127.0.0.1:8080
EXAMPLE ?= testdata/ansible/runner-basic
EVENTS  ?= https://awx.example/api/v2/jobs/{job_id}/job_events/?counter__gte={counter_gte}&counter__lte={counter_lte}

.PHONY: build run test test-short vet bench clean tools docs

build:
	$(GO) build -o $(BIN) .

# The CLI reference, docs/cli, from the commands themselves (make test
# fails when it is stale: TestCLIDocsCurrent).
docs: build
	rm -rf docs/cli
	$(BIN) docs docs/cli

# Serve the bundled example job (a real ansible-runner tree) on an embedded store.
run: build
	$(BIN) import --data $(DATA) $(EXAMPLE)
	@echo "peakline: example job page: http://$(LISTEN)/jobs/demo2 (graph data: http://$(LISTEN)/api/v1/jobs/demo2/graph?points=1000)"
	$(BIN) serve --data $(DATA) --listen $(LISTEN) --events-url '$(EVENTS)'

# promtool and prometheus at the version of the linked Prometheus module, for
# the remote-write/query tests, the side-by-side conformance test and the
# bench peers. The first
# build takes ~10 minutes on 2 cores; later ones come from the build cache.
PROM_VERSION ?= v0.316.0
TOOLS_BIN    ?= $(CURDIR)/bin

VM_VERSION   ?= v1.151.0

tools: $(TOOLS_BIN)/promtool $(TOOLS_BIN)/prometheus $(TOOLS_BIN)/victoria-metrics

$(TOOLS_BIN)/promtool $(TOOLS_BIN)/prometheus:
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/prometheus/prometheus/cmd/$(notdir $@)@$(PROM_VERSION)

# VictoriaMetrics single-node, the second peer of peakline bench ingest/series.
$(TOOLS_BIN)/victoria-metrics:
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics@$(VM_VERSION)

# Grafana Mimir and Thanos, built from the module proxy into ./bin/scaleout
# (at the lowest CPU priority: minutes on an idle machine, up to an hour
# beside other work; kept once built), and the remote
# replica tests run against each, started on loopback with temp dirs and
# stopped after (scripts/scaleout-test.sh; README, "Scaling out"). Not part
# of make test, which tests VictoriaMetrics single-node and Prometheus.
SCALEOUT_BIN ?= $(TOOLS_BIN)/scaleout

.PHONY: scaleout-tools test-scaleout

scaleout-tools:
	GO=$(GO) scripts/scaleout-build.sh $(SCALEOUT_BIN)

test-scaleout: scaleout-tools
	GO=$(GO) scripts/scaleout-test.sh $(SCALEOUT_BIN)

# The packages with concurrency run under the race detector.
RACE_PKGS ?= ./server/ ./tsdb/... ./collector/...

# Every test: unit, end-to-end over real HTTP, real data. Packages run one
# at a time (-p 1): the collector tests measure real CPU use of real
# commands, which other test binaries on the same two cores would distort.
# The purego runs check downsample's portable kernels, which amd64 with
# AVX2 and AVX-512 would otherwise skip.
test: tools
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './bin/*')); if [ -n "$$out" ]; then echo "gofmt -w these files:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -p 1 -count=1 -timeout 25m $$($(GO) list ./... | grep -v -e '/server$$' -e '/tsdb' -e '/collector')
	$(GO) test -race -p 1 -count=1 -timeout 25m $(RACE_PKGS)
	$(GO) vet -tags purego ./downsample/
	$(GO) test -count=1 -tags purego ./downsample/

# The collector on a real cgroup v2 kernel: boots Debian's 6.1 and 6.12
# kernels (pinned in scripts/v2vm/assets.sh) under qemu with cgroup_no_v1=all
# and runs there the collector packages' real-cgroup tests, an ansible-runner
# job under `peakline collect` and one under `peakline agent`, and records
# real v2 job cgroups (docs/CGROUP-V2.md). Needs root. Kernels, the guest's
# Debian root and the binaries are kept in bin/v2vm. Warm: 271 s on this
# machine at load 2.5-4 (6.1 149 s, 6.12 119 s); cold adds about 8 minutes
# once (kernels 36 s, debootstrap and install 276 s, first static build 177 s).
# record-v2 also copies the 6.12 recording to collector/discover/testdata/v2-real.
.PHONY: test-v2 record-v2
test-v2:
	GO=$(GO) scripts/v2vm/run.sh test

record-v2:
	GO=$(GO) scripts/v2vm/run.sh record

test-short:
	$(GO) test -short ./...

# Go benchmarks, then the quick set of the side-by-side bench CLI (peers from
# make tools are used when present; docs/BENCHMARKS.md holds a full run).
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x ./tsdb/ ./server/ .
	$(BIN) bench downsample --quick
	$(BIN) bench graph --quick
	$(BIN) bench ingest --quick
	$(BIN) bench soak --quick
	$(BIN) bench series --quick

clean:
	rm -rf bin $(DATA)

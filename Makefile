GO      ?= go
BIN     ?= bin/peakline
DATA    ?= $(CURDIR)/data
LISTEN  ?= 127.0.0.1:8080
EXAMPLE ?= testdata/ansible/runner-basic
EVENTS  ?= https://awx.example/api/v2/jobs/{job_id}/job_events/?counter__gte={counter_gte}&counter__lte={counter_lte}

.PHONY: build run test test-short vet bench clean tools dist docs

# Release identity, set into github.com/prometheus/common/version at link
# time (peakline version, peakline_build_info, the Prometheus buildinfo).
# The build date is the commit's: the same commit builds the same bytes.
VERSION    ?= $(shell scripts/version.sh)
REVISION   ?= $(shell git rev-parse HEAD 2>/dev/null)
BRANCH     ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null)
BUILD_DATE ?= $(shell TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null)
VERSION_PKG = github.com/prometheus/common/version
LDFLAGS    ?= -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION) \
	-X $(VERSION_PKG).Branch=$(BRANCH) -X $(VERSION_PKG).BuildDate=$(BUILD_DATE)

# A static binary: nothing in peakline needs cgo (net and os/user use
# their Go implementations).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) .

# Release artifacts into dist/: tarballs, .deb and .rpm packages for
# linux/amd64 and linux/arm64, an OCI image index of both, the Helm chart
# set to the release, and SHA256SUMS (docs/installing.md). scripts/dist
# builds them with nfpm and go-containerregistry; no container daemon is
# needed. 80 s with a warm build cache; the first arm64 build ~10 min.
DIST ?= $(CURDIR)/dist
dist:
	$(GO) run ./scripts/dist --out $(DIST) --version '$(VERSION)' --revision '$(REVISION)' \
		--branch '$(BRANCH)' --build-date '$(BUILD_DATE)'

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

tools: $(TOOLS_BIN)/promtool $(TOOLS_BIN)/prometheus $(TOOLS_BIN)/victoria-metrics $(TOOLS_BIN)/helm

$(TOOLS_BIN)/promtool $(TOOLS_BIN)/prometheus:
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/prometheus/prometheus/cmd/$(notdir $@)@$(PROM_VERSION)

# VictoriaMetrics single-node, the second peer of peakline bench ingest/series.
$(TOOLS_BIN)/victoria-metrics:
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics@$(VM_VERSION)

# helm, for helm lint and helm template of deploy/helm/peakline in the
# deploy package's tests (3 minutes to build on 2 busy cores, once).
HELM_VERSION ?= v3.22.0
$(TOOLS_BIN)/helm:
	GOBIN=$(TOOLS_BIN) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# The chart checked alone: lint, then the deploy tests, which render it
# and check every object.
.PHONY: helm-check manifests
helm-check: $(TOOLS_BIN)/helm
	$(TOOLS_BIN)/helm lint --strict --kube-version 1.30.0 deploy/helm/peakline
	HELM=$(TOOLS_BIN)/helm $(GO) test -count=1 -run 'Helm|Manifests' ./deploy/

# deploy/kubernetes holds the chart rendered with its defaults, for
# kubectl apply without helm; TestManifestsMatchChart keeps them equal.
manifests: $(TOOLS_BIN)/helm
	$(TOOLS_BIN)/helm template peakline deploy/helm/peakline --namespace peakline --kube-version 1.30.0 > deploy/kubernetes/peakline.yaml
	$(TOOLS_BIN)/helm template peakline deploy/helm/peakline --namespace peakline --kube-version 1.30.0 --set openshift.enabled=true > deploy/kubernetes/peakline-openshift.yaml

# Grafana Mimir and Thanos, built from the module proxy into ./bin/scaleout
# (at the lowest CPU priority: minutes on an idle machine, up to an hour
# beside other work; kept once built), and the remote
# replica tests run against each, started on loopback with temp dirs and
# stopped after (scripts/scaleout-test.sh; docs/scaling-out.md). Not part
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
# and runs there the collector packages' real-cgroup tests, ansible-runner
# jobs under `peakline collect`, the contended-run test and every agent
# end-to-end test, and records real v2 job cgroups (docs/CGROUP-V2.md).
# Needs root; .ci/run runs it after make test. Kernels, the guest's Debian
# root and the binaries are kept in /var/cache/peakline-v2vm when it exists,
# else bin/v2vm. Warm: 948 s on this machine at a host load of about 2
# (6.1 575 s, 6.12 366 s, one after the other); cold adds about 3 minutes.
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
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x ./tsdb/ ./server/ . ./e2e/
	$(BIN) bench downsample --quick
	$(BIN) bench graph --quick
	$(BIN) bench ingest --quick
	$(BIN) bench soak --quick
	$(BIN) bench series --quick

clean:
	rm -rf bin dist $(DATA)

# courier — see README.md. Every target works on a clean clone with Go and the
# Go module proxy; the control plane is built from pinned versions into a cache
# every clone on the machine shares (e2e/tools/build.sh says where).

GO            ?= go
# The image tag manifests/ deploy (manifests/kustomization.yaml, images:).
VERSION       ?= 0.1.0
IMAGE_REPO    ?= ghcr.io/courier-k8s/courier
IMAGE         ?= $(IMAGE_REPO):$(VERSION)
# Where `make release` writes.
DIST          ?= dist
# What `courier version` and courier_build_info say: VERSION and the commit
# (with -dirty for uncommitted changes), stamped in; OUT is where build puts it.
REVISION      ?= $(shell r=$$(git rev-parse HEAD 2>/dev/null) && { [ -z "$$(git status --porcelain)" ] || r=$$r-dirty; echo $$r; })
LDFLAGS        = -X github.com/courier-k8s/courier/internal/version.version=$(VERSION) -X github.com/courier-k8s/courier/internal/version.revision=$(REVISION)
OUT           ?= bin/courier
SUDO          := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
UNIT_PKGS      = $$($(GO) list ./... | grep -v '/e2e\(/\|$$\)')
# Built on demand; prints the directory of the control-plane binaries.
CONTROLPLANE   = $$(e2e/tools/build.sh)
# Built on demand (make help gives how long, cold); prints the directory of
# Argo Rollouts' and External Secrets Operator's binaries and CRDs.
INTEGRATIONS   = $$(e2e/tools/build-integrations.sh)

.PHONY: all help docs build image release test-compat test-compat-smoke test-integrations controlplane run check test unit e2e soak chaos lint chart-files bench bench-scale bench-record bench-tables bench-smoke clean clean-cache prometheus

all: build

## help: this list: the everyday targets, then the long ones with their run times on 2 cores (the one place those times are written), then the rest
EVERYDAY := run test check e2e unit lint docs build
help:
	@awk -v everyday="$(EVERYDAY)" ' \
	  /^## [a-z0-9-]+: / { t = $$2; sub(/:$$/, "", t); d = $$0; sub(/^## [a-z0-9-]+: /, "", d); desc[t] = d; order[++n] = t } \
	  function show(t) { printf "  %-18s %s\n", t, desc[t]; shown[t] = 1 } \
	  END { k = split(everyday, e, " "); print "Everyday:"; for (i = 1; i <= k; i++) show(e[i]); \
	    print "\nLong runs (times on 2 cores):"; for (i = 1; i <= n; i++) if (!shown[order[i]] && desc[order[i]] ~ /\]$$/) show(order[i]); \
	    print "\nThe rest:"; for (i = 1; i <= n; i++) if (!shown[order[i]]) show(order[i]) }' $(MAKEFILE_LIST)

## build: bin/courier (OUT=path to write it elsewhere), VERSION and the git commit stamped in
build:
	$(GO) build -trimpath -ldflags="$(LDFLAGS)" -o $(OUT) .

## image: bin/courier-image.tar, the OCI image index (linux/amd64, linux/arm64) of the static binary (no Docker needed); docker/podman load it
image:
	for arch in amd64 arm64; do CGO_ENABLED=0 GOARCH=$$arch $(GO) build -trimpath -ldflags="-s -w $(LDFLAGS)" -o bin/courier-linux-$$arch . || exit 1; done
	cd release && $(GO) run ./image --ref $(IMAGE) --version $(VERSION) --revision $(REVISION) --out $(CURDIR)/bin/courier-image.tar \
	  --binary linux/amd64=$(CURDIR)/bin/courier-linux-amd64 --binary linux/arm64=$(CURDIR)/bin/courier-linux-arm64
	@echo "bin/courier-image.tar: $(IMAGE)"

## release: DIST (dist/) for VERSION: image index, install.yaml and Helm chart (image pinned by digest), SBOM, provenance, binaries, SHA256SUMS, signed with COSIGN_KEY/COSIGN_PASSWORD (UNSIGNED=1: not) [about 8 min cold (four cross-builds, cosign), 25 s warm]
release:
	VERSION=$(VERSION) REVISION=$(REVISION) DIST=$(DIST) IMAGE_REPO=$(IMAGE_REPO) CONTROLPLANE="$(CONTROLPLANE)" release/release.sh

## controlplane: build etcd, kube-apiserver, controller manager, scheduler, kubectl and kwok into the shared cache (only when missing or re-pinned) [about 6 min cold (330 s measured), then nothing]
controlplane:
	@e2e/tools/build.sh >/dev/null

## run: courier's main job on a local cluster, with a demo; Ctrl-C stops everything
run: build
	@$(GO) build -trimpath -o bin/run ./e2e/run
	@bin/run --controlplane-bin="$(CONTROLPLANE)" --courier=$(OUT)

## check: lint and unit tests, the inner loop (no control plane needed)
check: lint unit

## test: check, then the end-to-end suite (with a part of it on the oldest supported Kubernetes beside it) and, beside them, the benchmark on a tiny dataset (what CI runs); ends with the ten slowest tests [about 18 min warm: check 3–4, the suite 12–15; a fresh machine first builds the control planes and, while tests run, the tools: see CONTRIBUTING.md]
# bench-smoke mostly waits (its own control plane, steady windows): it runs
# beside the suite, its log in .run/bench-smoke.log, shown if it fails.
test: check prometheus
	@mkdir -p .run; $(MAKE) --no-print-directory bench-smoke > .run/bench-smoke.log 2>&1 & bench=$$!; \
	$(GO) run ./e2e/suite -shards=$(SHARDS) -compat='$(COMPAT_SMOKE)'; suite=$$?; \
	if wait $$bench; then echo "bench-smoke: passed (.run/bench-smoke.log)"; else cat .run/bench-smoke.log; echo "bench-smoke: FAILED" >&2; exit 1; fi; \
	exit $$suite

## unit: unit tests with the race detector (courier's packages, the fault campaign's oracle and traces, the bench's repetition rules, the release tools and bench-scale's verdicts)
unit:
	$(GO) test -race -count=1 $(UNIT_PKGS) ./e2e/oracle ./e2e/trace ./e2e/bench ./e2e/cluster
	cd release && $(GO) test -race -count=1 ./...
	cd e2e/bench/scale && $(GO) test -race -count=1 ./...

## e2e: the end-to-end suite, in SHARDS processes at once, each on a control plane of its own (RUN=regexp: only those tests); ends with the ten slowest tests; builds the tools its tests need while they run [12–15 min warm]
# e2e/suite says how the tests are spread (by e2e/testdata/durations.json;
# E2E_RECORD=1 rewrites it from a passing run).
SHARDS ?= 4
e2e: prometheus
	$(GO) run ./e2e/suite -shards=$(SHARDS) -run='$(RUN)' $(if $(E2E_RECORD),-record)

## test-integrations: only the end-to-end tests with Argo Rollouts and External Secrets Operator (part of make e2e) [a few minutes; the first run on a machine builds both, about 10 min (574 s measured beside the e2e suite)]
test-integrations:
	COURIER_CONTROLPLANE_BIN="$(CONTROLPLANE)" COURIER_INTEGRATIONS_DIR="$(INTEGRATIONS)" $(GO) test -p 1 -count=1 -timeout=30m -v -run 'TestArgoRollouts|TestExternalSecrets' ./e2e/

## test-compat: the end-to-end suite on the oldest Kubernetes minor courier supports (1.30), built like the main control plane [about 15 min; 5 min more cold (303 s measured)]
test-compat: prometheus
	COURIER_E2E_KUBERNETES_MINOR=30 COURIER_CONTROLPLANE_BIN="$$(e2e/tools/build-compat.sh)" COURIER_INTEGRATIONS_DIR="$(INTEGRATIONS)" $(GO) test -p 1 -count=1 -timeout=60m -v ./e2e/

## test-compat-smoke: the part of the end-to-end suite make test runs on the oldest Kubernetes minor courier supports (1.30): replication, selectors, the guard and its policy, reload, restarts, leader election, status, least privilege (here each rule removed in turn; make test proves only that the rules suffice), the namespace-scoped mode [about 6 min; the first run builds its control plane, about 5 min more]
COMPAT_SMOKE := ^(TestReplicaMatchesSourceAndCarriesOnlyCourierMetadata|TestReplicaLifecycle|TestEverySelectorForm|TestImmutableAndTypeChangesRecreateTheReplica|TestGuardPolicyDeniesUnauthorisedChangesInTheAPIServer|TestProtectedSourceRetiredByRemovingTheLabelFirst|TestClassicRecipeSourceChangeRollsOutEveryConsumerOfItsReplicas|TestChangesWithinTheDebounceGiveOneRollout|TestRestartsNeverRollOutAndAChangeWhileDownRollsOutOnce|TestLeaderFailover|TestSIGTERMExitsZeroWithinFiveSeconds|TestStatusReportsEverySourceAndItsConsumers|TestRBACIsMinimal|TestNamespaceScopedCourierNeedsOnlyRoles|TestNamespaceScopedCustomKindsUseTheChartsRoles|TestResourceLabelSelectorKeepsOtherObjectsOutOfCouriersReachAndMemory)$$
test-compat-smoke: prometheus
	COURIER_E2E_KUBERNETES_MINOR=30 COURIER_CONTROLPLANE_BIN="$$(e2e/tools/build-compat.sh)" COURIER_INTEGRATIONS_DIR="$(INTEGRATIONS)" \
	  $(GO) test -p 1 -count=1 -timeout=30m -v -run '$(COMPAT_SMOKE)' ./e2e/

## soak: the randomized soak test for SOAK (default 10m) instead of make test's 2 min; TRACE=file replays a trace a failing soak wrote to .run/soak/ instead [SOAK and about a minute]
SOAK ?= 10m
soak:
	COURIER_SOAK=$(SOAK) COURIER_SOAK_TRACE="$(TRACE)" COURIER_CONTROLPLANE_BIN="$(CONTROLPLANE)" $(GO) test -count=1 -timeout=0 -v -run 'TestSoak$$' ./e2e/

## chaos: the fault campaign: every crash point of every scenario, the broken builds the oracle must catch, and DURATION (default 1h) of random transitions and faults from SEED (default 1), judged by the audit-log oracle; ends with the line "crash points: N tried; perturbations: M; transitions: T; violations: V" and exits 0 only without violations [DURATION and about 8 min]
SEED ?= 1
DURATION ?= 1h
chaos:
	@log=$$(mktemp); st=$$(mktemp); \
	{ COURIER_CHAOS=1 COURIER_SOAK=$(DURATION) COURIER_SOAK_SEED=$(SEED) COURIER_CONTROLPLANE_BIN="$(CONTROLPLANE)" \
	  $(GO) test -p 1 -count=1 -timeout=0 -v -run '^(TestCrashPoints.*|TestOracleFindsTheDefectsOfBrokenBuilds|TestAFailingSoakShortensItsTraceAndReplaysIt|TestSoak)$$' ./e2e/ 2>&1; echo $$? > $$st; } | tee $$log; \
	s=$$(cat $$st); line=$$(grep '^crash points:' $$log | tail -1); rm -f $$log $$st; \
	echo "$${line:-crash points: ? tried; perturbations: ?; transitions: ?; violations: ? (the run ended before its summary)}"; exit $$s

## docs: regenerate docs/reference.md from the code (flags, keys, Event reasons, metrics) and the permission tables of SECURITY.md and docs/scoped.md from manifests/
docs:
	$(GO) test -count=1 -run '^(TestReferenceIsCurrent|TestPermissionTablesAreCurrent)$$' . -update

## lint: gofmt, go vet, staticcheck; docs/reference.md up to date, and every link, make target, path and test the docs name exists
DOCS_TESTS := ^(TestReferenceIsCurrent|TestPermissionTablesAreCurrent|TestDocsNameOnlyWhatExists)$$
# The chart carries copies of the files manifests/ installs (Helm reads nothing
# outside a chart); `make chart-files` refreshes them, lint fails when they differ.
CHART_FILES := manifests/dashboards/courier.json manifests/guard-policy.yaml \
	manifests/monitoring/prometheusrule.yaml manifests/monitoring/servicemonitor.yaml

## chart-files: copy manifests/' guard policy, dashboard and monitoring into the Helm chart
chart-files:
	cp $(CHART_FILES) charts/courier/files/

lint:
	@for f in $(CHART_FILES); do cmp -s $$f charts/courier/files/$$(basename $$f) || { echo "charts/courier/files/$$(basename $$f) differs from $$f: run make chart-files" >&2; exit 1; }; done
	@unformatted=$$(gofmt -l .); [ -z "$$unformatted" ] || { echo "not gofmt-ed: $$unformatted" >&2; exit 1; }
	@$(GO) test -count=1 -run '$(DOCS_TESTS)' . >/dev/null || { $(GO) test -count=1 -run '$(DOCS_TESTS)' . >&2; exit 1; }
	$(GO) vet ./...
	cd e2e/tools && $(GO) vet ./...
	cd e2e/bench/scale && $(GO) vet ./...
	cd e2e/bench/scale && $(GO) run . -root=$(CURDIR) -tables -check
	cd release && $(GO) vet ./...
	@echo "staticcheck (built from the module proxy on first use: about a minute)" >&2
	$(GO) run $(STATICCHECK) ./...
	cd release && $(GO) run $(STATICCHECK) ./...

## bench: the benchmark on the full dataset (BENCHMARKS.md) [about 22 min]
bench:
	$(GO) run ./e2e/bench -controlplane-bin="$(CONTROLPLANE)" -out=.run/bench/results.json

## bench-scale: the benchmark at SIZES namespaces (default 1000,3000,10000; REPEATS repetitions each), each on a fresh control plane, courier under the chart's memory limits unless CHART_LIMITS=false; .run/bench-scale/ gets scale.json, scale.md, SVG pictures and profiles (BENCHMARKS.md) [about 70 min at the defaults]
SIZES        ?= 1000,3000,10000
REPEATS      ?= 5,5,3
CHART_LIMITS ?= true
bench-scale:
	cp="$(CONTROLPLANE)" && cd e2e/bench/scale && $(GO) run . -root=$(CURDIR) -controlplane-bin="$$cp" -sizes=$(SIZES) -repeats=$(REPEATS) -chart-limits=$(CHART_LIMITS)

## bench-record: commit the finished bench-scale run in .run/bench-scale (measured on a clean tree) to docs/bench-scale/runs/, then regenerate as bench-tables does
bench-record:
	cd e2e/bench/scale && $(GO) run . -root=$(CURDIR) -record=.run/bench-scale

## bench-tables: regenerate bench-scale's tables, pictures and every quoted figure (BENCHMARKS.md, docs/scale.md, docs/design.md, README.md, docs/bench-scale/) from the runs in docs/bench-scale/runs/; make lint fails when they differ
bench-tables:
	cd e2e/bench/scale && $(GO) run . -root=$(CURDIR) -tables

## bench-smoke: the benchmark (under the chart's memory limits) and bench-scale's smallest size on tiny datasets, so neither can rot (part of make test)
bench-smoke:
	$(GO) run ./e2e/bench -controlplane-bin="$(CONTROLPLANE)" -dir=.run/bench-smoke -out=.run/bench-smoke/results.json \
	  -chart-limits=charts/courier/values.yaml -namespaces=20 -secrets=100 -configmaps=40 -helm-releases=5 -helm-bytes=51200 -deployments=40 -consumers=20 \
	  -repeats=2 -steady=10s -clusters=1x3
	cp="$(CONTROLPLANE)" && cd e2e/bench/scale && $(GO) run . -root=$(CURDIR) -controlplane-bin="$$cp" -dir=.run/bench-smoke/scale \
	  -sizes=20 -repeats=2 -steady=10s -helm-bytes=51200

## prometheus: Debian's prometheus and promtool, for the dashboard and alert tests (installed when missing)
prometheus:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || { \
	  echo "installing Debian's prometheus package (dashboard and alert-rule tests)" >&2; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }

## clean: remove bin/, dist/ and .run/ (the control-plane cache stays)
clean:
	rm -rf bin dist .run

## clean-cache: remove the control-plane cache every clone on this machine shares
clean-cache:
	rm -rf "$${COURIER_CONTROLPLANE_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/courier/controlplane}"

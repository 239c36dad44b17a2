# courier — see README.md. Every target works on a clean clone with Go and the
# Go module proxy; the control plane is built from pinned versions into .cache/.

GO            ?= go
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
UNIT_PKGS      = $$($(GO) list ./... | grep -v /e2e)
# Built on demand; prints the directory of the control-plane binaries.
CONTROLPLANE   = $$(e2e/tools/build.sh)

.PHONY: all build controlplane run test unit e2e lint bench clean

all: build

build:
	$(GO) build -o bin/courier .

## controlplane: build etcd, kube-apiserver, controller manager, scheduler, kubectl and kwok (only when missing or re-pinned)
controlplane:
	@e2e/tools/build.sh >/dev/null

## run: courier's main job on a local cluster, with a demo; Ctrl-C stops everything
run: build
	@$(GO) build -o bin/run ./e2e/run
	@bin/run --controlplane-bin="$(CONTROLPLANE)" --courier=bin/courier

## test: lint, unit tests, end-to-end tests against the local control plane
test: lint unit e2e

unit:
	$(GO) test -race -count=1 $(UNIT_PKGS)

e2e:
	COURIER_CONTROLPLANE_BIN="$(CONTROLPLANE)" $(GO) test -count=1 -timeout=60m -v ./e2e/

lint:
	$(GO) vet ./...
	cd e2e/tools && $(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf bin .run

// Package e2e holds courier's end-to-end tests. TestMain builds courier, starts
// one local control plane (package cluster) for the whole run and stops it at
// the end; each test starts its own courier processes and namespaces and
// checks what a user would see with kubectl.
//
// Run them with `make test` (or `make e2e`); they need the control plane built
// by `make controlplane`, which TestMain also triggers when
// COURIER_CONTROLPLANE_BIN is not set.
package e2e

// Package cluster runs a real, local Kubernetes control plane for courier's
// end-to-end tests, benchmarks and `make run`: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok (fake nodes whose pods turn
// Running and Ready without a container runtime), as plain processes on free
// loopback ports.
//
// The binaries come from e2e/tools (`make controlplane`). Every process is
// started in its own process group with a parent-death signal, and Stop ends
// each by its PID, so nothing outlives the run, also on failure or Ctrl-C.
package cluster

//go:build tools

// This file pins the control-plane commands in go.mod so `go build` of each
// of them uses the versions recorded there.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)

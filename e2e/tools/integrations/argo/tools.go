//go:build tools

package tools

import _ "github.com/argoproj/argo-rollouts/cmd/rollouts-controller"

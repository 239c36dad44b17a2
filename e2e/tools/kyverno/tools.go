//go:build tools

package tools

import _ "github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno"

// Package clusters reads what a cluster Secret says: the name of a cluster
// courier replicates into (its courier.dev/cluster label) and how to reach
// it (the kubeconfig under its kubeconfig key), and whether a source's
// courier.dev/replicate-to-clusters selects it. It decides from what it is
// given; it reads and writes nothing.
package clusters

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// NameOf is the cluster a Secret describes: its courier.dev/cluster label
// ("" and false when it has none).
func NameOf(s *corev1.Secret) (string, bool) {
	name, ok := s.Labels[wellknown.Cluster]
	return name, ok
}

// Config is how courier reaches the cluster the Secret s describes. The
// error says what is wrong and how to fix it, and never quotes the Secret's
// values.
//
// The kubeconfig must carry everything inline: a path (a token file, a
// certificate file), an exec plugin or an auth provider would have courier
// read its own files or run a command on the say-so of whoever may write
// Secrets in its namespace, so each is refused.
func Config(s *corev1.Secret) (*rest.Config, error) {
	name, _ := NameOf(s)
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, fmt.Errorf("its label %s=%q is not a valid cluster name (%s); use a DNS label such as \"prod-eu\"", wellknown.Cluster, name, strings.Join(errs, "; "))
	}
	data, ok := s.Data[wellknown.ClusterKubeconfig]
	if !ok || len(data) == 0 {
		return nil, fmt.Errorf("it has no key %q; put the kubeconfig of courier's identity in the cluster %s there (see manifests/remote-cluster)", wellknown.ClusterKubeconfig, name)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		// The parser's message may quote the document: say where, not what.
		return nil, fmt.Errorf("its key %q does not parse as a kubeconfig; check it with `kubectl --kubeconfig=<file> version`", wellknown.ClusterKubeconfig)
	}
	if err := inline(cfg); err != nil {
		return nil, fmt.Errorf("its kubeconfig %w", err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("its kubeconfig cannot be used: %w", Sanitize(err))
	}
	return rc, nil
}

// inline reports the first part of the kubeconfig's current context that
// is not inline.
func inline(cfg *clientcmdapi.Config) error {
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return errors.New("has no current-context naming one of its contexts")
	}
	if c, ok := cfg.Clusters[ctx.Cluster]; ok && c.CertificateAuthority != "" {
		return errors.New("names a certificate-authority file; give certificate-authority-data instead")
	}
	a, ok := cfg.AuthInfos[ctx.AuthInfo]
	if !ok {
		return nil
	}
	switch {
	case a.Exec != nil:
		return errors.New("runs an exec credential plugin, which courier never runs; give a token or client certificate data instead")
	case a.AuthProvider != nil:
		return errors.New("uses an auth-provider plugin, which courier never runs; give a token or client certificate data instead")
	case a.TokenFile != "", a.ClientCertificate != "", a.ClientKey != "":
		return errors.New("names a file (tokenFile, client-certificate or client-key); courier reads no file for a cluster Secret: give token or client-certificate-data and client-key-data instead")
	case a.Username != "" || a.Password != "":
		return errors.New("uses basic authentication; give a token or client certificate data instead")
	}
	return nil
}

// Sanitize keeps an error's kind, never its text, when that text could
// hold the kubeconfig's values (a server URL with credentials in it, say).
func Sanitize(err error) error {
	return errors.New(strings.SplitN(err.Error(), ":", 2)[0])
}

// Selector is what a source's courier.dev/replicate-to-clusters selects:
// nil when it has none. "*" selects every cluster; anything else is a label
// selector over the cluster Secrets' labels (kubectl -l syntax).
func Selector(annotations map[string]string) (labels.Selector, error) {
	expr, ok := annotations[wellknown.ReplicateToClusters]
	if !ok {
		return nil, nil
	}
	sel, err := source.ParseSelector(expr)
	if err != nil {
		return nil, fmt.Errorf("%s=%q is not a valid label selector over cluster Secrets: %w. Use kubectl -l syntax, e.g. \"env=prod\", or \"*\" for every cluster", wellknown.ReplicateToClusters, expr, err)
	}
	return sel, nil
}

package clusters

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/courier-k8s/courier/internal/wellknown"
)

const secretValue = "s3cr3t-value-never-shown"

func kubeconfig(user string) string {
	return "apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: [{name: x, context: {cluster: x, user: x}}]\n" +
		"clusters: [{name: x, cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}}]\n" +
		"users: [{name: x, user: " + user + "}]\n"
}

func TestConfigTakesOnlyInlineCredentialsAndNeverQuotesThem(t *testing.T) {
	for _, tt := range []struct {
		name, cluster, kubeconfig string
		says                      string // "" : usable
	}{
		{"token", "prod-eu", kubeconfig("{token: " + secretValue + "}"), ""},
		{"no key", "prod-eu", "", `has no key "kubeconfig"`},
		{"bad name", "Prod_EU", kubeconfig("{token: " + secretValue + "}"), "not a valid cluster name"},
		{"garbled", "prod-eu", "clusters: [{{" + secretValue, "does not parse as a kubeconfig"},
		{"exec", "prod-eu", kubeconfig("{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [" + secretValue + "]}}"), "exec credential plugin"},
		{"auth provider", "prod-eu", kubeconfig("{auth-provider: {name: oidc, config: {id-token: " + secretValue + "}}}"), "auth-provider"},
		{"token file", "prod-eu", kubeconfig("{tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}"), "names a file"},
		{"client cert file", "prod-eu", kubeconfig("{client-certificate: /etc/cert.pem, client-key: /etc/key.pem}"), "names a file"},
		{"basic auth", "prod-eu", kubeconfig("{username: admin, password: " + secretValue + "}"), "basic authentication"},
		{"no context", "prod-eu", strings.Replace(kubeconfig("{token: t}"), "current-context: x", "current-context: y", 1), "kubeconfig"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{wellknown.Cluster: tt.cluster}}}
			if tt.kubeconfig != "" {
				s.Data = map[string][]byte{wellknown.ClusterKubeconfig: []byte(tt.kubeconfig)}
			}
			cfg, err := Config(s)
			switch {
			case tt.says == "" && err != nil:
				t.Fatalf("Config: %v", err)
			case tt.says == "" && cfg.Host != "https://127.0.0.1:6443":
				t.Fatalf("host %q", cfg.Host)
			case tt.says != "" && (err == nil || !strings.Contains(err.Error(), tt.says)):
				t.Fatalf("Config error %v, want one saying %q", err, tt.says)
			case err != nil && strings.Contains(err.Error(), secretValue):
				t.Fatalf("the error quotes the Secret's value: %v", err)
			}
		})
	}
}

func TestSelectorIsNilWithoutTheAnnotation(t *testing.T) {
	sel, err := Selector(map[string]string{})
	if sel != nil || err != nil {
		t.Fatalf("Selector of no annotation = %v, %v", sel, err)
	}
	sel, err = Selector(map[string]string{wellknown.ReplicateToClusters: "*"})
	if err != nil || !sel.Matches(labels.Set{"any": "thing"}) {
		t.Fatalf(`"*" selects %v (%v), want every cluster`, sel, err)
	}
	sel, err = Selector(map[string]string{wellknown.ReplicateToClusters: "env in (prod),region!=us"})
	if err != nil || !sel.Matches(labels.Set{"env": "prod", "region": "eu"}) || sel.Matches(labels.Set{"env": "prod", "region": "us"}) {
		t.Fatalf("selector %v (%v)", sel, err)
	}
	if _, err := Selector(map[string]string{wellknown.ReplicateToClusters: "env in (prod"}); err == nil {
		t.Fatal("an invalid selector parsed")
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// endpoint is one side of a connection as a NetworkPolicy sees it: an
// address outside the cluster, or a pod (its namespace's and its labels).
type endpoint struct {
	ip               string
	nsLabels, labels map[string]string
}

// admits reports whether peers (empty: everyone) and ports (empty: every
// port) let e connect on port/proto: the NetworkPolicy rule semantics.
func admits(peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, e endpoint, port int32, proto corev1.Protocol) bool {
	portOK := len(ports) == 0
	for _, p := range ports {
		pr := corev1.ProtocolTCP
		if p.Protocol != nil {
			pr = *p.Protocol
		}
		if pr == proto && (p.Port == nil || p.Port.IntVal == port) {
			portOK = true
		}
	}
	if !portOK {
		return false
	}
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		switch {
		case p.IPBlock != nil:
			_, cidr, err := net.ParseCIDR(p.IPBlock.CIDR)
			if err == nil && e.ip != "" && cidr.Contains(net.ParseIP(e.ip)) {
				return true
			}
		case e.nsLabels != nil:
			if matches(p.NamespaceSelector, e.nsLabels) && matches(p.PodSelector, e.labels) {
				return true
			}
		}
	}
	return false
}

// matches: a nil selector matches everything here (a peer without it means
// "any"); an empty one too.
func matches(s *metav1.LabelSelector, l map[string]string) bool {
	if s == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(labels.Set(l))
}

func egressAllowed(np *networkingv1.NetworkPolicy, e endpoint, port int32, proto corev1.Protocol) bool {
	for _, r := range np.Spec.Egress {
		if admits(r.To, r.Ports, e, port, proto) {
			return true
		}
	}
	return false
}

func ingressAllowed(np *networkingv1.NetworkPolicy, e endpoint, port int32) bool {
	for _, r := range np.Spec.Ingress {
		if admits(r.From, r.Ports, e, port, corev1.ProtocolTCP) {
			return true
		}
	}
	return false
}

// SPEC (install, chart networkPolicy): the chart's NetworkPolicy lets
// courier reach the API server (at the address and port the values give:
// the test cluster's own), and with notifications DNS and
// the webhook hosts; it lets only the selected namespace scrape the
// metrics port; it lets nothing else through. The API server accepts it.
func TestHelmNetworkPolicyAllowsWhatCourierNeeds(t *testing.T) {
	ctx := t.Context()
	// Where courier reaches the API server: in a cluster, the kubernetes
	// Service's endpoints; here (no endpoint reconciler), its address.
	u, err := url.Parse(env.cluster.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	apiIP, apiPort := u.Hostname(), int32(port)
	policy := func(t *testing.T, set ...string) *networkingv1.NetworkPolicy {
		t.Helper()
		objs := helmTemplate(t, append([]string{"--set=networkPolicy.enabled=true"}, set...)...)
		var np networkingv1.NetworkPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs["NetworkPolicy/courier-system/courier"], &np); err != nil {
			t.Fatalf("the chart renders no NetworkPolicy courier: %v", err)
		}
		if _, err := admin().NetworkingV1().NetworkPolicies("default").Create(ctx, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "courier-"}, Spec: np.Spec}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("the API server refuses the chart's NetworkPolicy: %v", err)
		}
		return &np
	}
	apiServer := endpoint{ip: apiIP}
	elsewhere := endpoint{ip: "203.0.113.7"}
	dns := endpoint{nsLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}, labels: map[string]string{"k8s-app": "kube-dns"}}
	otherPod := endpoint{nsLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}, labels: map[string]string{"app": "x"}}
	prometheus := endpoint{nsLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}, labels: map[string]string{"app": "prometheus"}}
	tenant := endpoint{nsLabels: map[string]string{"kubernetes.io/metadata.name": "team-a"}, labels: map[string]string{"app": "prometheus"}}

	for _, c := range []struct {
		name string
		set  []string
		want map[string]bool
	}{
		{"pinned API server, no notifications", []string{
			fmt.Sprintf("--set=networkPolicy.apiServer.cidrs={%s/32}", apiIP), fmt.Sprintf("--set=networkPolicy.apiServer.ports={%d}", apiPort)},
			map[string]bool{"api": true, "api other port": false, "elsewhere 443": false, "dns": false, "scrape": true, "scrape from tenant": false, "scrape other port": false}},
		{"defaults, with notifications", []string{"--set=config.notifyURLs={https://hooks.example/x}"},
			map[string]bool{"api": apiPort == 443 || apiPort == 6443, "elsewhere 443": true, "elsewhere 80": false, "dns": true, "dns other pod": false, "scrape": true, "scrape from tenant": false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			np := policy(t, c.set...)
			got := map[string]bool{
				"api":                egressAllowed(np, apiServer, apiPort, corev1.ProtocolTCP),
				"api other port":     egressAllowed(np, apiServer, apiPort+1, corev1.ProtocolTCP),
				"elsewhere 443":      egressAllowed(np, elsewhere, 443, corev1.ProtocolTCP),
				"elsewhere 80":       egressAllowed(np, elsewhere, 80, corev1.ProtocolTCP),
				"dns":                egressAllowed(np, dns, 53, corev1.ProtocolUDP),
				"dns other pod":      egressAllowed(np, otherPod, 53, corev1.ProtocolUDP),
				"scrape":             ingressAllowed(np, prometheus, 8080),
				"scrape from tenant": ingressAllowed(np, tenant, 8080),
				"scrape other port":  ingressAllowed(np, prometheus, 9090),
			}
			for what, want := range c.want {
				if got[what] != want {
					t.Errorf("%s: allowed %v, want %v", what, got[what], want)
				}
			}
		})
	}
}

// The releases whose CRDs the chart's optional objects are checked
// against, from the Go module proxy (cached in the module cache): the
// Prometheus Operator's module holds them in example/prometheus-operator-crd,
// the Vertical Pod Autoscaler's in deploy/.
const (
	prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
	verticalAutoscaler = "k8s.io/autoscaler/vertical-pod-autoscaler@v1.8.1"
)

// installModuleCRDs applies CRD files of a module (paths in it) and waits
// until each of group's resources is served.
func installModuleCRDs(t *testing.T, module string, files []string, gv schema.GroupVersion, resources ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "mod", "download", "-json", module)
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	var mod struct{ Dir string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v\n%s", module, err, out)
	}
	for _, f := range files {
		file := filepath.Join(mod.Dir, f)
		if out, err := kubectl(t.Context(), "apply", "--server-side", "--force-conflicts", "-f", file); err != nil {
			t.Fatalf("apply %s: %v\n%s", file, err, out)
		}
	}
	// Not what any test checks, and a large CRD (Kyverno's ClusterPolicy)
	// took over 5 s to be served beside make test's other processes.
	eventually(t, 30*time.Second, module+"'s kinds served", func(ctx context.Context) (bool, error) {
		for _, r := range resources {
			if _, err := dynamicAdmin(t).Resource(gv.WithResource(r)).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// installMonitoringCRDs applies the Prometheus Operator's ServiceMonitor,
// PodMonitor and PrometheusRule CRDs.
func installMonitoringCRDs(t *testing.T) {
	t.Helper()
	kinds := []string{"servicemonitors", "podmonitors", "prometheusrules"}
	var files []string
	for _, k := range kinds {
		files = append(files, "example/prometheus-operator-crd/monitoring.coreos.com_"+k+".yaml")
	}
	installModuleCRDs(t, prometheusOperator, files, schema.GroupVersion{Group: "monitoring.coreos.com", Version: "v1"}, kinds...)
}

// SPEC (install, chart monitoring and autoscaling): the ServiceMonitor, the
// PodMonitor (instead of it) and the PrometheusRule the chart renders are
// accepted by an API server serving the Prometheus Operator's CRDs, the
// VerticalPodAutoscaler by one serving the VPA's, and the NetworkPolicy by
// any.
func TestHelmMonitoringObjectsAreAcceptedByTheirCRDs(t *testing.T) {
	installMonitoringCRDs(t)
	installModuleCRDs(t, verticalAutoscaler, []string{"deploy/vpa-v1-crd-gen.yaml"},
		schema.GroupVersion{Group: "autoscaling.k8s.io", Version: "v1"}, "verticalpodautoscalers")
	ns := newNamespace(t, "monitoring-objects", nil)
	resources := map[string]string{"NetworkPolicy": "networkpolicies", "VerticalPodAutoscaler": "verticalpodautoscalers"}
	for _, c := range []struct {
		set  []string
		want int
	}{
		{[]string{"--set=serviceMonitor.enabled=true,prometheusRule.enabled=true"}, 2},
		{[]string{"--set=podMonitor.enabled=true,podMonitor.labels.release=prom", "--set=networkPolicy.enabled=true"}, 2},
		{[]string{"--set=verticalPodAutoscaler.enabled=true,verticalPodAutoscaler.updateMode=Off",
			"--set=verticalPodAutoscaler.minAllowed.cpu=50m,verticalPodAutoscaler.maxAllowed.memory=1Gi"}, 1},
		{[]string{"--set=verticalPodAutoscaler.enabled=true,verticalPodAutoscaler.controlledResources={memory}",
			"--set=verticalPodAutoscaler.controlledValues=RequestsAndLimits"}, 1},
	} {
		objs := helmTemplate(t, append(c.set, "--set=namespace.name="+ns, "--set=commonAnnotations.owner=platform")...)
		n := 0
		for key, o := range objs {
			u := &unstructured.Unstructured{Object: o}
			gvk := u.GroupVersionKind()
			r, optional := resources[gvk.Kind]
			if gvk.Group == "monitoring.coreos.com" {
				r, optional = strings.ToLower(gvk.Kind)+"s", true
			}
			if !optional {
				continue
			}
			n++
			if _, err := dynamicAdmin(t).Resource(gvk.GroupVersion().WithResource(r)).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("%v: %s refused: %v", c.set, key, err)
			}
			if gvk.Kind == "VerticalPodAutoscaler" {
				checkVPA(t, u, c.set)
			}
		}
		if n != c.want {
			t.Errorf("%v: %d optional objects rendered, want %d", c.set, n, c.want)
		}
	}
}

// checkVPA: the VerticalPodAutoscaler targets courier's Deployment and its
// container, and controls requests only unless the values say otherwise.
func checkVPA(t *testing.T, u *unstructured.Unstructured, set []string) {
	t.Helper()
	target, _, _ := unstructured.NestedStringMap(u.Object, "spec", "targetRef")
	policies, _, _ := unstructured.NestedSlice(u.Object, "spec", "resourcePolicy", "containerPolicies")
	want := "RequestsOnly"
	if strings.Contains(strings.Join(set, ","), "controlledValues=RequestsAndLimits") {
		want = "RequestsAndLimits"
	}
	if target["kind"] != "Deployment" || target["name"] != "courier" || len(policies) != 1 ||
		policies[0].(map[string]any)["containerName"] != "courier" || policies[0].(map[string]any)["controlledValues"] != want {
		t.Errorf("VerticalPodAutoscaler targets %v with policies %v; want Deployment courier, container courier, %s", target, policies, want)
	}
}

package cluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// NodeName is the kwok node every pod is scheduled to.
const NodeName = "kwok-node-0"

// Options configures Start.
type Options struct {
	// BinDir holds the control-plane binaries (e2e/tools/build.sh prints it).
	BinDir string
	// Dir is the working directory for data, certificates and logs. Empty
	// means a new temporary directory, removed by Stop.
	Dir string
	// Logf, if set, reports progress.
	Logf func(format string, args ...any)
	// MemoryLimits sets GOMEMLIMIT (e.g. "8GiB") per component, by binary
	// name, so that a large dataset's control plane collects garbage before
	// the machine runs out of memory rather than at twice its live heap.
	MemoryLimits map[string]string
	// Controllers is kube-controller-manager's --controllers; empty means
	// every default one but node IPAM and node lifecycle (kwok owns the
	// fake node's status).
	Controllers string
	// APIServerOnly runs etcd and kube-apiserver only: enough for a cluster
	// courier replicates into (no pods, no controllers: a namespace deleted
	// there stays Terminating).
	APIServerOnly bool
	// AuditPolicy, if set, is an audit.k8s.io/v1 Policy (YAML) under which
	// kube-apiserver writes its audit log, one JSON event per line, to
	// Cluster.AuditLog (never rotated).
	AuditPolicy string
}

// Cluster is a running local control plane.
type Cluster struct {
	// Dir holds etcd's data, certificates, the kubeconfig and one log per component.
	Dir string
	// Kubeconfig is the path of an admin kubeconfig (group system:masters).
	Kubeconfig string
	// Config is the admin client config; Client a clientset on it.
	Config *rest.Config
	Client kubernetes.Interface
	// AuditLog is the audit log's path when Options.AuditPolicy was set.
	AuditLog string

	tempDir bool
	binDir  string
	etcdURL string
	apiArgs []string // kube-apiserver's, for a second one (StartLagging)
	lagging *Lagging
	relays  []*relay
	logf    func(string, ...any)
	limits  map[string]string
	mu      sync.Mutex
	procs   map[string]*process
	order   []string
}

// Start runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok, waits until each is ready and one kwok node is Ready and schedulable,
// and returns. On error everything started so far is stopped.
//
// The ports are found free, then closed and given to the components, so
// another process (a parallel test process starting its own control plane)
// can take one in between: a component that could not bind its port is
// started again, with everything else, on new ports (in a new directory,
// when Start made one), up to three times.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := start(ctx, o)
		if err == nil || attempt == 3 || o.Dir != "" || !strings.Contains(err.Error(), "address already in use") {
			return c, err
		}
	}
}

func start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.BinDir == "" {
		return nil, errors.New("cluster: BinDir is empty; build the control plane with `make controlplane`")
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return nil, fmt.Errorf("cluster: %s missing from %s; build it with `make controlplane`: %w", b, o.BinDir, err)
		}
	}
	c = &Cluster{Dir: o.Dir, binDir: o.BinDir, logf: o.Logf, limits: o.MemoryLimits, procs: map[string]*process{}}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "courier-cluster-"); err != nil {
			return nil, err
		}
		c.tempDir = true
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	started := c // a failed start returns nil for c: stop what it started
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()

	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	pki := filepath.Join(c.Dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return nil, err
	}
	saKey, saPub := filepath.Join(pki, "sa.key"), filepath.Join(pki, "sa.pub")
	if err := writeRSAKey(saKey, saPub); err != nil {
		return nil, err
	}
	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	tokens := filepath.Join(pki, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	c.etcdURL = etcdURL
	c.add("etcd", o.BinDir,
		"--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-url="+etcdURL,
		"--listen-peer-url=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		// 8 GiB rather than the default 2: make bench-scale's largest
		// dataset holds about 2.1 GB of values (1.5 GB of Helm releases).
		"--quota-backend-bytes="+strconv.Itoa(8<<30),
		"--unsafe-no-fsync")
	if err := c.startAndWait(ctx, "etcd", func(ctx context.Context) error {
		return httpOK(ctx, http.DefaultClient, etcdURL+"/health", "")
	}); err != nil {
		return nil, err
	}

	apiURL := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	var audit []string
	if o.AuditPolicy != "" {
		policy := filepath.Join(c.Dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(o.AuditPolicy), 0o600); err != nil {
			return nil, err
		}
		c.AuditLog = filepath.Join(c.Dir, "audit.log")
		audit = []string{
			"--audit-policy-file=" + policy,
			"--audit-log-path=" + c.AuditLog,
			"--audit-log-format=json",
			// The log backend rotates at 100 MB unless told otherwise;
			// a reader of the whole log needs one file.
			"--audit-log-maxsize=1000000",
			// Each event is written as its request ends, not batched
			// for seconds.
			"--audit-log-mode=blocking",
		}
	}
	c.apiArgs = append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + pki,
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		// Endpoints may not hold loopback addresses; nothing here needs the
		// kubernetes Service's endpoints.
		"--endpoint-reconciler-type=none",
	}, audit...)
	c.add("kube-apiserver", o.BinDir, c.apiArgs...)
	if err := c.startAndWait(ctx, "kube-apiserver", func(ctx context.Context) error {
		return httpOK(ctx, insecureClient, apiURL+"/readyz", token)
	}); err != nil {
		return nil, err
	}

	c.Config = &rest.Config{
		Host:            apiURL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             500,
		Burst:           1000,
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := c.WriteKubeconfig(c.Kubeconfig, rest.ImpersonationConfig{}); err != nil {
		return nil, err
	}

	if o.APIServerOnly {
		c.logf("API server ready at %s (dir %s)", apiURL, c.Dir)
		return c, nil
	}
	controllers := o.Controllers
	if controllers == "" {
		controllers = "*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle"
	}
	c.add("kube-controller-manager", o.BinDir,
		"--kubeconfig="+c.Kubeconfig,
		"--controllers="+controllers,
		"--service-account-private-key-file="+saKey,
		"--root-ca-file="+filepath.Join(pki, "apiserver.crt"),
		"--leader-elect=false",
		"--secure-port=0",
		// The defaults (20 QPS, 5 Deployment workers) take minutes to create
		// the ReplicaSets of a few thousand Deployments; large clusters raise them.
		"--kube-api-qps=1000", "--kube-api-burst=2000", "--concurrent-deployment-syncs=50",
	)
	c.add("kube-scheduler", o.BinDir,
		"--kubeconfig="+c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	)
	c.add("kwok", o.BinDir,
		"--kubeconfig="+c.Kubeconfig,
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--config="+filepath.Join(o.BinDir, "..", "kwok", "stages.yaml"),
		"--server-address=127.0.0.1:0",
		"--cidr=10.244.0.0/16",
		"--node-ip=127.0.0.1",
	)
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
		if err := c.procs[name].start(); err != nil {
			return nil, err
		}
	}
	// The service-account controller creating "default" shows the
	// controller manager is working.
	if err := c.waitFor(ctx, "kube-controller-manager", func(ctx context.Context) error {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	if err := c.addNode(ctx); err != nil {
		return nil, err
	}
	c.logf("cluster ready at %s (dir %s)", apiURL, c.Dir)
	return c, nil
}

func (c *Cluster) add(name, binDir string, args ...string) {
	p := &process{name: name, bin: filepath.Join(binDir, name), args: args, logPath: filepath.Join(c.Dir, name+".log")}
	if limit := c.limits[name]; limit != "" {
		p.env = append(os.Environ(), "GOMEMLIMIT="+limit)
	}
	c.procs[name] = p
	c.order = append(c.order, name)
}

func (c *Cluster) startAndWait(ctx context.Context, name string, ready func(context.Context) error) error {
	if err := c.procs[name].start(); err != nil {
		return err
	}
	return c.waitFor(ctx, name, ready)
}

// waitFor polls ready until it returns nil, failing early if name exits.
func (c *Cluster) waitFor(ctx context.Context, name string, ready func(context.Context) error) error {
	p := c.procs[name]
	start := time.Now()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("%s exited: %v", name, p.err)
		}
		last = ready(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready (last check: %v): %w\n%s", name, last, err, p.logTail())
	}
	c.logf("%s ready in %s", name, time.Since(start).Round(time.Millisecond))
	return nil
}

// addNode registers the kwok node, lifts the not-ready taint the API server
// puts on new nodes (no node lifecycle controller runs to lift it), and waits
// until kwok reports the node Ready.
func (c *Cluster) addNode(ctx context.Context) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("256"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("10000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"kubernetes.io/hostname": NodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create kwok node: %w", err)
	}
	return c.waitFor(ctx, "kwok", func(ctx context.Context) error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(n.Spec.Taints) > 0 {
			n.Spec.Taints = nil
			if _, err := c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				return err
			}
			return errors.New("lifted node taints")
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return errors.New("node not Ready yet")
	})
}

// Stop ends every component, newest first, and removes a temporary Dir.
// Safe to call more than once.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.order) - 1; i >= 0; i-- {
		c.procs[c.order[i]].stop(10 * time.Second)
	}
	for _, r := range c.relays {
		r.close()
	}
	if c.tempDir && os.Getenv("COURIER_KEEP_CLUSTER_DIR") == "" {
		os.RemoveAll(c.Dir)
	}
}

// Restart stops one component (SIGKILL when crash is true, else SIGTERM)
// and starts it again with the same flags; for fault tests.
func (c *Cluster) Restart(ctx context.Context, name string, crash bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.procs[name]
	if !ok {
		return fmt.Errorf("no component %q", name)
	}
	if crash {
		p.kill()
	} else {
		p.stop(10 * time.Second)
	}
	return p.start()
}

// Pause stops one component (SIGTERM) until Resume starts it again with
// the same flags: an API server down for a while.
func (c *Cluster) Pause(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.procs[name]
	if !ok {
		return fmt.Errorf("no component %q", name)
	}
	p.stop(10 * time.Second)
	return nil
}

// Resume starts a component Pause stopped.
func (c *Cluster) Resume(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.procs[name]
	if !ok {
		return fmt.Errorf("no component %q", name)
	}
	return p.start()
}

// Impersonating returns an admin config that acts as user with groups (and
// system:authenticated), as `kubectl --as` does.
func (c *Cluster) Impersonating(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	return cfg
}

// AsServiceAccount returns a config that acts as the ServiceAccount
// namespace/name, with the groups the API server gives it.
func (c *Cluster) AsServiceAccount(namespace, name string) *rest.Config {
	return c.Impersonating(ServiceAccountUser(namespace, name), "system:serviceaccounts", "system:serviceaccounts:"+namespace)
}

// ServiceAccountUser is the user name of a ServiceAccount.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// WriteKubeconfig writes a kubeconfig for the admin token that, when imp is
// set, impersonates imp (so a process can run as a ServiceAccount).
func (c *Cluster) WriteKubeconfig(path string, imp rest.ImpersonationConfig) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: c.Config.BearerToken, Impersonate: imp.UserName, ImpersonateGroups: imp.Groups}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

// insecureClient reaches the loopback test cluster's self-signed servers.
var insecureClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

func httpOK(ctx context.Context, client *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreePort returns a free loopback port.
func FreePort() (int, error) {
	p, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

func writeRSAKey(keyPath, pubPath string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

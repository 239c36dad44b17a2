// Command courier replicates Secrets and ConfigMaps across namespaces, guards
// sources and replicas, and reloads the workloads that consume them.
//
// main parses flags into Options, builds one set of shared informers, the
// controllers and the HTTP server, and runs them under one errgroup until a
// signal: the first SIGINT/SIGTERM shuts down cleanly (exit 0), a second exits
// at once.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/go-logr/zapr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/courier-k8s/courier/guard"
	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/config"
	"github.com/courier-k8s/courier/internal/eventsink"
	"github.com/courier-k8s/courier/internal/leader"
	"github.com/courier-k8s/courier/internal/metrics"
	"github.com/courier-k8s/courier/internal/migrate"
	"github.com/courier-k8s/courier/internal/notify"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/settings"
	"github.com/courier-k8s/courier/internal/status"
	"github.com/courier-k8s/courier/internal/version"
	"github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
	"github.com/courier-k8s/courier/reloader"
	"github.com/courier-k8s/courier/replicator"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "status":
			os.Exit(status.Main(os.Args[2:], os.Getenv, os.Stdout, os.Stderr, preview))
		case "plan":
			os.Exit(status.PlanMain(os.Args[2:], os.Getenv, os.Stdout, os.Stderr, preview))
		case "migrate":
			os.Exit(migrate.Main(os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
		case "version", "--version", "-version":
			fmt.Println(version.Get())
			return
		}
	}
	// courier sits idle between bursts of changes, so GC CPU is cheap and
	// memory is not: collect at 50% heap growth instead of Go's 100% (GOGC
	// still wins when set; the manifests also set GOMEMLIMIT).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	opts, err := config.Parse(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "courier: %v\nRun 'courier --help' for the flags.\n", err)
		os.Exit(2)
	}
	logger, err := newLogger(opts.LogLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "courier: %v\n", err)
		os.Exit(2)
	}
	defer func() { _ = logger.Sync() }() // nothing to do if stderr is gone

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		sigs := make(chan os.Signal, 2)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		s := <-sigs
		logger.Info("shutting down; a second signal exits at once", zap.String("signal", s.String()))
		cancel()
		<-sigs
		logger.Warn("second signal: exiting now")
		os.Exit(1)
	}()

	if err := run(ctx, opts, logger); err != nil {
		logger.Error("courier stopped with an error", zap.Error(err))
		_ = logger.Sync()
		os.Exit(1)
	}
	logger.Info("courier stopped")
}

// newLogger builds the JSON logger on stderr and routes klog (client-go's own
// logging, leader election included) through it, so every line is JSON.
func newLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.EncoderConfig.TimeKey = "time"
	cfg.EncoderConfig.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	cfg.Sampling = nil // never drop lines about objects courier acts on
	logger, err := cfg.Build()
	if err != nil {
		return nil, fmt.Errorf("build logger: %w", err)
	}
	klog.SetLogger(zapr.NewLogger(logger.Named("client-go")))
	return logger, nil
}

// controller is what main runs while it leads.
type controller interface {
	Run(ctx context.Context) error
}

func run(ctx context.Context, o config.Options, logger *zap.Logger) error {
	cfg, err := config.RestConfig(o)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry()
	metrics.RegisterClientGo(reg)
	cs, err := newClients(cfg, len(o.ReloadResources) > 0 || o.ReloadCSI)
	if err != nil {
		return fmt.Errorf("build Kubernetes client: %w", err)
	}
	client := cs.kube
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(eventsink.New(ctx, &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}, eventsink.Workers, eventsink.Queue, logger))
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: wellknown.FieldManager})
	d, err := build(o, cs, recorder, reg, logger)
	if err != nil {
		return err
	}
	inf, notifier, isLeader := d.inf, d.notifier, d.isLeader

	logger.Info("starting",
		zap.Stringer("version", version.Get()),
		zap.String("namespace", o.Namespace),
		zap.Stringer("sourceNamespaces", o.SourceNamespaces),
		zap.Stringer("excludeNamespaces", o.ExcludeNamespaces),
		zap.Strings("watchNamespaces", o.WatchNamespaces),
		zap.String("resourceLabelSelector", o.ResourceLabelSelector),
		zap.Stringer("compat", &o.Compat),
		zap.Stringer("notifyURLs", &o.NotifyURLs),
		zap.Stringer("reloadResources", &o.ReloadResources),
		zap.Bool("leaderElect", o.LeaderElect),
		zap.String("metricsAddr", o.MetricsAddr))

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return notifier.Run(ctx) })
	inf.Start(ctx)
	g.Go(func() error {
		<-ctx.Done()
		inf.Shutdown()
		return nil
	})
	g.Go(func() error {
		return metrics.Serve(ctx, o.MetricsAddr, metrics.Handler(reg, inf.HasSynced, o.Profiling), logger)
	})
	g.Go(func() error {
		if err := inf.WaitForSync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		logger.Info("informer caches synced")
		reg.MustRegister(isLeader)
		publisher := settings.Publisher{Client: client, Settings: settings.Of(o, version.Get().String()), Recorder: recorder, Logger: logger}
		lead := func(ctx context.Context) error { return runControllers(ctx, append(d.controllers, publisher)) }
		if !o.LeaderElect {
			isLeader.Set(1) // this process leads, alone
			return lead(ctx)
		}
		return leader.Run(ctx, client, o, isLeader, logger, lead)
	})
	return g.Wait()
}

func runControllers(ctx context.Context, cs []controller) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, c := range cs {
		g.Go(func() error { return c.Run(ctx) })
	}
	g.Go(func() error { <-ctx.Done(); return nil })
	return g.Wait()
}

// daemon is what run runs: the informers, the controllers and what they
// share.
type daemon struct {
	inf         *informers.Set
	controllers []controller
	notifier    *notify.Notifier
	isLeader    prometheus.Gauge // registered by run once the caches synced
}

// clients are courier's API clients: kube and dyn for writes and for what
// must fail fast (the Lease), watchKube and watchDyn for the informers, which
// wait out an API server that cannot serve (informers.WaitOut).
type clients struct {
	kube, watchKube kubernetes.Interface
	meta            metadata.Interface // reads by name, metadata only (informers.Finder)
	watchMeta       metadata.Interface // the informers of what courier does not manage
	dyn, watchDyn   dynamic.Interface  // nil without --reload-resources or --reload-csi
}

func newClients(cfg *rest.Config, dynamicToo bool) (cs clients, err error) {
	watchCfg := informers.WaitOut(cfg)
	if cs.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return cs, err
	}
	if cs.meta, err = metadata.NewForConfig(cfg); err != nil {
		return cs, err
	}
	if cs.watchMeta, err = metadata.NewForConfig(watchCfg); err != nil {
		return cs, err
	}
	if cs.watchKube, err = kubernetes.NewForConfig(watchCfg); err != nil || !dynamicToo {
		return cs, err
	}
	if cs.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return cs, err
	}
	cs.watchDyn, err = dynamic.NewForConfig(watchCfg)
	return cs, err
}

// build wires the informers and the controllers, registering every metric
// courier exports in reg (docs/reference.md lists them from here); the
// dynamic clients are needed only with --reload-resources or --reload-csi.
// Nothing starts.
func build(o config.Options, cs clients, recorder record.EventRecorder, reg prometheus.Registerer, logger *zap.Logger) (*daemon, error) {
	client, dyn := cs.kube, cs.dyn
	scopeLabels, err := config.ResourceLabelKeys(o.ResourceLabelSelector)
	if err != nil {
		return nil, err // Parse checked it
	}
	keyLabels, err := config.SatisfyingLabels(o.ResourceLabelSelector)
	if err != nil {
		return nil, err // Parse checked it
	}
	roles := role.Config{Compat: o.Compat, Allowed: o.SourceNamespaces.Match, Namespace: o.Namespace}
	scope := informers.Scope{Namespaces: o.WatchNamespaces, ResourceLabels: o.ResourceLabelSelector}
	inf, err := informers.New(cs.watchKube, cs.watchMeta, roles, scope, logger)
	if err != nil {
		return nil, err
	}
	reader := informers.NewReader(client, scope)
	contents, err := inf.NewContents(func(ctx context.Context, kind, namespace, name string) (any, error) {
		return reader.Read(ctx, kind, namespace, name)
	}, roles)
	if err != nil {
		return nil, err
	}
	reg.MustRegister(inf.Reach.Gauge())
	// What courier sees: absence from its caches is acted on only inside it.
	v, err := view.New(o.WatchNamespaces, o.ResourceLabelSelector, inf.Unavailable)
	if err != nil {
		return nil, err // Parse checked it
	}
	finder := informers.NewFinder(cs.meta)
	if len(o.ReloadResources) > 0 {
		if inf.Custom, err = informers.NewCustom(cs.watchDyn, o.ReloadResources, scope, logger); err != nil {
			return nil, err
		}
		reg.MustRegister(inf.Custom)
	}
	if o.ReloadCSI {
		if inf.ProviderStatuses, err = informers.NewProviderStatuses(cs.watchDyn, scope, inf.Reach, logger); err != nil {
			return nil, err
		}
	}
	// The clusters courier replicates into (courier.dev/replicate-to-clusters).
	remotes := informers.NewRemotes(cs.kube, o.Namespace, float32(o.KubeAPIQPS), o.KubeAPIBurst, logger)
	reg.MustRegister(remotes.Gauge())
	inf.Remotes = remotes
	queues := metrics.NewQueues(reg)
	grd, err := guard.New(client, inf.Secrets.Informer(), inf.ConfigMaps.Informer(), inf.Namespaces.Informer(), recorder, reg, logger, guard.Options{
		SourceNamespaces: o.SourceNamespaces,
		Compat:           o.Compat,
		Installation:     o.Namespace,
		QueueMetrics:     queues,
		ScopeLabels:      scopeLabels,
		View:             v,
		Finder:           finder,
		Contents:         contents,
	})
	if err != nil {
		return nil, err
	}
	rep, err := replicator.New(client, inf.Secrets.Informer(), inf.ConfigMaps.Informer(), inf.Namespaces.Informer(), recorder, reg, logger, replicator.Options{
		Installation:      o.Namespace,
		SourceNamespaces:  o.SourceNamespaces,
		ExcludeNamespaces: o.ExcludeNamespaces,
		Compat:            o.Compat,
		Workers:           o.ReplicatorWorkers,
		QueueMetrics:      queues,
		Guard:             grd,
		ScopeLabels:       scopeLabels,
		View:              v,
		Finder:            finder,
		Clusters:          remotes,
		ClusterName:       clusterName(o),
		Contents:          contents,
	})
	if err != nil {
		return nil, err
	}
	notifier := notify.New(o.NotifyURLs, reg, logger, notify.Options{Cluster: o.ClusterName})
	rel, err := reloader.New(client, inf.Workloads(), inf.Secrets.Informer(), inf.ConfigMaps.Informer(), recorder, reg, logger, reloader.Options{
		Namespace:    o.Namespace,
		Read:         reader.Read,
		ReadAt:       reader.ReadAt,
		ExistedAt:    finder.ExistedAt,
		View:         v,
		Finder:       finder,
		KeyLabels:    keyLabels,
		ReloadAll:    o.ReloadAll,
		NotifyOnly:   o.ReloadMode == "notify",
		StormChanges: o.ReloadStormChanges,
		StormWindow:  o.ReloadStormWindow,
		Compat:       o.Compat.Reloader,
		Debounce:     o.ReloadDebounce,
		WaveTimeout:  o.ReloadWaveTimeout,
		MaxInFlight:  o.ReloadMaxInFlight,
		QPS:          float32(o.ReloadQPS),
		Burst:        o.ReloadBurst,
		QueueMetrics: queues,
		Dynamic:      dyn,
		Pending: func() bool {
			return inf.Custom != nil && !inf.Custom.Settled(workload.Rollouts)
		},
		Replicating:      rep.Busy,
		Notifier:         notifier,
		ProviderStatuses: inf.ProviderStatuses,
	})
	if err != nil {
		return nil, err
	}
	if inf.Custom != nil {
		inf.Custom.OnKind(rel.AddKind)
	}
	inf.OnAvailable(rep.NamespaceAvailable)
	inf.OnAvailable(rel.NamespaceAvailable)
	return &daemon{inf: inf, controllers: []controller{rep, grd, rel}, notifier: notifier, isLeader: leader.NewGauge()}, nil
}

// clusterName is this cluster's name on the replicas courier writes into
// other clusters: --cluster-name, else wellknown.DefaultClusterName.
func clusterName(o config.Options) string {
	return cmp.Or(o.ClusterName, wellknown.DefaultClusterName)
}

// preview is the reloader's decision for courier status (status.Preview):
// what it would do with each consumer, asked without acting.
func preview(r status.Reloading, objects []runtime.Object) (status.Explain, error) {
	p, err := reloader.NewPreview(reloader.Options{Namespace: r.Installation, Compat: r.Compat, ReloadAll: r.ReloadAll, NotifyOnly: r.NotifyOnly,
		View: r.View, Finder: r.Finder}, r.Roles, objects)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, kind, namespace, name string) (status.Verdict, error) {
		e, err := p.Explain(ctx, kind, namespace, name)
		return status.Verdict{Verdict: e.Verdict, Policy: e.Policy, Message: e.Message, Wave: e.Wave}, err
	}, nil
}

// Command etcd runs a single-member etcd on loopback for the local control
// plane. It exists because Debian's etcd is older than Kubernetes 1.36 expects;
// the embed package is the same etcd server the version of k8s.io/kubernetes we
// pin already depends on.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "directory for etcd's data (required)")
	clientURL := flag.String("listen-client-url", "http://127.0.0.1:2379", "client URL (loopback only)")
	peerURL := flag.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL (loopback only)")
	noFsync := flag.Bool("unsafe-no-fsync", false, "skip fsync: fast, and fine for a throw-away test cluster")
	quota := flag.Int64("quota-backend-bytes", 0, "the backend's size limit in bytes (0: etcd's default, 2 GiB)")
	flag.Parse()
	if *dataDir == "" {
		log.Fatal("--data-dir is required")
	}

	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.Name = "courier-e2e"
	cfg.LogLevel = "error"
	cfg.UnsafeNoFsync = *noFsync
	cfg.QuotaBackendBytes = *quota
	cu, err := url.Parse(*clientURL)
	if err != nil {
		log.Fatalf("--listen-client-url: %v", err)
	}
	pu, err := url.Parse(*peerURL)
	if err != nil {
		log.Fatalf("--listen-peer-url: %v", err)
	}
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("start etcd: %v", err)
	}
	defer e.Close()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		log.Printf("etcd ready on %s", cu)
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	case <-sig:
		return
	}
	select {
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	case <-sig:
	}
}

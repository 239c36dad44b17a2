package cluster

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
)

// Lagging is a second kube-apiserver on the cluster's etcd, reached through
// a relay that can hold etcd's traffic to and from it. While held, its watch
// cache lags: the first kube-apiserver and everything using it go on, while
// this one serves watches from the moment Hold was called and every request
// it must take to etcd (writes, quorum reads, its watch cache catching up)
// waits. Release lets the backlog through. It is how a client restarted or
// failing over against a stale API server (Sieve's stale views) is tested.
type Lagging struct {
	// Host is its https URL (same certificates, tokens and audit log as
	// the first server's).
	Host  string
	relay *relay
}

// Hold stops etcd's traffic to and from the server until Release.
func (l *Lagging) Hold() { l.relay.hold(true) }

// Release lets it through again.
func (l *Lagging) Release() { l.relay.hold(false) }

// StartLagging starts the lagging kube-apiserver (once; later calls return
// the same one) and waits until it is ready. Stop ends it with the cluster.
func (c *Cluster) StartLagging(ctx context.Context) (*Lagging, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lagging != nil {
		return c.lagging, nil
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	r, err := newRelay(strings.TrimPrefix(c.etcdURL, "http://"))
	if err != nil {
		return nil, err
	}
	c.relays = append(c.relays, r)
	const name = "kube-apiserver-lagging"
	args := make([]string, 0, len(c.apiArgs))
	for _, a := range c.apiArgs {
		switch {
		case strings.HasPrefix(a, "--etcd-servers="):
			a = "--etcd-servers=http://" + r.addr()
		case strings.HasPrefix(a, "--secure-port="):
			a = "--secure-port=" + strconv.Itoa(ports[0])
		}
		args = append(args, a)
	}
	c.add(name, c.binDir, args...)
	c.procs[name].bin = c.procs["kube-apiserver"].bin
	host := "https://127.0.0.1:" + strconv.Itoa(ports[0])
	if err := c.startAndWait(ctx, name, func(ctx context.Context) error {
		return httpOK(ctx, insecureClient, host+"/readyz", c.Config.BearerToken)
	}); err != nil {
		return nil, err
	}
	c.lagging = &Lagging{Host: host, relay: r}
	return c.lagging, nil
}

// relay passes TCP connections on to target, and can hold every byte in
// both directions (hold) until let go.
type relay struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	held     bool
	released *sync.Cond // broadcast when held turns false
	conns    map[net.Conn]bool
}

func newRelay(target string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, target: target, conns: map[net.Conn]bool{}}
	r.released = sync.NewCond(&r.mu)
	go r.serve()
	return r, nil
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) serve() {
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		out, err := net.Dial("tcp", r.target)
		if err != nil {
			in.Close()
			continue
		}
		r.mu.Lock()
		r.conns[in], r.conns[out] = true, true
		r.mu.Unlock()
		go r.pipe(out, in)
		go r.pipe(in, out)
	}
}

// pipe copies src to dst, waiting before each write while the relay holds.
func (r *relay) pipe(dst, src net.Conn) {
	defer func() {
		dst.Close()
		src.Close()
		r.mu.Lock()
		delete(r.conns, dst)
		delete(r.conns, src)
		r.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			for r.held {
				r.released.Wait()
			}
			r.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or the relay closed
		}
	}
}

func (r *relay) hold(h bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = h
	if !h {
		r.released.Broadcast()
	}
}

// close stops accepting, lets held bytes go and ends every connection.
func (r *relay) close() {
	r.ln.Close()
	r.hold(false)
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
	}
}

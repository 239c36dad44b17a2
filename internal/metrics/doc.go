// Package metrics owns courier's Prometheus registry plumbing and its HTTP
// endpoints: the private registry with Go and process collectors, adapters
// that route client-go's request and rate-limiter metrics and the work queues'
// metrics into it, and the server for /metrics, /healthz and /readyz.
//
// Controllers define their own metrics and register them on the registry they
// are given; this package holds no controller's metrics and no global state
// beyond the one hook client-go offers (RegisterClientGo).
package metrics

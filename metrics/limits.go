package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardcounter/shardcounter/internal/authtoken"
)

// The metrics of the server's limits on hostile or careless clients: the
// bytes of request bodies in flight (--max-body-total), the requests
// refused for want of room for theirs, and failed authentications.

var (
	descAuthFailures = prometheus.NewDesc(namespace+"_auth_failures_total",
		"Failed authentications (a missing or wrong token on HTTP /v1, a wrong AUTH or HELLO AUTH password on RESP), by protocol.",
		[]string{"protocol"}, nil)
	descAuthThrottled = prometheus.NewDesc(namespace+"_auth_throttled_total",
		"Failed authentications past their address's burst allowance: answered 429 on HTTP, -WRONGPASS after a delay on RESP (also in auth_failures_total).",
		[]string{"protocol"}, nil)
)

// authCollector exports a Guard's counts when scraped.
type authCollector struct{ g *authtoken.Guard }

func (c authCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAuthFailures
	ch <- descAuthThrottled
}

func (c authCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range []authtoken.Protocol{authtoken.HTTP, authtoken.RESP} {
		ch <- prometheus.MustNewConstMetric(descAuthFailures, prometheus.CounterValue, float64(c.g.Failures(p)), p.String())
		ch <- prometheus.MustNewConstMetric(descAuthThrottled, prometheus.CounterValue, float64(c.g.Throttled(p)), p.String())
	}
}

// RegisterAuth exports the failed authentications g counts. Only the
// first Guard registered on m is exported: serve shares one between its
// HTTP and RESP servers.
func (m *Metrics) RegisterAuth(g *authtoken.Guard) {
	register(m.reg, authCollector{g})
}

// RegisterBodyBudget exports the bytes of request bodies held now, read
// from inFlight when scraped. Only the first one registered on m is.
func (m *Metrics) RegisterBodyBudget(inFlight func() float64) {
	register(m.reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "http", Name: "body_bytes_in_flight",
		Help: "Bytes of request bodies the server holds now (bounded by --max-body-total).",
	}, inFlight))
}

// ObserveBodyRejected records a request refused because the bodies in
// flight held --max-body-total bytes.
func (m *Metrics) ObserveBodyRejected() { m.bodyRejected.Inc() }

// register registers c unless a collector of the same metrics is there.
func register(reg *prometheus.Registry, c prometheus.Collector) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			panic(err)
		}
	}
}

// RESPStats is what the Redis protocol port counts (resp/server.Server).
type RESPStats interface {
	Clients() int64  // connections open now
	Commands() int64 // commands served so far
	Rejected() int64 // connections refused at --resp-max-clients so far
}

var (
	descRESPClients = prometheus.NewDesc(namespace+"_resp_connected_clients",
		"Connections open now on the Redis protocol port (at most --resp-max-clients).", nil, nil)
	descRESPCommands = prometheus.NewDesc(namespace+"_resp_commands_total",
		"Commands served on the Redis protocol port.", nil, nil)
	descRESPRejected = prometheus.NewDesc(namespace+"_resp_rejected_connections_total",
		"Connections refused because --resp-max-clients were open.", nil, nil)
)

// respCollector exports a RESP port's counts when scraped.
type respCollector struct{ s RESPStats }

func (c respCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRESPClients
	ch <- descRESPCommands
	ch <- descRESPRejected
}

func (c respCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descRESPClients, prometheus.GaugeValue, float64(c.s.Clients()))
	ch <- prometheus.MustNewConstMetric(descRESPCommands, prometheus.CounterValue, float64(c.s.Commands()))
	ch <- prometheus.MustNewConstMetric(descRESPRejected, prometheus.CounterValue, float64(c.s.Rejected()))
}

// RegisterRESP exports the counts of the server's Redis protocol port.
// Only the first one registered on m is.
func (m *Metrics) RegisterRESP(s RESPStats) {
	register(m.reg, respCollector{s})
}

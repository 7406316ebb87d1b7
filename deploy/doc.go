// Package deploy holds what running shardcounter beside other services
// takes, and tests that it matches the binary: a Grafana dashboard
// (grafana/shardcounter.json) and Prometheus alert rules
// (prometheus/alerts.yml), whose every metric the built server is checked
// to serve under a load and whose rules promtool checks; a compose file
// with the stores (compose.yaml); and kustomize manifests (kubernetes/),
// rendered with kustomize's Go API and checked against the binary's
// flags and routes. It holds no code; docs/OPERATIONS.md says how to use
// each file.
package deploy

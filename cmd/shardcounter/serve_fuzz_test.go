package main

import "testing"

// FuzzServeFlags parses serve command lines: every one is either a usage
// error or flags whose engine configuration engine.New accepts, so a
// flag the CLI lets through never fails later when the server starts, and
// no input panics.
func FuzzServeFlags(f *testing.F) {
	for _, seed := range []string{
		"",
		"--durability async --flush-interval 5ms --dedupe-window 1h",
		"--max-staleness 5s --cache-size 1000000 --max-reads-in-flight 4",
		"--default-shards 1024 --max-body 1 --max-concurrent 1 --request-timeout 1ns",
		"--max-staleness 0s", "--cache-size -1", "--max-reads-in-flight 0", "--default-shards 1025",
		"--resp-listen 127.0.0.1:0 --resp-conn-goroutines", "--resp-conn-goroutines=maybe",
		"--durability fast", "--tls-cert a.pem", "--store", "extra", "--flush-interval soon",
		"--max-body-total 1048575", "--max-body 10 --max-body-total 10", "--resp-read-timeout 0s", "--resp-max-clients 0",
		"--resp-max-input-memory 1048576 --resp-read-timeout 1ms --resp-max-clients 1",
		"--rls-listen 127.0.0.1:0 --rls-config r.yaml --rls-tls-cert c.pem --rls-tls-key k.pem --tls-client-ca ca.pem",
		"--rls-tls-cert c.pem", "--rls-tls-key k.pem --rls-listen :0 --rls-config r.yaml", "--tls-client-ca ca.pem --rls-tls-cert c.pem",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, ok := parseOrUsage(t, "serve", line)
		if !ok {
			return
		}
		cfg, err := m.cmd.(*serveCommand).check(m.args)
		if !isUsage(t, "check", line, err) {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("serve %q passed a configuration the engine refuses: %v", line, err)
		}
	})
}

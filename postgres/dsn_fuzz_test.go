package postgres

import (
	"testing"

	"github.com/shardcounter/shardcounter"
)

// FuzzParseConfig feeds arbitrary DSNs to the parser behind Open: it
// refuses them with invalid_argument, or returns a config with the
// package's pool defaults applied; it never panics.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"postgres://u:p@h:5432/d?sslmode=disable",
		"postgresql://u@h/d?pool_max_conns=3&connect_timeout=1",
		"host=h port=5432 user=u dbname=d sslmode=disable",
		"postgres://[::1]:5432/d", "postgres://h:99999/d", "postgres://%zz", "", "host=", "pool_max_conns=x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		cfg, err := parseConfig(dsn)
		if err != nil {
			if shardcounter.ErrorCode(err) != shardcounter.EINVALID || shardcounter.ErrorMessage(err) == "" {
				t.Fatalf("parseConfig(%q) = %v: want invalid_argument with a message", dsn, err)
			}
			return
		}
		if cfg.MaxConns < 1 || cfg.ConnConfig.ConnectTimeout <= 0 {
			t.Fatalf("parseConfig(%q): MaxConns %d, ConnectTimeout %v: the defaults were not applied", dsn, cfg.MaxConns, cfg.ConnConfig.ConnectTimeout)
		}
	})
}

// Command httpbare serves the bench's http-bare peer (bench.BareHandler: a
// net/http handler that only adds to an atomic) in a process of its own,
// with the timeouts of `shardcounter serve`, so that scripts/bench-doors.sh
// can load it with wrk next to `shardcounter serve` and read each
// process's CPU time apart.
//
//	go run ./cmd/httpbare -listen 127.0.0.1:8090
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/shardcounter/shardcounter/bench"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8090", "the `address` to serve on")
	flag.Parse()
	srv := &http.Server{
		Addr:              *listen,
		Handler:           bench.BareHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
	}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "httpbare:", err)
		os.Exit(1)
	}
}

package main_test

import (
	"os/exec"
	"strings"
	"testing"
)

// chartModules are the plotting, font, PDF and raster libraries a chart
// library brings; none may be linked into the server binary (issue 11).
var chartModules = []string{
	"gonum.org/",
	"codeberg.org/go-fonts/",
	"codeberg.org/go-pdf/",
	"codeberg.org/go-latex/",
	"git.sr.ht/~sbinet/gg",
	"github.com/ajstarks/svgo",
	"github.com/golang/freetype",
	"golang.org/x/image",
}

// TestNoChartLibraries checks both what the package imports (go list
// -deps) and what the built binary links (go version -m): bench --svg
// writes its SVG by hand, so the server carries no chart code.
func TestNoChartLibraries(t *testing.T) {
	readSources()
	deps, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, deps)
	}
	mods, err := exec.Command("go", "version", "-m", binary).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, mods)
	}
	for what, out := range map[string]string{"go list -deps ./cmd/shardcounter": string(deps), "go version -m shardcounter": string(mods)} {
		for line := range strings.Lines(out) {
			for _, m := range chartModules {
				if strings.Contains(line, m) {
					t.Errorf("%s lists %s: the server binary must not link chart libraries", what, strings.TrimSpace(line))
				}
			}
		}
	}
}

package http_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	shttp "github.com/shardcounter/shardcounter/http"
)

// TestRoutes checks the route table's own rules: one route a method and
// pattern, one operation id a route, the token needed exactly in the paths
// where every route needs it, a category for every route that needs the
// token and none for the public ones, and keys that name the pattern's own
// parameters.
func TestRouteTable(t *testing.T) {
	routes := shttp.Routes()
	if len(routes) == 0 {
		t.Fatal("no routes")
	}
	seen := map[string]bool{}
	ops := map[string]bool{}
	wildcard := regexp.MustCompile(`\{([a-z]+)\}`)
	for _, rt := range routes {
		name := rt.Method + " " + rt.Pattern
		if seen[name] {
			t.Errorf("%s: twice in the table", name)
		}
		seen[name] = true
		if rt.Operation == "" || ops[rt.Operation] {
			t.Errorf("%s: operation %q is empty or taken", name, rt.Operation)
		}
		ops[rt.Operation] = true
		if rt.Summary == "" {
			t.Errorf("%s: no summary", name)
		}
		if !slices.Contains([]string{"GET", "PUT", "POST", "PATCH", "DELETE"}, rt.Method) {
			t.Errorf("%s: method %s", name, rt.Method)
		}
		if got, want := rt.NeedsToken(), shttp.TokenSpace(rt.Pattern); got != want {
			t.Errorf("%s: needs the token %v, but paths under /v1 and /admin need it and no others (%v)", name, got, want)
		}
		if got, want := rt.Categories != 0, rt.NeedsToken(); got != want {
			t.Errorf("%s: categories %q, needs the token %v: a route that needs the token needs a category, a public one has none", name, rt.Categories, want)
		}
		var params []string
		for _, m := range wildcard.FindAllStringSubmatch(rt.Pattern, -1) {
			params = append(params, m[1])
		}
		for _, k := range rt.Keys {
			switch k.In {
			case shttp.InPath:
				if !slices.Contains(params, k.Name) {
					t.Errorf("%s: key %q is not a parameter of the path", name, k.Name)
				}
			case shttp.InQuery, shttp.InBody:
				if k.Name == "" {
					t.Errorf("%s: a key in the %s without a name", name, k.In)
				}
			case shttp.InStore:
			default:
				t.Errorf("%s: key in %q", name, k.In)
			}
		}
		if strings.HasPrefix(rt.Pattern, "/v1/counters/{id}") && (len(rt.Keys) == 0 || rt.Keys[0] != (shttp.Key{In: shttp.InPath, Name: "id"})) {
			t.Errorf("%s: a counter's route touches the counter: its first key is the path's id", name)
		}
	}
}

func TestCategoryString(t *testing.T) {
	for c, want := range map[shttp.Category]string{
		0:                                  "",
		shttp.CatRead:                      "@read",
		shttp.CatKeyspace | shttp.CatWrite: "@write @keyspace",
		shttp.CatAdmin:                     "@admin",
	} {
		if got := c.String(); got != want {
			t.Errorf("%08b: %q, want %q", c, got, want)
		}
	}
}

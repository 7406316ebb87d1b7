package http_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/openapitest"
)

// The OpenAPI document (openapi.json) against the route table and the
// server. Every other test of this package checks its traffic against the
// document too (Checked, in MustServe): a reply the document does not
// allow, a 2xx to a request it refuses, fails that test.

// openAPIPath is the document's path of a table pattern: the same, but
// that "/ui/{$}" is "/ui/".
func openAPIPath(pattern string) string { return strings.TrimSuffix(pattern, "{$}") }

// TestOpenAPITable checks that the document describes exactly the route
// table: every route, with its operation id, summary, path parameters and
// token, and no operation that is not a route. A route added to the table
// without its description fails here.
func TestOpenAPITable(t *testing.T) {
	v := openapitest.MustNew(t)
	doc := v.Doc()
	ops := map[string]*openapi3.Operation{}
	params := map[string]*openapi3.PathItem{}
	for path, item := range doc.Paths.Map() {
		for m, op := range item.Operations() {
			ops[m+" "+path] = op
			params[m+" "+path] = item
		}
	}
	wildcard := regexp.MustCompile(`\{([a-z]+)\}`)
	for _, rt := range shttp.Routes() {
		path := openAPIPath(rt.Pattern)
		name := rt.Method + " " + path
		if got := openapitest.Pattern(path); got != rt.Pattern {
			t.Errorf("%s: the document's path matches as %s, not as the table's %s", name, got, rt.Pattern)
		}
		op, ok := ops[name]
		if !ok {
			t.Errorf("%s (%s) is a route of the table but not an operation of openapi.json: describe it there", name, rt.Operation)
			continue
		}
		delete(ops, name)
		if op.OperationID != rt.Operation || op.Summary != rt.Summary {
			t.Errorf("%s: the document has operation %q, %q; the table %q, %q", name, op.OperationID, op.Summary, rt.Operation, rt.Summary)
		}
		var want, got []string
		for _, m := range wildcard.FindAllStringSubmatch(rt.Pattern, -1) {
			want = append(want, m[1])
		}
		for _, p := range slices.Concat(params[name].Parameters, op.Parameters) {
			if p.Value.In == openapi3.ParameterInPath {
				got = append(got, p.Value.Name)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: path parameters %q in the document, %q in the pattern", name, got, want)
		}
		switch public := op.Security != nil && len(*op.Security) == 0; {
		case rt.NeedsToken() && public:
			t.Errorf("%s: the route needs the token, but the document's security for it is empty", name)
		case !rt.NeedsToken() && !public:
			t.Errorf("%s: the route needs no token: give it \"security\": [] in the document", name)
		}
		if rt.NeedsToken() && op.Responses.Status(http.StatusUnauthorized) == nil {
			t.Errorf("%s: the route needs the token, but the document lists no 401", name)
		}
	}
	for name, op := range ops {
		t.Errorf("%s (%s) is an operation of openapi.json but no route of the table", name, op.OperationID)
	}
	enum := doc.Components.Schemas["ErrorBody"].Value.Properties["code"].Value.Enum
	var listed []string
	for _, c := range enum {
		listed = append(listed, c.(string))
	}
	codes := shttp.ErrorCodes()
	slices.Sort(listed)
	slices.Sort(codes)
	if !slices.Equal(listed, codes) {
		t.Errorf("the document's error codes are %q, the server's %q", listed, codes)
	}
}

// TestOpenAPIServed checks that the server serves every operation of the
// document (with collections and the admin endpoints, as serve has them),
// and the document itself at /openapi.json without the token.
func TestOpenAPIServed(t *testing.T) {
	e := MustServe(t, EnvOptions{All: true, Server: shttp.ServerOptions{AuthTokens: []string{"tok"}}})
	for _, rt := range shttp.Routes() {
		p := fill(rt.Pattern, rt.Operation)
		r := e.Do(t, rt.Method, p, "", "Authorization", "Bearer tok")
		if r.Status == http.StatusMethodNotAllowed || r.Status == http.StatusNotFound && bytes.Contains(r.Body, []byte("no API route")) {
			t.Errorf("%s %s: %d %s: the route is not served", rt.Method, p, r.Status, r.Body)
		}
	}
	r := e.Do(t, "GET", "/openapi.json", "")
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, shttp.OpenAPI()) || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /openapi.json without a token: %d %s, %d bytes: want 200 and the document", r.Status, r.Header.Get("Content-Type"), len(r.Body))
	}
}

// TestOpenAPIRefused sends, for every operation, requests the document
// refuses (a query parameter or a body field of the wrong type or outside
// its range or enum, an unknown body field, a body that is not an object,
// no body where one is required), made from the document's own schemas:
// each must get a 4xx. And each documented query parameter, given a value
// of its schema, must be one the server knows.
func TestOpenAPIRefused(t *testing.T) {
	v := openapitest.MustNew(t)
	e := MustServe(t, EnvOptions{All: true})
	sent := 0
	for path, item := range v.Doc().Paths.Map() {
		for method, op := range item.Operations() {
			p := fill(path, op.OperationID)
			var query []*openapi3.Parameter
			for _, pr := range op.Parameters {
				if pr.Value.In == openapi3.ParameterInQuery {
					query = append(query, pr.Value)
				}
			}
			var cases []refused
			for _, q := range query {
				for _, bad := range invalid(q.Schema.Value) {
					s, ok := bad.(string)
					if !ok {
						s = fmt.Sprint(bad)
						if _, isNum := bad.(float64); !isNum && q.Schema.Value.Type.Is("string") {
							continue // a query string is text: 12345 is a string
						}
					}
					cases = append(cases, refused{why: fmt.Sprintf("query %s=%s", q.Name, s), query: url.Values{q.Name: {s}}.Encode()})
				}
				// A value of its schema must not be an unknown parameter.
				r := e.Do(t, method, p+"?"+url.Values{q.Name: {fmt.Sprint(valid(q.Schema.Value))}}.Encode(), "")
				if bytes.Contains(r.Body, []byte("unknown query parameter")) {
					t.Errorf("%s %s: the document's query parameter %q is unknown to the server: %s", method, path, q.Name, r.Body)
				}
			}
			if rb := op.RequestBody; rb != nil {
				media := rb.Value.Content.Get("application/json")
				if rb.Value.Required {
					cases = append(cases, refused{why: "no body, where one is required", ct: contentType(rb.Value)})
				}
				if media != nil {
					s := media.Schema.Value
					cases = append(cases, refused{why: "a body that is an array", body: "[]"},
						refused{why: "an unknown field", body: `{"zz_unknown":1}`})
					base := valid(s).(map[string]any)
					for name, prop := range s.Properties {
						for _, bad := range invalid(prop.Value) {
							body := map[string]any{}
							for k, v := range base {
								body[k] = v
							}
							body[name] = bad
							b, _ := json.Marshal(body)
							cases = append(cases, refused{why: fmt.Sprintf("field %s: %v", name, bad), body: string(b)})
						}
					}
				}
			}
			for _, c := range cases {
				target := p
				if c.query != "" {
					target += "?" + c.query
				}
				req, err := http.NewRequest(method, e.URL+target, strings.NewReader(c.body))
				if err != nil {
					t.Fatal(err)
				}
				if c.body != "" {
					req.Header.Set("Content-Type", "application/json")
				} else if c.ct != "" {
					req.Header.Set("Content-Type", c.ct)
				}
				if v.CheckRequest(req, []byte(c.body)) == nil {
					t.Errorf("%s %s, %s: the document allows it: the generator is wrong", method, target, c.why)
					continue
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				sent++
				if resp.StatusCode/100 != 4 {
					t.Errorf("%s %s, %s (%s): %d %s: the document refuses it, so the server must answer 4xx", method, target, c.why, c.body, resp.StatusCode, body)
				}
			}
		}
	}
	t.Logf("%d refused requests", sent)
	if sent < 100 {
		t.Errorf("only %d refused requests made: the generator lost its cases", sent)
	}
}

// fill fills a path's parameters, with names of the operation's own, so
// that what one operation makes (a create) another does not find (a watch
// of a counter that does not exist ends at once).
func fill(path, op string) string {
	return strings.NewReplacer("{id}", op, "{member}", "m", "{name}", op, "{doc}", "d", "{asset}", "app.js", "{$}", "").Replace(path)
}

type refused struct {
	why, query, body, ct string
}

// contentType returns the media type of a request body with one.
func contentType(rb *openapi3.RequestBody) string {
	for ct := range rb.Content {
		return ct
	}
	return ""
}

// schemaOf is s, or for a described reference ({"allOf":[ref]}) what it
// refers to.
func schemaOf(s *openapi3.Schema) *openapi3.Schema {
	if len(s.AllOf) == 1 && s.Type == nil {
		return s.AllOf[0].Value
	}
	return s
}

// invalid returns JSON values that s refuses, as many kinds as s has
// constraints.
func invalid(s *openapi3.Schema) []any {
	s = schemaOf(s)
	var out []any
	switch {
	case s.Type.Is("integer"):
		out = append(out, "x", 1.5)
		if s.Min != nil {
			out = append(out, *s.Min-1)
		}
		if s.Max != nil {
			out = append(out, *s.Max+1)
		}
	case s.Type.Is("number"):
		out = append(out, "x")
	case s.Type.Is("boolean"):
		out = append(out, "yes")
	case s.Type.Is("string"):
		out = append(out, 12345)
		if len(s.Enum) > 0 {
			out = append(out, "not-one-of-them")
		}
		if s.MinLength > 0 {
			out = append(out, "")
		}
		if s.Format == "date-time" {
			out = append(out, "yesterday")
		}
	case s.Type.Is("array"):
		out = append(out, "x")
		if s.MinItems > 0 {
			out = append(out, []any{})
		}
		if s.MaxItems != nil {
			items := make([]any, *s.MaxItems+1)
			for i := range items {
				items[i] = valid(s.Items.Value)
			}
			out = append(out, items)
		}
		for _, bad := range invalid(s.Items.Value) {
			out = append(out, []any{bad})
		}
	case s.Type.Is("object"):
		out = append(out, "x", 1)
		if s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has {
			out = append(out, map[string]any{"zz_unknown": 1})
		}
	}
	return out
}

// valid returns a JSON value that s allows: an object with its required
// properties, the least number, the first of an enum.
func valid(s *openapi3.Schema) any {
	s = schemaOf(s)
	switch {
	case len(s.Enum) > 0:
		return s.Enum[0]
	case s.Type.Is("integer"), s.Type.Is("number"):
		if s.Min != nil {
			return *s.Min
		}
		return 1
	case s.Type.Is("boolean"):
		return true
	case s.Type.Is("string"):
		if s.Format == "date-time" {
			return "2030-01-01T00:00:00Z"
		}
		return "x"
	case s.Type.Is("array"):
		items := []any{}
		for range s.MinItems {
			items = append(items, valid(s.Items.Value))
		}
		return items
	case s.Type.Is("object"):
		o := map[string]any{}
		for _, name := range s.Required {
			o[name] = valid(s.Properties[name].Value)
		}
		return o
	}
	return nil
}

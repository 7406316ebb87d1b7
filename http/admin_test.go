package http_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// TestAdminRoutes drives the admin endpoints as the route table serves
// them: behind the token, with the API's 405 and error bodies, strict
// about their query parameters, and an export imported back.
func TestAdminRoutes(t *testing.T) {
	e := MustServe(t, EnvOptions{All: true, Server: shttp.ServerOptions{AuthTokens: []string{"tok"}}})
	auth := []string{"Authorization", "Bearer tok"}
	e.Client.Token = "tok"
	e.MustCreate(t, "a", 2)
	e.Do(t, "POST", path("a")+"/increment", `{"by":5}`, auth...).MustOK(t, http.StatusOK, nil)

	e.Do(t, "GET", "/admin/export", "").MustError(t, http.StatusUnauthorized, shardcounter.EUNAUTHENTICATED)
	r := e.Do(t, "PUT", "/admin/export", "", auth...)
	r.MustError(t, http.StatusMethodNotAllowed, shardcounter.EINVALID)
	if got := r.Header.Get("Allow"); got != "GET" {
		t.Errorf("Allow %q, want GET", got)
	}
	e.Do(t, "GET", "/admin/nosuch", "", auth...).MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
	e.Do(t, "GET", "/admin/export?prefx=a", "", auth...).MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
	e.Do(t, "POST", "/admin/import?replace=yes", "", auth...).MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
	e.Do(t, "GET", "/admin/backup?rate=-1", "", auth...).MustError(t, http.StatusBadRequest, shardcounter.EINVALID)

	export := e.Do(t, "GET", "/admin/export", "", auth...)
	if export.Status != http.StatusOK || !bytes.Contains(export.Body, []byte(`"a"`)) {
		t.Fatalf("export: %d %s", export.Status, export.Body)
	}
	req, err := http.NewRequest("POST", e.URL+"/admin/import?replace=true", bytes.NewReader(export.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("import of the export: %d", resp.StatusCode)
	}
	if got := e.MustValue(t, "a"); got != 5 {
		t.Errorf("after the import, a is %d, want 5", got)
	}
	if r := e.Do(t, "GET", "/admin/verify", "", auth...); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"verified"`) {
		t.Errorf("verify: %d %s", r.Status, r.Body)
	}
	if r := e.Do(t, "GET", "/admin/backup", "", auth...); r.Status != http.StatusOK || r.Header.Get("X-Shardcounter-Backup") != "bolt" {
		t.Errorf("backup: %d %s", r.Status, r.Header)
	}
}

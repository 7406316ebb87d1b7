package deploy_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// render builds a kustomization with kustomize's own Go API, as
// `kubectl apply -k` does.
func render(t *testing.T, dir string) resmap.ResMap {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return m
}

// object returns the one resource of kind in m, as a map.
func object(t *testing.T, m resmap.ResMap, kind string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, r := range m.Resources() {
		if r.GetKind() == kind {
			o, err := r.Map()
			if err != nil {
				t.Fatal(err)
			}
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d resources of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

// at walks o by keys and list indexes.
func at(t *testing.T, o any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := o.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %T is not an object", path, o)
			}
			o = m[k]
		case int:
			l, ok := o.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("at %v: no item %d", path, k)
			}
			o = l[k]
		}
	}
	return o
}

// serveFlags returns the flags and environment variables `shardcounter
// serve -h` of the built binary lists.
func serveFlags(t *testing.T) (flags, env map[string]bool) {
	t.Helper()
	out, _ := exec.Command(built(t), "serve", "-h").CombinedOutput()
	flags, env = map[string]bool{}, map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+--([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`env (SHARDCOUNTER_[A-Z_]+)`).FindAllStringSubmatch(string(out), -1) {
		env[m[1]] = true
	}
	if !flags["listen"] || !env["SHARDCOUNTER_STORE"] {
		t.Fatalf("serve -h lists no --listen or SHARDCOUNTER_STORE:\n%s", out)
	}
	return flags, env
}

// TestManifests renders both overlays and checks them against the
// binary: every flag and SHARDCOUNTER_ variable given is one serve takes;
// the container ports are the ports of --listen and --resp-listen, and
// the Service, the probes and the ServiceMonitor name them; the probes'
// and the ServiceMonitor's paths are served by the binary (200 from a
// running server); the Pebble store is on the volume; the PodDisruption
// Budget selects the pods; and the Dockerfile's volume and user agree.
func TestManifests(t *testing.T) {
	flags, env := serveFlags(t)
	s := start(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if status, body := s.do(t, "", "GET", path, ""); status != 200 {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
	}
	docker, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nVOLUME /data\n", "\nUSER 65532:65532\n", "CGO_ENABLED=0 go build"} {
		if !strings.Contains(string(docker), want) {
			t.Errorf("the Dockerfile has no %q", strings.TrimSpace(want))
		}
	}

	for _, overlay := range []string{"single", "shared"} {
		t.Run(overlay, func(t *testing.T) {
			m := render(t, "kubernetes/overlays/"+overlay)
			dep := object(t, m, "Deployment")
			pod := at(t, dep, "spec", "template", "spec")
			c := at(t, pod, "containers", 0)
			args := at(t, c, "args").([]any)
			if args[0] != "serve" {
				t.Fatalf("args %v: want serve first", args)
			}
			given := map[string]string{}
			for _, a := range args[1:] {
				name, value, _ := strings.Cut(strings.TrimPrefix(a.(string), "--"), "=")
				if !flags[name] {
					t.Errorf("flag --%s is not a flag of serve", name)
				}
				given[name] = value
			}
			storeDSN := ""
			for _, e := range at(t, c, "env").([]any) {
				name := at(t, e, "name").(string)
				if strings.HasPrefix(name, "SHARDCOUNTER_") && !env[name] {
					t.Errorf("environment variable %s is not one serve reads", name)
				}
				if name == "SHARDCOUNTER_STORE" {
					storeDSN, _ = at(t, e, "value").(string)
				}
			}
			ports := map[string]string{}
			for _, p := range at(t, c, "ports").([]any) {
				ports[at(t, p, "name").(string)] = fmt.Sprint(at(t, p, "containerPort"))
			}
			for name, flag := range map[string]string{"http": "listen", "resp": "resp-listen"} {
				_, port, err := net.SplitHostPort(given[flag])
				if err != nil || ports[name] != port {
					t.Errorf("--%s=%s, container port %s is %q", flag, given[flag], name, ports[name])
				}
			}
			for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
				if got := at(t, c, probe, "httpGet", "path"); got != path {
					t.Errorf("%s path %v, want %s", probe, got, path)
				}
				if got := at(t, c, probe, "httpGet", "port"); got != "http" {
					t.Errorf("%s port %v, want http", probe, got)
				}
			}
			// The token file is in the mounted secret.
			mounts := map[string]string{}
			for _, v := range at(t, c, "volumeMounts").([]any) {
				mounts[at(t, v, "name").(string)] = at(t, v, "mountPath").(string)
			}
			if !strings.HasPrefix(given["auth-token-file"], mounts["tokens"]+"/") {
				t.Errorf("--auth-token-file=%s is not under the tokens volume at %q", given["auth-token-file"], mounts["tokens"])
			}
			replicas := at(t, dep, "spec", "replicas")
			switch overlay {
			case "single":
				dir, ok := strings.CutPrefix(storeDSN, "pebble:")
				if !ok || !strings.HasPrefix(dir, mounts["data"]+"/") || mounts["data"] != "/data" {
					t.Errorf("store %q is not Pebble under the data volume at %q (the image's /data)", storeDSN, mounts["data"])
				}
				if replicas != 1 || at(t, dep, "spec", "strategy", "type") != "Recreate" {
					t.Errorf("Pebble: replicas %v, strategy %v; want 1 and Recreate", replicas, at(t, dep, "spec", "strategy", "type"))
				}
				claim := at(t, object(t, m, "PersistentVolumeClaim"), "metadata", "name")
				var vol any
				for _, v := range at(t, pod, "volumes").([]any) {
					if at(t, v, "name") == "data" {
						vol = at(t, v, "persistentVolumeClaim", "claimName")
					}
				}
				if vol != claim {
					t.Errorf("the data volume claims %v, the claim is %v", vol, claim)
				}
			case "shared":
				if n, _ := replicas.(int); n < 2 {
					t.Errorf("replicas %v, want several", replicas)
				}
				if _, ok := mounts["data"]; ok {
					t.Error("the shared shape mounts a data volume")
				}
			}
			labels := at(t, dep, "spec", "template", "metadata", "labels").(map[string]any)
			svc := object(t, m, "Service")
			for _, p := range at(t, svc, "spec", "ports").([]any) {
				if _, ok := ports[fmt.Sprint(at(t, p, "targetPort"))]; !ok {
					t.Errorf("Service port targets %v, no container port", at(t, p, "targetPort"))
				}
			}
			for kind, sel := range map[string][]any{
				"Service":             {"spec", "selector"},
				"PodDisruptionBudget": {"spec", "selector", "matchLabels"},
				"ServiceMonitor":      {"spec", "selector", "matchLabels"},
			} {
				o := object(t, m, kind)
				got, _ := at(t, o, sel...).(map[string]any)
				if len(got) == 0 {
					t.Errorf("%s selects nothing", kind)
				}
				for k, v := range got {
					if labels[k] != v {
						t.Errorf("%s selects %s=%v, the pods have %v", kind, k, v, labels[k])
					}
				}
			}
			ep := at(t, object(t, m, "ServiceMonitor"), "spec", "endpoints", 0)
			if at(t, ep, "port") != "http" || at(t, ep, "path") != "/metrics" {
				t.Errorf("ServiceMonitor scrapes %v on %v, want /metrics on http", at(t, ep, "path"), at(t, ep, "port"))
			}
		})
	}
}

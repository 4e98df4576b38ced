package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The files of deploy/ are checked as far as this machine allows: the
// Dockerfile's build command makes a static binary that runs, the compose
// file and the Kubernetes manifests parse and name only commands, flags and
// variables that exist, and systemd accepts the unit.

// deployDir is deploy/ of the repository.
var deployDir = filepath.Join(repoRoot, "deploy")

// dockerBuild returns the environment and the arguments of the Dockerfile's
// "RUN ... go build ..." line.
func dockerBuild(t *testing.T, dockerfile string) (env, args []string) {
	t.Helper()
	for line := range strings.SplitSeq(dockerfile, "\n") {
		words := shellWords(strings.TrimSpace(line))
		if len(words) == 0 || words[0] != "RUN" || !strings.Contains(line, "go build") {
			continue
		}
		words = words[1:]
		for len(words) > 0 && strings.Contains(words[0], "=") {
			env, words = append(env, words[0]), words[1:]
		}
		return env, words
	}
	t.Fatal("deploy/Dockerfile has no RUN line with go build")
	return nil, nil
}

// checkStatic returns why the ELF file at path is not a static binary:
// one with a program interpreter, or that needs shared libraries.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("it has a program interpreter (PT_INTERP): dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return fmt.Errorf("it needs the shared libraries %v (DT_NEEDED)", libs)
	}
	return nil
}

// sourceTree returns a checkout of HEAD with its .git (so that the build
// records the commit, as a Docker build of a clone does) and HEAD's commit;
// without git, the repository itself and "".
func sourceTree(t *testing.T) (dir, commit string) {
	t.Helper()
	head, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Logf("no git (%v): building the working tree, without checking the commit", err)
		return repoRoot, ""
	}
	commit = strings.TrimSpace(string(head))
	dir = t.TempDir()
	root, _ := filepath.Abs(repoRoot)
	for _, args := range [][]string{
		{"init", "-q", dir},
		{"-C", dir, "fetch", "-q", "--depth=1", root, commit},
		{"-C", dir, "checkout", "-q", "FETCH_HEAD"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir, commit
}

// The Dockerfile builds in one stage and runs in another, as a non-root
// user, on an image without a libc; its build command, run here on a
// checkout of HEAD, makes a static binary whose "version" names the
// commit.
func TestDeployDockerBuildIsStaticAndRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds postbox from a checkout")
	}
	raw, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := string(raw)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(dockerfile, -1)
	if len(froms) < 2 {
		t.Fatalf("deploy/Dockerfile has %d stages, want a build stage and a runtime stage", len(froms))
	}
	if final := froms[len(froms)-1][1]; !strings.Contains(final, "distroless/static") && final != "scratch" {
		t.Errorf("the runtime image is %s, want distroless/static or scratch (the binary is static)", final)
	}
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(dockerfile, -1)
	if len(user) == 0 || strings.HasPrefix(user[len(user)-1][1], "0") || strings.HasPrefix(user[len(user)-1][1], "root") {
		t.Errorf("deploy/Dockerfile's last USER is %v, want a non-root user", user)
	}
	env, args := dockerBuild(t, dockerfile)
	if !contains(env, "CGO_ENABLED=0") {
		t.Errorf("the build command's environment is %v, want CGO_ENABLED=0", env)
	}
	dir, commit := sourceTree(t)
	out := filepath.Join(t.TempDir(), "postbox")
	for i, a := range args {
		if a == "-o" && i+1 < len(args) {
			args[i+1] = out
		}
	}
	build := exec.Command(args[0], args[1:]...)
	build.Dir = dir
	// A Docker build stamps the commit of the context's .git
	// (-buildvcs=auto); this machine's go env may turn it off.
	build.Env = append(append(os.Environ(), "GOFLAGS=-buildvcs=auto"), env...)
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	if err := checkStatic(out); err != nil {
		t.Errorf("the binary is not static: %v", err)
	}
	version, err := exec.Command(out, "version").Output()
	if err != nil {
		t.Fatalf("postbox version: %v", err)
	}
	if commit != "" && !strings.Contains(string(version), "(commit "+commit+", ") {
		t.Errorf("postbox version printed %q, want the commit %s and its time", version, commit)
	}
	t.Logf("built %s", strings.TrimSpace(string(version)))
}

// yamlDocs parses every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s does not parse: %v", path, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// get walks a parsed YAML document along keys (string keys of maps,
// int indexes of lists).
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkEnv returns why a variable given to "postbox args..." is read by
// no flag of that command (nor is a broker credential), or "".
func checkEnv(args []string, name string) string {
	if name == envSinkUser || name == envSinkPassword || strings.HasPrefix(name, "OTEL_") || name == "GOGC" {
		return ""
	}
	fs := flagSet(commandWords(args))
	if fs == nil {
		return ""
	}
	found := false
	fs.VisitAll(func(f *flag.Flag) { found = found || envName(f.Name) == name })
	if !found {
		return fmt.Sprintf("postbox %s reads no variable %s", strings.Join(commandWords(args), " "), name)
	}
	return ""
}

// The compose file runs PostgreSQL, postbox migrate, then postbox relay and
// the console once migrate succeeded, with commands, flags and variables
// that exist.
func TestDeployComposeFile(t *testing.T) {
	docs := yamlDocs(t, filepath.Join(deployDir, "compose.yaml"))
	if len(docs) != 1 {
		t.Fatalf("compose.yaml has %d documents, want 1", len(docs))
	}
	services, _ := docs[0]["services"].(map[string]any)
	want := map[string]string{"migrate": "migrate", "relay": "relay", "console": "console"}
	if _, ok := services["db"]; !ok || !strings.HasPrefix(fmt.Sprint(get(services, "db", "image")), "postgres") {
		t.Errorf("compose.yaml has no PostgreSQL service db")
	}
	for name, command := range want {
		svc := services[name]
		args := strs(get(svc, "command"))
		if len(args) == 0 || args[0] != command {
			t.Errorf("service %s runs %v, want postbox %s", name, args, command)
			continue
		}
		if p := checkArgs(args); p != "" {
			t.Errorf("service %s: %s", name, p)
		}
		env, _ := get(svc, "environment").(map[string]any)
		if _, ok := env["DB_DSN"]; !ok {
			t.Errorf("service %s has no DB_DSN", name)
		}
		for v := range env {
			if p := checkEnv(args, v); p != "" {
				t.Errorf("service %s: %s", name, p)
			}
		}
		if name != "migrate" && get(svc, "depends_on", "migrate", "condition") != "service_completed_successfully" {
			t.Errorf("service %s does not wait for migrate to succeed", name)
		}
	}
}

// The Kubernetes manifests: a relay Deployment probing /healthz on the
// --metrics-addr port, non-root with a read-only root file system and
// resources, its secrets from a Secret; a PodDisruptionBudget and a
// ServiceMonitor of its pods; a migrate Job. Every command, flag and
// variable exists.
func TestDeployKubernetesManifests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(deployDir, "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	kinds := map[string][]map[string]any{}
	for _, f := range files {
		for _, d := range yamlDocs(t, f) {
			kind := fmt.Sprint(d["kind"])
			if d["apiVersion"] == nil || d["kind"] == nil || get(d, "metadata", "name") == nil {
				t.Errorf("%s: a document without apiVersion, kind or metadata.name", f)
			}
			kinds[kind] = append(kinds[kind], d)
		}
	}
	for _, kind := range []string{"Deployment", "Job", "PodDisruptionBudget", "ServiceMonitor", "Service", "Secret"} {
		if len(kinds[kind]) == 0 {
			t.Errorf("no %s in deploy/kubernetes", kind)
		}
	}
	for _, d := range append(kinds["Deployment"], kinds["Job"]...) {
		checkPodSpec(t, fmt.Sprint(get(d, "metadata", "name")), get(d, "spec", "template", "spec"))
	}
	relayLabels := get(kinds["Deployment"][0], "spec", "selector", "matchLabels")
	for _, kind := range []string{"PodDisruptionBudget", "ServiceMonitor"} {
		for _, d := range kinds[kind] {
			if fmt.Sprint(get(d, "spec", "selector", "matchLabels")) != fmt.Sprint(relayLabels) && kind == "PodDisruptionBudget" {
				t.Errorf("%s selects %v, not the relay's pods %v", kind, get(d, "spec", "selector", "matchLabels"), relayLabels)
			}
		}
	}
	if sm := kinds["ServiceMonitor"]; len(sm) > 0 && get(sm[0], "spec", "endpoints", 0, "path") != "/metrics" {
		t.Errorf("the ServiceMonitor scrapes %v, want /metrics", get(sm[0], "spec", "endpoints", 0, "path"))
	}
}

// checkPodSpec checks the containers of a pod spec: commands, flags and
// variables that exist, secrets from a Secret, non-root, read-only, with
// resources, and /healthz probes on the metrics port of a relay.
func checkPodSpec(t *testing.T, name string, spec any) {
	t.Helper()
	if get(spec, "securityContext", "runAsNonRoot") != true {
		t.Errorf("%s: the pod does not set runAsNonRoot", name)
	}
	for i := range len(get(spec, "containers").([]any)) {
		c := get(spec, "containers", i)
		args := strs(get(c, "args"))
		if p := checkArgs(args); p != "" || len(args) == 0 {
			t.Errorf("%s: container args %v: %s", name, args, p)
			continue
		}
		if get(c, "securityContext", "readOnlyRootFilesystem") != true || get(c, "securityContext", "allowPrivilegeEscalation") != false {
			t.Errorf("%s: the container's root file system is not read-only, or it may escalate", name)
		}
		if get(c, "resources", "requests") == nil || get(c, "resources", "limits") == nil {
			t.Errorf("%s: the container has no resource requests and limits", name)
		}
		for _, e := range get(c, "env").([]any) {
			v := fmt.Sprint(get(e, "name"))
			if p := checkEnv(args, v); p != "" {
				t.Errorf("%s: %s", name, p)
			}
			secret := strings.HasSuffix(v, "SECRET") || v == "DB_DSN" || strings.HasSuffix(v, "PASSWORD")
			if secret && get(e, "valueFrom", "secretKeyRef", "name") == nil {
				t.Errorf("%s: %s is not taken from a Secret", name, v)
			}
		}
		if args[0] != "relay" {
			continue
		}
		addr := ""
		for j, a := range args {
			if a == "--metrics-addr" && j+1 < len(args) {
				addr = args[j+1]
			}
		}
		_, port, _ := strings.Cut(addr, ":")
		if get(c, "ports", 0, "containerPort") == nil || fmt.Sprint(get(c, "ports", 0, "containerPort")) != port {
			t.Errorf("%s: the container port %v is not --metrics-addr's %q", name, get(c, "ports", 0, "containerPort"), addr)
		}
		for _, probe := range []string{"livenessProbe", "readinessProbe"} {
			if get(c, probe, "httpGet", "path") != "/healthz" || get(c, probe, "httpGet", "port") != get(c, "ports", 0, "name") {
				t.Errorf("%s: %s is not GET /healthz on the metrics port", name, probe)
			}
		}
	}
}

// The systemd unit runs a command that exists, reads its secrets from an
// EnvironmentFile whose example names only variables the relay reads, is
// hardened, and passes systemd-analyze verify where systemd is installed.
func TestDeploySystemdUnit(t *testing.T) {
	unitPath := filepath.Join(deployDir, "systemd", "postbox-relay.service")
	raw, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(raw)
	var args []string
	settings := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), "=")
		if !ok || strings.HasPrefix(key, "#") {
			continue
		}
		settings[key+"="+value] = true
		if key == "ExecStart" {
			words := shellWords(value)
			if len(words) < 2 || filepath.Base(words[0]) != "postbox" {
				t.Fatalf("ExecStart=%s does not run postbox", value)
			}
			args = words[1:]
		}
	}
	if p := checkArgs(args); p != "" {
		t.Errorf("ExecStart: %s", p)
	}
	for _, s := range []string{"DynamicUser=yes", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "CapabilityBoundingSet="} {
		if !settings[s] {
			t.Errorf("the unit lacks %s", s)
		}
	}
	envFile := ""
	for s := range settings {
		if strings.HasPrefix(s, "EnvironmentFile=") {
			envFile = s
		}
	}
	if envFile == "" {
		t.Error("the unit has no EnvironmentFile for its secrets")
	}
	example, err := os.ReadFile(filepath.Join(deployDir, "systemd", "postbox-relay.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(example), "\n") {
		name, _, ok := strings.Cut(strings.TrimPrefix(line, "#"), "=")
		if !ok || strings.Contains(name, " ") {
			continue
		}
		if p := checkEnv(args, name); p != "" {
			t.Errorf("postbox-relay.env.example: %s", p)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze here")
	}
	// verify wants ExecStart's program to exist: any executable does.
	program, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) to stand for the binary")
	}
	copyPath := filepath.Join(t.TempDir(), "postbox-relay.service")
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(unit, "/usr/local/bin/postbox", program)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", "--man=no", copyPath).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

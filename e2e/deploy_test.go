package e2e

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"inbox/deploy"
	"inbox/deploy/deploytest"
)

// TestDeployConfigStarts follows docs/deploy.md's step 2, several
// providers, literally: inbox.env with INBOX_CONFIG and the secrets
// uncommented, and deploy/inbox.toml with its Vibe and GitHub tables
// turned on as its header says, start serve.
func TestDeployConfigStarts(t *testing.T) {
	t.Parallel()
	set, commented := deploytest.EnvFile(t, "inbox.env")
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	for _, k := range []string{"INBOX_CONFIG", "VIBE_JOB_SIGNING_SECRET", "GITHUB_WEBHOOK_SECRET"} {
		if _, ok := commented[k]; !ok {
			t.Fatalf("inbox.env has no commented %s to uncomment", k)
		}
		env = append(env, k+"="+commented[k])
	}
	// With the secrets set, as docs/deploy.md says: serve refuses the shipped
	// placeholders (TestDeployPlaceholdersRefused).
	env = append(env, realSecrets()...)
	shipped := string(deployFile(t, "inbox.toml"))
	on := turnOn(shipped, false)
	for _, name := range []string{"vibe", "github"} {
		if !strings.Contains(on, "\nname = \""+name+"\"\n") || strings.Contains(shipped, "\nname = \""+name+"\"\n") {
			t.Fatalf("inbox.toml has no %s table turned off as its header says to turn it on", name)
		}
	}
	cfg := writeConfig(t, dir, on)
	// The paths of this test's machine instead of the VM's.
	env = append(env, "INBOX_CONFIG="+cfg, "INBOX_DB="+filepath.Join(dir, "inbox.db"),
		"INBOX_ADDR=127.0.0.1:0", "INBOX_ADMIN_ADDR=127.0.0.1:0")
	cmd := exec.Command(binary(t), "serve")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	started := make(chan bool, 1)
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), `"listening"`) {
				started <- true
				return
			}
		}
		started <- false
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatalf("serve with deploy/inbox.toml did not start:\n%s", log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve with deploy/inbox.toml did not start in time")
	}
}

// TestDeployFiles checks that the dispatch unit keeps serve's sandbox and
// that Caddy passes every source's path.
func TestDeployFiles(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "deploy", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sandbox := func(unit string) string {
		_, s, ok := strings.Cut(read(unit), "# /var/lib/inbox, owned by User")
		if !ok {
			t.Fatalf("%s: no sandbox section", unit)
		}
		return s
	}
	if sandbox("inbox.service") != sandbox("inbox-dispatch.service") {
		t.Error("inbox-dispatch.service's sandbox differs from inbox.service's")
	}
	if !strings.Contains(read("Caddyfile"), "handle /webhooks/* {") {
		t.Error("Caddyfile does not pass /webhooks/*")
	}
}

// turnOn returns the shipped inbox.toml with the sources it has turned off
// turned on, as its header says: one # removed from each line that starts
// with a single # and no space; with optional, from each line starting ##
// too, so those lines are on as well.
func turnOn(toml string, optional bool) string {
	lines := strings.Split(toml, "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "##"):
			l = l[1:]
			if optional {
				l = l[1:]
			}
		case strings.HasPrefix(l, "#") && len(l) > 1 && l[1] != ' ':
			l = l[1:]
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}

// TestDeployCronSumeOnly installs as docs/deploy.md says for Sume alone
// (inbox.env's secret, no INBOX_CONFIG; inbox.toml installed as shipped),
// sends the test delivery its step 4 sends, and runs the command of every
// line of deploy/inbox.cron, unchanged but for the paths, those commented
// out too: each exits 0 and prints nothing, so cron mails nothing and no
// webhook is posted to. A line the file ships reads nothing an operator
// of Sume alone did not set up.
func TestDeployCronSumeOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "inbox.db")
	if err := os.Mkdir(filepath.Join(dir, "backup"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "inbox.toml")
	writeConfigAt(t, cfg, string(deployFile(t, "inbox.toml")))
	// With the replica docs/deploy.md recommends, for the --replica-lag line.
	srv := startServer(t, db, "--replica", "file://"+filepath.Join(dir, "replica"))
	if out, errOut, code := runCLI(t, []string{"SUME_COM_WEBHOOK_SIGNING_SECRET=" + e2eSecret}, "send", "--url", srv.url); code != 0 {
		t.Fatalf("send: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// serve records the secret's use every minute and as it stops.
	srv.signal(syscall.SIGTERM)
	<-srv.done
	h := newHook(t, http.StatusOK)
	paths := strings.NewReplacer("/var/lib/inbox/", dir+"/", "/etc/inbox/inbox.toml", cfg,
		"https://ntfy.example.com/inbox-alerts", h.url())
	var ran, alerts int
	for line := range strings.SplitSeq(string(deployFile(t, "inbox.cron")), "\n") {
		line = strings.TrimPrefix(line, "#")
		fields := strings.Fields(line)
		if len(fields) < 8 || fields[5] != "inbox" || fields[6] != "/usr/local/bin/inbox" {
			continue
		}
		args := strings.Fields(paths.Replace(strings.Join(fields[7:], " ")))
		stdout := true
		if n := len(args); args[n-1] == ">/dev/null" {
			args, stdout = args[:n-1], false
		}
		out, errOut, code := runCLI(t, nil, args...)
		if !stdout {
			out = ""
		}
		if code != 0 || out != "" || errOut != "" {
			t.Errorf("%s\n\texit %d, stdout %q, stderr %q; want 0 and nothing printed", line, code, out, errOut)
		}
		ran++
		if args[0] == "alert" {
			alerts++
			if !slices.Contains(args, "--on-change") {
				t.Errorf("%s: no --on-change, so cron would mail it on every run while anything is found", line)
			}
		}
	}
	if ran < 7 || alerts < 6 {
		t.Errorf("ran %d lines of inbox.cron, %d of them alert: too few, the parsing is broken", ran, alerts)
	}
	if n := len(h.posts(t)); n != 0 {
		t.Errorf("the --notify line posted %d times, want none", n)
	}
	if b := deployFile(t, "inbox.cron"); regexp.MustCompile(`(?i)reference \d`).Match(b) {
		t.Error("inbox.cron names a reference an operator cannot look up")
	}
}

// realSecrets sets every secret inbox.toml names to a fresh value of its
// scheme's form.
func realSecrets() []string {
	key := func(prefix string) string {
		b := make([]byte, 32)
		rand.Read(b)
		return prefix + hex.EncodeToString(b)
	}
	// Vibe's form: vjs_ and 43 unpadded base64url characters.
	vibe := func() string {
		b := make([]byte, 32)
		rand.Read(b)
		return "vjs_" + base64.RawURLEncoding.EncodeToString(b)
	}
	return []string{
		"SUME_COM_WEBHOOK_SIGNING_SECRET=" + key("whsec_"),
		"VIBE_JOB_SIGNING_SECRET=" + vibe(),
		"VIBE_JOB_SIGNING_SECRET_PREVIOUS=" + vibe(),
		"GITHUB_WEBHOOK_SECRET=" + key(""),
	}
}

// TestDeployPlaceholdersRefused starts serve and dispatch with each secret
// placeholder the shipped files carry, read from deploy/ so the test
// follows the files: from inbox.env as shipped, through --secret and a
// rotation list, through inbox.toml's env (with its commented rotation
// table uncommented), as a value in the file, and as the forward secret.
// Each is one line naming the variable and exit 1, before any database is
// made.
func TestDeployPlaceholdersRefused(t *testing.T) {
	t.Parallel()
	set, commented := deploytest.EnvFile(t, "inbox.env")
	placeholders := map[string]string{}
	for _, vars := range []map[string]string{commented, set} {
		for k, v := range vars {
			if strings.Contains(k, "SECRET") && v != "" {
				placeholders[k] = v
			}
		}
	}
	for _, k := range []string{"SUME_COM_WEBHOOK_SIGNING_SECRET", "VIBE_JOB_SIGNING_SECRET", "VIBE_JOB_SIGNING_SECRET_PREVIOUS", "GITHUB_WEBHOOK_SECRET", "INBOX_FORWARD_SECRET"} {
		if placeholders[k] == "" {
			t.Fatalf("inbox.env has no placeholder for %s", k)
		}
	}
	dir := t.TempDir()
	// deploy/inbox.toml with every source turned on, its optional lines
	// (the rotation's [[source.secret]] table) too.
	toml := filepath.Join(dir, "inbox.toml")
	uncommented := turnOn(string(deployFile(t, "inbox.toml")), true)
	if !strings.Contains(uncommented, "\nenv = \"VIBE_JOB_SIGNING_SECRET_PREVIOUS\"") {
		t.Fatalf("inbox.toml has no commented rotation table for VIBE_JOB_SIGNING_SECRET_PREVIOUS")
	}
	if err := os.WriteFile(toml, []byte(uncommented), 0o600); err != nil {
		t.Fatal(err)
	}
	valueToml := filepath.Join(dir, "value.toml")
	if err := os.WriteFile(valueToml, []byte("[[source]]\nname = \"github\"\nscheme = \"github\"\n[[source.secret]]\nvalue = \""+placeholders["GITHUB_WEBHOOK_SECRET"]+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	base := []string{"INBOX_ADDR=127.0.0.1:0", "INBOX_ADMIN_ADDR=127.0.0.1:0"}
	shippedEnv := []string{}
	for k, v := range set {
		shippedEnv = append(shippedEnv, k+"="+v)
	}
	type run struct {
		name string
		env  []string // after the real secrets, so these win
		args []string
		want string // the variable the error names
	}
	runs := []run{
		{"inbox.env as shipped", append(slices.Clone(shippedEnv), base...), []string{"serve"}, "SUME_COM_WEBHOOK_SIGNING_SECRET"},
		{"--secret", base, []string{"serve", "--secret", placeholders["SUME_COM_WEBHOOK_SIGNING_SECRET"]}, "SUME_COM_WEBHOOK_SIGNING_SECRET"},
		{"in a rotation list", append([]string{"SUME_COM_WEBHOOK_SIGNING_SECRET=whsec_c2VjcmV0LWtleQ==," + placeholders["SUME_COM_WEBHOOK_SIGNING_SECRET"]}, base...), []string{"serve"}, "SUME_COM_WEBHOOK_SIGNING_SECRET"},
		{"value in the config", base, []string{"serve", "--config", valueToml}, "its value"},
		{"forward secret, serve", append([]string{"INBOX_FORWARD_SECRET=" + placeholders["INBOX_FORWARD_SECRET"]}, base...), []string{"serve", "--forward-url", "http://127.0.0.1:1/"}, "INBOX_FORWARD_SECRET"},
	}
	for _, k := range []string{"SUME_COM_WEBHOOK_SIGNING_SECRET", "VIBE_JOB_SIGNING_SECRET", "VIBE_JOB_SIGNING_SECRET_PREVIOUS", "GITHUB_WEBHOOK_SECRET"} {
		runs = append(runs, run{"config, " + k, append([]string{k + "=" + placeholders[k], "INBOX_CONFIG=" + toml}, base...), []string{"serve"}, k})
	}
	for _, r := range runs {
		// The last of a variable set twice wins: each run its own database.
		db := filepath.Join(t.TempDir(), "inbox.db")
		env := append(append(append([]string{"PATH=" + os.Getenv("PATH")}, realSecrets()...), r.env...), "INBOX_DB="+db)
		cmd := exec.Command(binary(t), r.args...)
		cmd.Env = env
		pipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Read stderr to its end, or until serve says it listens.
		var stderr strings.Builder
		listening := false
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"listening"`) {
				listening = true
				cmd.Process.Kill()
				break
			}
			stderr.WriteString(sc.Text() + "\n")
		}
		io.Copy(io.Discard, pipe)
		cmd.Wait()
		if listening {
			t.Errorf("%s: serve started with a placeholder secret", r.name)
			continue
		}
		errOut := strings.TrimSpace(stderr.String())
		if code := cmd.ProcessState.ExitCode(); code != 1 || strings.Contains(errOut, "\n") || !strings.Contains(errOut, r.want) || !strings.Contains(errOut, "placeholder") {
			t.Errorf("%s: exit %d, stderr %q; want 1 and one line naming %s and the placeholder", r.name, code, errOut, r.want)
		}
		for k, v := range placeholders {
			if strings.Contains(errOut, v) {
				t.Errorf("%s: the error holds %s's value", r.name, k)
			}
		}
		// serve checks the destination once the store is open (as for a bad
		// --forward-url); the sources' secrets before anything is made.
		if _, err := os.Stat(db); !os.IsNotExist(err) && !strings.HasPrefix(r.name, "forward") {
			t.Fatalf("%s: a database was made before refusing (%v)", r.name, err)
		}
	}
	// dispatch refuses the forward placeholder too.
	dbOK := fillDB(t, 1)
	_, errOut, code := runCLI(t, []string{"INBOX_FORWARD_SECRET=" + placeholders["INBOX_FORWARD_SECRET"]}, "dispatch", "--db", dbOK, "--forward-url", "http://127.0.0.1:1/")
	if code != 1 || !strings.Contains(errOut, "INBOX_FORWARD_SECRET") || !strings.Contains(errOut, "placeholder") {
		t.Errorf("dispatch with the forward placeholder: exit %d, stderr %q", code, errOut)
	}
}

// flagEnvVars maps every environment variable of serve's and dispatch's
// flags to the flag it sets, as the binary's --help names them.
func flagEnvVars(t *testing.T) map[string]string {
	t.Helper()
	vars := map[string]string{}
	flag := regexp.MustCompile(`^\s+(--[a-z-]+)\b.*\[(\$[A-Z0-9_]+(?:, \$[A-Z0-9_]+)*)\]\s*$`)
	for _, name := range []string{"serve", "dispatch"} {
		out, errOut, code := runCLI(t, nil, name, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d: %s", name, code, errOut)
		}
		for _, l := range strings.Split(out, "\n") {
			if m := flag.FindStringSubmatch(l); m != nil {
				for _, env := range strings.Split(m[2], ", ") {
					vars[strings.TrimPrefix(env, "$")] = name + " " + m[1]
				}
			}
		}
	}
	if len(vars) < 10 {
		t.Fatalf("--help names %d variables: too few to check against", len(vars))
	}
	return vars
}

// replicaAddrs returns the webhook and admin addresses
// deploy/inbox-postgres.env gives its VM.
func replicaAddrs(t *testing.T) (web, admin netip.AddrPort) {
	t.Helper()
	set, _ := deploytest.EnvFile(t, "inbox-postgres.env")
	var err error
	if web, err = netip.ParseAddrPort(set["INBOX_ADDR"]); err != nil {
		t.Fatalf("inbox-postgres.env: INBOX_ADDR %q: %v", set["INBOX_ADDR"], err)
	}
	if admin, err = netip.ParseAddrPort(set["INBOX_ADMIN_ADDR"]); err != nil {
		t.Fatalf("inbox-postgres.env: INBOX_ADMIN_ADDR %q: %v", set["INBOX_ADMIN_ADDR"], err)
	}
	return web, admin
}

// TestDeployReplicaEnvFile checks deploy/inbox-postgres.env, what a replica
// on a shared PostgreSQL adds to inbox.env: every variable in it, set or
// commented out, is a flag of serve or dispatch; it holds no signing secret
// (those stay in inbox.env, the same on every VM); INBOX_DB is a verified
// TLS postgres:// URL the driver parses, whose password is a placeholder
// start-up can recognise; its addresses are private, on one host, apart;
// the drop-in makes the units read it after inbox.env; and serve and
// dispatch start with every one of its values (the database swapped for a
// file and the addresses for loopback ones, this machine not being the VM).
func TestDeployReplicaEnvFile(t *testing.T) {
	t.Parallel()
	set, commented := deploytest.EnvFile(t, "inbox-postgres.env")
	flags := flagEnvVars(t)
	for _, vars := range []map[string]string{set, commented} {
		for k := range vars {
			if _, ok := flags[k]; !ok {
				t.Errorf("inbox-postgres.env lists %s, which is no flag of serve or dispatch", k)
			}
			if strings.Contains(k, "SECRET") || k == "SUME_API_KEY" {
				t.Errorf("inbox-postgres.env lists %s: secrets stay in inbox.env, the same file on every VM", k)
			}
		}
	}
	for _, env := range []string{"INBOX_PATH", "INBOX_TOLERANCE", "INBOX_EVENTS", "INBOX_MAX_BODY", "INBOX_MAX_REQUEST"} {
		if _, ok := set[env]; ok {
			t.Errorf("inbox-postgres.env sets %s: serve refuses it beside INBOX_CONFIG", env)
		}
	}

	db := set["INBOX_DB"]
	u, err := url.Parse(db)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("inbox-postgres.env: INBOX_DB is not a postgres:// URL (%v)", err)
	}
	if _, ok := u.User.Password(); !ok || !deploy.Placeholder(db) {
		t.Error("inbox-postgres.env: INBOX_DB's password is not a placeholder deploy.Placeholder recognises")
	}
	q := u.Query()
	if q.Get("sslmode") != "verify-full" || q.Get("sslrootcert") == "" {
		t.Errorf("inbox-postgres.env: INBOX_DB has sslmode=%q sslrootcert=%q, want verify-full and a CA", q.Get("sslmode"), q.Get("sslrootcert"))
	}
	if q.Has("search_path") {
		t.Error("inbox-postgres.env: INBOX_DB sets search_path, which psql and pg_dump refuse in a URL (docs/postgres.md has them take the same URL)")
	}
	// The CA file is the VM's; the rest must parse as the store will.
	q.Set("sslrootcert", "system")
	u.RawQuery = q.Encode()
	cfg, err := pgconn.ParseConfig(u.String())
	if err != nil {
		t.Fatalf("inbox-postgres.env: INBOX_DB does not parse: %v", err)
	}
	if cfg.TLSConfig == nil || cfg.TLSConfig.InsecureSkipVerify || cfg.TLSConfig.ServerName != u.Hostname() {
		t.Errorf("inbox-postgres.env: INBOX_DB does not verify the server's certificate and name")
	}
	for _, fb := range cfg.Fallbacks {
		if fb.TLSConfig == nil {
			t.Errorf("inbox-postgres.env: INBOX_DB falls back to a connection without TLS")
		}
	}

	web, admin := replicaAddrs(t)
	if web.Addr() != admin.Addr() || !web.Addr().IsPrivate() || web.Port() == admin.Port() {
		t.Errorf("inbox-postgres.env: INBOX_ADDR %s and INBOX_ADMIN_ADDR %s: want one private address, two ports", web, admin)
	}

	// The drop-in adds the file after the units' own inbox.env.
	dropIn, err := os.ReadFile("../deploy/inbox-postgres.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\[Service\]\nEnvironmentFile=/etc/inbox/inbox-postgres\.env$`).Match(dropIn) {
		t.Error("inbox-postgres.conf does not add EnvironmentFile=/etc/inbox/inbox-postgres.env to [Service]")
	}
	for _, unit := range []string{"inbox.service", "inbox-dispatch.service"} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", unit))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\nEnvironmentFile=/etc/inbox/inbox.env\n") {
			t.Errorf("%s does not read /etc/inbox/inbox.env, which the drop-in's file overrides", unit)
		}
	}

	// inbox.env as shipped, then this file with its commented variables
	// uncommented: each value must be one serve and dispatch take, on the
	// PostgreSQL the file is for (some are refused on SQLite).
	shipped, _ := deploytest.EnvFile(t, "inbox.env")
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range shipped {
		env = append(env, k+"="+v)
	}
	for _, vars := range []map[string]string{commented, set} {
		for k, v := range vars {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, realSecrets()...)
	env = append(env, "INBOX_DB="+pgSchema(t), "INBOX_ADDR=127.0.0.1:0", "INBOX_ADMIN_ADDR=127.0.0.1:0", "INBOX_DISPATCH_ADMIN_ADDR=127.0.0.1:0")
	for _, args := range [][]string{{"serve"}, {"dispatch", "--forward-url", "http://127.0.0.1:1/"}} {
		if log, ok := startsListening(t, env, args...); !ok {
			t.Errorf("%s with inbox-postgres.env's values did not start:\n%s", args[0], log)
		}
	}
}

// startsListening runs the binary with env and args until it logs that it
// listens, and reports whether it did, with what it logged.
func startsListening(t *testing.T, env []string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	started := make(chan bool, 1)
	var log syncBuffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.Write([]byte(sc.Text() + "\n"))
			if strings.Contains(sc.Text(), `"listening"`) {
				started <- true
				return
			}
		}
		started <- false
	}()
	select {
	case ok := <-started:
		return log.String(), ok
	case <-time.After(20 * time.Second):
		return log.String() + "(no start within 20s)", false
	}
}

// TestDeployReplicaCaddyfile checks deploy/Caddyfile.replicas against
// inbox-postgres.env, docs/postgres.md and the real binary: it passes
// /webhooks/* to several private upstreams on the replicas' webhook port,
// one of them the env file's; it checks health on the path and port where
// serve answers readiness (and where the webhook port does not); it
// retries within the provider's 10 s per attempt and never replays a POST
// that reached a replica; and docs/postgres.md names exactly these
// addresses, path and port, and is linked from the README's top paragraph.
func TestDeployReplicaCaddyfile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../deploy/Caddyfile.replicas")
	if err != nil {
		t.Fatal(err)
	}
	caddy := string(b)
	_, block, ok := strings.Cut(caddy, "handle /webhooks/* {")
	if !ok {
		t.Fatal("Caddyfile.replicas does not pass /webhooks/*")
	}
	m := regexp.MustCompile(`(?m)^\s*reverse_proxy\s+([^{\n]+)\{`).FindStringSubmatch(block)
	if m == nil {
		t.Fatal("Caddyfile.replicas: no reverse_proxy with upstreams under /webhooks/*")
	}
	web, admin := replicaAddrs(t)
	var upstreams []netip.AddrPort
	for _, f := range strings.Fields(m[1]) {
		ap, err := netip.ParseAddrPort(f)
		if err != nil || !ap.Addr().IsPrivate() || ap.Port() != web.Port() || slices.Contains(upstreams, ap) {
			t.Errorf("Caddyfile.replicas: upstream %q: want distinct private addresses on INBOX_ADDR's port %d", f, web.Port())
			continue
		}
		upstreams = append(upstreams, ap)
	}
	if len(upstreams) < 2 || !slices.Contains(upstreams, web) {
		t.Errorf("Caddyfile.replicas: upstreams %v: want several, inbox-postgres.env's %s among them", upstreams, web)
	}

	sub := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*(lb_\w+|health_\w+|fail_duration|max_fails|dial_timeout)\s+(.+?)\s*$`).FindAllStringSubmatch(block, -1) {
		sub[m[1]] = m[2]
	}
	for _, k := range []string{"lb_policy", "health_uri", "health_port", "health_interval", "health_timeout", "fail_duration", "lb_try_duration", "lb_retry_match"} {
		if sub[k] == "" {
			t.Errorf("Caddyfile.replicas does not set %s", k)
		}
	}
	if sub["health_port"] != strconv.Itoa(int(admin.Port())) {
		t.Errorf("Caddyfile.replicas: health_port %q, want INBOX_ADMIN_ADDR's port %d", sub["health_port"], admin.Port())
	}
	if strings.Contains(strings.ToUpper(sub["lb_retry_match"]), "POST") {
		t.Errorf("Caddyfile.replicas: lb_retry_match %q replays a POST that reached a replica", sub["lb_retry_match"])
	}
	if d, err := time.ParseDuration(sub["lb_try_duration"]); err != nil || d <= 0 || d >= 10*time.Second {
		t.Errorf("Caddyfile.replicas: lb_try_duration %q: want under the provider's 10 s per attempt", sub["lb_try_duration"])
	}
	if d, err := time.ParseDuration(sub["health_timeout"]); err != nil || d <= probeTimeout {
		t.Errorf("Caddyfile.replicas: health_timeout %q: want longer than /readyz's own bound, %s", sub["health_timeout"], probeTimeout)
	}

	// The README's top paragraph links to docs/postgres.md, and that page
	// says the same.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	top, _, _ := strings.Cut(string(readme), "\n## Two commands\n")
	if !strings.Contains(top, "(docs/postgres.md)") {
		t.Error("README's top paragraph does not link to docs/postgres.md")
	}
	page, err := os.ReadFile("../docs/postgres.md")
	if err != nil {
		t.Fatal(err)
	}
	section, ok := strings.CutPrefix(string(page), "# Several VMs, one PostgreSQL\n")
	if !ok {
		t.Fatal(`docs/postgres.md does not start with "# Several VMs, one PostgreSQL"`)
	}
	for _, s := range []string{"health_uri " + sub["health_uri"], "health_port " + sub["health_port"], "Caddyfile.replicas", "inbox-postgres.env"} {
		if !strings.Contains(section, s) {
			t.Errorf("docs/postgres.md does not say %q", s)
		}
	}
	want := map[string]bool{}
	for _, up := range upstreams {
		want[up.String()] = true
		want[netip.AddrPortFrom(up.Addr(), admin.Port()).String()] = true
	}
	got := map[string]bool{}
	for _, m := range regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}:\d+\b`).FindAllString(section, -1) {
		if !strings.HasPrefix(m, "127.") {
			got[m] = true
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("docs/postgres.md names the replicas' addresses %v, Caddyfile.replicas and inbox-postgres.env %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}

	// serve answers readiness there, on the admin address only, and its
	// webhook path is under the prefix Caddy passes.
	srv := startServer(t, filepath.Join(t.TempDir(), "inbox.db"), "--admin-addr", "127.0.0.1:0")
	get := func(u string) int {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(srv.admin + sub["health_uri"]); code != http.StatusOK {
		t.Errorf("GET %s on the admin address: %d, want 200", sub["health_uri"], code)
	}
	webURL, err := url.Parse(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	if code := get("http://" + webURL.Host + sub["health_uri"]); code == http.StatusOK {
		t.Errorf("GET %s on the webhook address answers 200: health_port would not be needed", sub["health_uri"])
	}
	if !strings.HasPrefix(webURL.Path, "/webhooks/") {
		t.Errorf("serve's webhook path %s is not under Caddy's /webhooks/*", webURL.Path)
	}
}

// probeTimeout is serve's bound on a readiness probe's reads of the store
// (probeTimeout in serve.go), which a health check must outwait.
const probeTimeout = 2 * time.Second

package replicaclient_test

import (
	"bufio"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"inbox/replicaclient"
)

const sshdPath = "/usr/sbin/sshd"

// sshd is Debian's OpenSSH server on a loopback port, with host keys,
// authorized_keys and config of its own in a temporary folder.
type sshd struct {
	Addr     string // 127.0.0.1:port
	User     string
	KeyFile  string          // a private key the server accepts for User
	HostKeys []ssh.PublicKey // what the server holds, ECDSA and Ed25519
	dir      string
}

func startSSHD(t *testing.T) *sshd {
	t.Helper()
	if _, err := os.Stat(sshdPath); err != nil {
		if os.Getenv("INBOX_REQUIRE_SSHD") == "1" {
			t.Fatalf("INBOX_REQUIRE_SSHD=1 but %s: %v (apt-get install openssh-server)", sshdPath, err)
		}
		t.Skipf("no %s (apt-get install openssh-server; INBOX_REQUIRE_SSHD=1 makes this fail)", sshdPath)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if me.Uid == "0" {
		// sshd running as root wants its privilege separation folder,
		// which the packaged service makes at boot.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &sshd{User: me.Username, dir: t.TempDir()}

	_, ecKey, err := newECDSA()
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]crypto.Signer{"host_ecdsa": ecKey, "host_ed25519": edKey} {
		writeKey(t, filepath.Join(s.dir, name), key)
		pub, err := ssh.NewPublicKey(key.Public())
		if err != nil {
			t.Fatal(err)
		}
		s.HostKeys = append(s.HostKeys, pub)
	}
	_, clientKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s.KeyFile = filepath.Join(s.dir, "client_key")
	writeKey(t, s.KeyFile, clientKey)
	clientPub, err := ssh.NewPublicKey(clientKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientPub), 0o600); err != nil {
		t.Fatal(err)
	}

	port := freePort(t)
	s.Addr = fmt.Sprintf("127.0.0.1:%d", port)
	config := filepath.Join(s.dir, "sshd_config")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %[2]s/host_ecdsa
HostKey %[2]s/host_ed25519
AuthorizedKeysFile %[2]s/authorized_keys
PidFile none
UsePAM no
StrictModes no
PermitRootLogin yes
PasswordAuthentication yes
KbdInteractiveAuthentication no
Subsystem sftp internal-sftp
LogLevel VERBOSE
`, port, s.dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file, not a pipe: each login's sshd-session starts a session of
	// its own and holds the output open until its client hangs up.
	logs, err := os.Create(filepath.Join(s.dir, "sshd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	said := func() string { b, _ := os.ReadFile(logs.Name()); return string(b) }
	cmd := exec.Command(sshdPath, "-D", "-e", "-f", config)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sshd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("sshd said:\n%s", said())
		}
	})
	// Ready once it greets: a readiness wait, not a timing assertion.
	for deadline := time.Now().Add(20 * time.Second); ; {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("sshd exited: %v\n%s", err, said())
		default:
		}
		if greets(s.Addr) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd on %s did not answer\n%s", s.Addr, said())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func greets(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newECDSA() (crypto.PublicKey, *ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	return k.Public(), k, nil
}

func writeKey(t *testing.T, file string, key crypto.Signer) {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
}

// knownHosts writes a known_hosts file listing keys for addr, its host
// names hashed as Debian's ssh does by default when hashed is set.
func knownHosts(t *testing.T, addr string, hashed bool, keys ...ssh.PublicKey) string {
	t.Helper()
	name := knownhosts.Normalize(addr)
	if hashed {
		name = knownhosts.HashHostname(name)
	}
	var b strings.Builder
	b.WriteString("# inbox test\nother.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHy0Xl3tCNbm8iSd7DOGOL4SFDzHwFHDwLc4zfiuAMLU\n")
	for _, k := range keys {
		b.WriteString(knownhosts.Line([]string{name}, k))
		b.WriteString("\n")
	}
	file := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(file, []byte(strings.Replace(b.String(), knownhosts.Normalize(addr), name, -1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func sftpEnv(t *testing.T, keyFile, password, knownHostsFile string) {
	t.Helper()
	t.Setenv(replicaclient.EnvSFTPKeyFile, keyFile)
	t.Setenv(replicaclient.EnvSFTPPassword, password)
	t.Setenv(replicaclient.EnvSFTPKnownHosts, knownHostsFile)
}

func TestSFTPRoundTrip(t *testing.T) {
	s := startSSHD(t)
	// Both of the server's keys, hashed: New must hand Litestream the one
	// the server shows (ECDSA, which the client asks for first).
	sftpEnv(t, s.KeyFile, "", knownHosts(t, s.Addr, true, s.HostKeys[1], s.HostKeys[0]))
	dir := filepath.Join(t.TempDir(), "replica")
	client, err := replicaclient.New(context.Background(), "sftp://"+s.User+"@"+s.Addr+dir)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, client)
	// The server is this machine: the path is absolute on the server.
	if ltx, _ := filepath.Glob(filepath.Join(dir, "ltx", "0", "*.ltx")); len(ltx) < 2 {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("level-0 LTX files under %s: %q, want the two syncs'; folder holds %v", dir, ltx, entries)
	}
}

func TestSFTPRefusesAnotherHostKey(t *testing.T) {
	s := startSSHD(t)
	_, other, err := newECDSA()
	if err != nil {
		t.Fatal(err)
	}
	otherPub, err := ssh.NewPublicKey(other.Public())
	if err != nil {
		t.Fatal(err)
	}
	sftpEnv(t, s.KeyFile, "", knownHosts(t, s.Addr, false, otherPub))
	client, err := replicaclient.New(context.Background(), "sftp://"+s.User+"@"+s.Addr+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = listLTX(client)
	if err == nil || !strings.Contains(err.Error(), "host key mismatch") {
		t.Fatalf("listing on a server whose key known_hosts does not hold: %v, want a host key mismatch", err)
	}
}

func TestSFTPRefusedPasswordStaysSecret(t *testing.T) {
	s := startSSHD(t)
	const password = "wr0ng-p4ssw0rd-never-shown"
	sftpEnv(t, "", password, knownHosts(t, s.Addr, false, s.HostKeys...))
	client, err := replicaclient.New(context.Background(), "sftp://"+s.User+"@"+s.Addr+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = listLTX(client)
	if err == nil {
		t.Fatal("listing with a wrong password succeeded")
	}
	if !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("error %q does not say the login was refused", err)
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("error %q holds the password", err)
	}
}

func TestSFTPRefuses(t *testing.T) {
	dir := t.TempDir()
	_, hostKey, _ := ed25519.GenerateKey(rand.Reader)
	hostPub, _ := ssh.NewPublicKey(hostKey.Public())
	listed := knownHosts(t, "backup.example.com:22", false, hostPub)
	_, clientKey, _ := ed25519.GenerateKey(rand.Reader)
	keyFile := filepath.Join(dir, "key")
	writeKey(t, keyFile, clientKey)
	locked := filepath.Join(dir, "locked_key")
	block, err := ssh.MarshalPrivateKeyWithPassphrase(clientKey, "", []byte("k3y-p4ss"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(locked, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-p4ss"

	for _, tc := range []struct {
		name, url               string
		key, password, hostsEnv string
		says                    []string
	}{
		{"no user", "sftp://backup.example.com/srv/inbox", keyFile, "", listed, []string{"no user", "sftp://USER@HOST"}},
		{"password in URL", "sftp://inbox:" + secret + "@backup.example.com/srv/inbox", keyFile, "", listed, []string{"password", replicaclient.EnvSFTPPassword}},
		{"no host", "sftp://inbox@/srv/inbox", keyFile, "", listed, []string{"no host"}},
		{"no directory", "sftp://inbox@backup.example.com", keyFile, "", listed, []string{"no directory", "/ABSOLUTE/DIR"}},
		{"query", "sftp://inbox@backup.example.com/srv/inbox?insecure=1", keyFile, "", listed, []string{"no query"}},
		{"no credentials", "sftp://inbox@backup.example.com/srv/inbox", "", "", listed, []string{replicaclient.EnvSFTPKeyFile, replicaclient.EnvSFTPPassword}},
		{"missing key file", "sftp://inbox@backup.example.com/srv/inbox", filepath.Join(dir, "absent"), "", listed, []string{replicaclient.EnvSFTPKeyFile, "absent"}},
		{"not a key", "sftp://inbox@backup.example.com/srv/inbox", listed, "", listed, []string{"no private key"}},
		{"key with passphrase", "sftp://inbox@backup.example.com/srv/inbox", locked, "", listed, []string{"passphrase", "ssh-keygen"}},
		{"no known_hosts", "sftp://inbox@backup.example.com/srv/inbox", keyFile, secret, "", []string{replicaclient.EnvSFTPKnownHosts, "ssh-keyscan backup.example.com"}},
		{"host not listed", "sftp://inbox@backup.example.com:2222/srv/inbox", keyFile, secret, listed, []string{"does not list [backup.example.com]:2222", "ssh-keyscan -p 2222 backup.example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sftpEnv(t, tc.key, tc.password, tc.hostsEnv)
			_, err := replicaclient.New(context.Background(), tc.url)
			if err == nil {
				t.Fatalf("New(%q) succeeded, want an error", replicaclient.Redact(tc.url))
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "k3y-p4ss") {
				t.Errorf("error %q holds a secret", err)
			}
		})
	}

	t.Run("listed on port 22", func(t *testing.T) {
		sftpEnv(t, keyFile, "", listed)
		if _, err := replicaclient.New(context.Background(), "sftp://inbox@backup.example.com/srv/inbox"); err != nil {
			t.Fatal(err)
		}
	})
}

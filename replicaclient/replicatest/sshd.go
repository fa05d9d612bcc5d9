// Package replicatest starts the stores a replica is tested against: an
// OpenSSH server of the test's own, an S3 stand-in that notes what was
// sent, and a JetStream object store. replicaclient's tests and the
// real binary's (e2e/) share them.
package replicatest

import (
	"bufio"
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

	"inbox/testport"
)

const sshdPath = "/usr/sbin/sshd"

// SSHD is Debian's OpenSSH server on a loopback port, with host keys,
// authorized_keys and config of its own in a temporary folder.
type SSHD struct {
	Addr     string // 127.0.0.1:port
	User     string
	KeyFile  string          // a private key the server accepts for User
	HostKeys []ssh.PublicKey // what the server holds, ECDSA and Ed25519
}

// StartSSHD starts the server and waits until it greets; it is killed when
// the test ends. Without sshd the test is skipped, or fails when
// INBOX_REQUIRE_SSHD=1.
func StartSSHD(t testing.TB) *SSHD {
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
	dir := t.TempDir()
	s := &SSHD{User: me.Username}

	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]crypto.Signer{"host_ecdsa": ecKey, "host_ed25519": edKey} {
		WriteKey(t, filepath.Join(dir, name), key)
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
	s.KeyFile = filepath.Join(dir, "client_key")
	WriteKey(t, s.KeyFile, clientKey)
	clientPub, err := ssh.NewPublicKey(clientKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientPub), 0o600); err != nil {
		t.Fatal(err)
	}

	port := freePort(t)
	s.Addr = fmt.Sprintf("127.0.0.1:%d", port)
	config := filepath.Join(dir, "sshd_config")
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
`, port, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file, not a pipe: each login's sshd-session starts a session of
	// its own and holds the output open until its client hangs up.
	logs, err := os.Create(filepath.Join(dir, "sshd.log"))
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

func freePort(t testing.TB) int {
	t.Helper()
	return testport.Later(t)
}

// WriteKey writes key to file as OpenSSH writes a private key without a
// passphrase.
func WriteKey(t testing.TB, file string, key crypto.Signer) {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
}

// KnownHosts writes a known_hosts file listing keys for addr, its host
// names hashed as Debian's ssh does by default when hashed is set.
func KnownHosts(t testing.TB, addr string, hashed bool, keys ...ssh.PublicKey) string {
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

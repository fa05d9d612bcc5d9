package replicaclient_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"inbox/replicaclient"
	"inbox/replicaclient/replicatest"
)

func sftpEnv(t *testing.T, keyFile, password, knownHostsFile string) {
	t.Helper()
	t.Setenv(replicaclient.EnvSFTPKeyFile, keyFile)
	t.Setenv(replicaclient.EnvSFTPPassword, password)
	t.Setenv(replicaclient.EnvSFTPKnownHosts, knownHostsFile)
}

func TestSFTPRoundTrip(t *testing.T) {
	s := replicatest.StartSSHD(t)
	// Both of the server's keys, hashed: New must hand Litestream the one
	// the server shows (ECDSA, which the client asks for first).
	sftpEnv(t, s.KeyFile, "", replicatest.KnownHosts(t, s.Addr, true, s.HostKeys[1], s.HostKeys[0]))
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
	s := replicatest.StartSSHD(t)
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherPub, err := ssh.NewPublicKey(other.Public())
	if err != nil {
		t.Fatal(err)
	}
	sftpEnv(t, s.KeyFile, "", replicatest.KnownHosts(t, s.Addr, false, otherPub))
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
	s := replicatest.StartSSHD(t)
	const password = "wr0ng-p4ssw0rd-never-shown"
	sftpEnv(t, "", password, replicatest.KnownHosts(t, s.Addr, false, s.HostKeys...))
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
	listed := replicatest.KnownHosts(t, "backup.example.com:22", false, hostPub)
	_, clientKey, _ := ed25519.GenerateKey(rand.Reader)
	keyFile := filepath.Join(dir, "key")
	replicatest.WriteKey(t, keyFile, clientKey)
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

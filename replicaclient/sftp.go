package replicaclient

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// The environment an sftp:// replica reads.
const (
	EnvSFTPKeyFile    = "INBOX_REPLICA_SFTP_KEY_FILE"
	EnvSFTPPassword   = "INBOX_REPLICA_SFTP_PASSWORD"
	EnvSFTPKnownHosts = "INBOX_REPLICA_SFTP_KNOWN_HOSTS"
)

// hostKeyPreference is the order in which golang.org/x/crypto/ssh asks a
// server for its host key types (its defaultHostKeyAlgos, certificates
// left out): a server holding several keys shows the first of these it
// has. Litestream checks one fixed key, so that is the one to hand it.
var hostKeyPreference = []string{
	ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoRSA, ssh.KeyAlgoED25519,
}

// newSFTP is the client for sftp://user@host[:port]/absolute/dir. It
// logs in with the key file INBOX_REPLICA_SFTP_KEY_FILE names or the
// password INBOX_REPLICA_SFTP_PASSWORD holds, and accepts only a server
// whose host key the known_hosts file INBOX_REPLICA_SFTP_KNOWN_HOSTS
// lists: a replica holds every event, so an unchecked server is refused
// rather than warned about.
func newSFTP(u *url.URL) (litestream.ReplicaClient, error) {
	const want = "write sftp://USER@HOST[:PORT]/ABSOLUTE/DIR, e.g. sftp://inbox@backup.example.com/srv/backups/inbox"
	red := Redact(u.String())
	if u.User == nil || u.User.Username() == "" {
		return nil, fmt.Errorf("replica URL %s names no user: %s", red, want)
	}
	if _, ok := u.User.Password(); ok {
		return nil, fmt.Errorf("replica URL %s holds a password: remove it and set %s (or %s for a key) in the environment", red, EnvSFTPPassword, EnvSFTPKeyFile)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("replica URL %s names no host: %s", red, want)
	}
	if err := refuseQuery(u); err != nil {
		return nil, err
	}
	dir := path.Clean(u.Path)
	if !path.IsAbs(dir) || dir == "/" {
		return nil, fmt.Errorf("replica URL %s names no directory: %s", red, want)
	}

	c := sftp.NewReplicaClient()
	c.Host = u.Host
	if u.Port() == "" {
		c.Host = net.JoinHostPort(u.Hostname(), "22")
	}
	c.User = u.User.Username()
	c.Path = dir
	c.Password = os.Getenv(EnvSFTPPassword)
	c.KeyPath = os.Getenv(EnvSFTPKeyFile)
	if c.Password == "" && c.KeyPath == "" {
		return nil, fmt.Errorf("replica URL %s: set %s to a private key file the server accepts for %s (or %s)", red, EnvSFTPKeyFile, c.User, EnvSFTPPassword)
	}
	if c.KeyPath != "" {
		if err := checkKeyFile(c.KeyPath); err != nil {
			return nil, fmt.Errorf("replica URL %s: %s: %w", red, EnvSFTPKeyFile, err)
		}
	}
	hostKey, err := knownHostKey(c.Host)
	if err != nil {
		return nil, fmt.Errorf("replica URL %s: %w", red, err)
	}
	c.HostKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostKey)))
	return c, nil
}

// checkKeyFile fails when file cannot be read or holds no private key
// Litestream can use; the error names the file, never its content.
func checkKeyFile(file string) error {
	buf, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read key file: %w", err)
	}
	_, err = ssh.ParsePrivateKey(buf)
	var passphrase *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &passphrase):
		return fmt.Errorf("the key in %s has a passphrase, which Litestream cannot ask for: give inbox a key of its own without one (ssh-keygen -t ed25519 -N '' -f FILE)", file)
	case err != nil:
		return fmt.Errorf("%s holds no private key in OpenSSH or PEM form", file)
	}
	return nil
}

// knownHostKey is the key hostport (host:port) will show, from the
// known_hosts file INBOX_REPLICA_SFTP_KNOWN_HOSTS names: of the keys
// listed for it, plain or hashed, the type the client asks for first.
// It fails when the variable is unset, the file unreadable, or the host
// not listed, saying how to list it.
func knownHostKey(hostport string) (ssh.PublicKey, error) {
	host, port, _ := net.SplitHostPort(hostport)
	scan := "ssh-keyscan " + host
	if port != "22" {
		scan = "ssh-keyscan -p " + port + " " + host
	}
	file := os.Getenv(EnvSFTPKnownHosts)
	if file == "" {
		return nil, fmt.Errorf("set %s to a known_hosts file listing the server's host keys, e.g. %s > /etc/inbox/known_hosts (check them against the server's own)", EnvSFTPKnownHosts, scan)
	}
	check, err := knownhosts.New(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvSFTPKnownHosts, err)
	}
	// The callback, shown a key it does not know, answers with the keys it
	// does know for the host: that is its documented KeyError.Want.
	_, probe, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(probe)
	if err != nil {
		return nil, err
	}
	var keyErr *knownhosts.KeyError
	err = check(hostport, &net.TCPAddr{IP: net.IPv4zero}, signer.PublicKey())
	if !errors.As(err, &keyErr) {
		return nil, fmt.Errorf("%s: look up %s in %s: %v", EnvSFTPKnownHosts, hostport, file, err)
	}
	for _, algo := range hostKeyPreference {
		for _, k := range keyErr.Want {
			if k.Key.Type() == algo {
				return k.Key, nil
			}
		}
	}
	if len(keyErr.Want) > 0 {
		return nil, fmt.Errorf("%s: %s lists no key for %s of a type inbox can check (%s)", EnvSFTPKnownHosts, file, knownhosts.Normalize(hostport), strings.Join(hostKeyPreference, ", "))
	}
	return nil, fmt.Errorf("%s: %s does not list %s: add its host keys, e.g. %s >> %s (check them against the server's own)", EnvSFTPKnownHosts, file, knownhosts.Normalize(hostport), scan, file)
}

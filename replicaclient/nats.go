package replicaclient

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/nats"
)

// The environment a nats:// replica reads: one way to log in, or none.
const (
	EnvNATSCreds    = "INBOX_REPLICA_NATS_CREDS"
	EnvNATSToken    = "INBOX_REPLICA_NATS_TOKEN"
	EnvNATSUser     = "INBOX_REPLICA_NATS_USER"
	EnvNATSPassword = "INBOX_REPLICA_NATS_PASSWORD"
)

// bucketName is what JetStream accepts as an object store's name.
var bucketName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// newNATS is the client for nats://host[:port]/bucket[/path], a JetStream
// object store made beforehand (Litestream does not make one). It logs in
// with the creds file INBOX_REPLICA_NATS_CREDS names, else the token
// INBOX_REPLICA_NATS_TOKEN, else INBOX_REPLICA_NATS_USER and
// INBOX_REPLICA_NATS_PASSWORD, else as nobody; ?tls=true asks for TLS.
func newNATS(u *url.URL) (litestream.ReplicaClient, error) {
	const want = "write nats://HOST[:PORT]/BUCKET[/PATH], e.g. nats://127.0.0.1:4222/inbox-replica"
	red := Redact(u.String())
	if u.User != nil {
		return nil, fmt.Errorf("replica URL %s holds credentials: remove them and set %s (a creds file), %s, or %s and %s in the environment", red, EnvNATSCreds, EnvNATSToken, EnvNATSUser, EnvNATSPassword)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("replica URL %s names no host: %s", red, want)
	}
	if err := refuseQuery(u, "tls"); err != nil {
		return nil, err
	}
	bucket, dir, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if bucket == "" {
		return nil, fmt.Errorf("replica URL %s names no object store bucket: %s", red, want)
	}
	if !bucketName.MatchString(bucket) {
		return nil, fmt.Errorf("replica URL %s: bucket %q may hold only letters, digits, - and _: %s", red, bucket, want)
	}

	c := nats.NewReplicaClient()
	c.URL = "nats://" + u.Host
	c.BucketName = bucket
	c.Path = litestream.CleanReplicaURLPath(dir)
	if v, ok := litestream.BoolQueryValue(u.Query(), "tls"); ok {
		if u.Query().Get("tls") != "true" && u.Query().Get("tls") != "false" {
			return nil, fmt.Errorf("replica URL %s: write tls=true or tls=false", red)
		}
		c.TLS = v
	}
	user, password := os.Getenv(EnvNATSUser), os.Getenv(EnvNATSPassword)
	if (user == "") != (password == "") {
		return nil, fmt.Errorf("replica URL %s: only one of %s and %s is set, set both", red, EnvNATSUser, EnvNATSPassword)
	}
	switch {
	case os.Getenv(EnvNATSCreds) != "":
		c.Creds = os.Getenv(EnvNATSCreds)
		if _, err := os.Stat(c.Creds); err != nil {
			return nil, fmt.Errorf("replica URL %s: %s: %w", red, EnvNATSCreds, err)
		}
	case os.Getenv(EnvNATSToken) != "":
		c.Token = os.Getenv(EnvNATSToken)
	case user != "":
		c.Username, c.Password = user, password
	}
	return c, nil
}

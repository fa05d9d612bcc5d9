// Package replicaclient turns a replica URL into the Litestream replica
// client that writes there: file:// (another disk or a mounted share),
// s3:// (AWS S3 and S3-compatible stores), sftp:// and nats:// (a
// JetStream object store). Secrets never travel in the URL: each type
// reads them from the environment, and Redact makes a URL safe to log.
// docs/replica-urls.md lists the forms and their variables.
package replicaclient

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/benbjohnson/litestream"
)

// Schemes are the replica URL schemes New accepts, as an error lists them.
const Schemes = "file://, s3://, sftp:// or nats://"

// New returns the Litestream replica client rawURL names. It does not
// contact the replica: the client connects on first use, so a replica
// that cannot be reached shows up there rather than here. New fails, with
// an error that says what to write instead and names the URL only as
// Redact gives it, when the URL has an unknown scheme, misses the bucket,
// host or path its type needs, names a relative file path, carries a
// credential (those come from the environment), or when a variable it
// reads names a file that cannot be read. New reads only the environment
// and local files and does not use ctx today.
func New(ctx context.Context, rawURL string) (litestream.ReplicaClient, error) {
	if strings.TrimSpace(rawURL) == "" {
		return nil, fmt.Errorf("replica URL is empty: write one of %s", Schemes)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's error quotes the whole URL, password included.
		return nil, fmt.Errorf("replica URL %s does not parse: write one of %s", Redact(rawURL), Schemes)
	}
	switch u.Scheme {
	case "file":
		return newFile(u)
	case "s3":
		return newS3(u)
	case "sftp":
		return newSFTP(u)
	case "nats":
		return newNATS(u)
	case "":
		if strings.HasPrefix(rawURL, "/") {
			return nil, fmt.Errorf("replica URL %s has no scheme: for a directory on this machine write file://%s", Redact(rawURL), u.Path)
		}
		return nil, fmt.Errorf("replica URL %s has no scheme: write one of %s", Redact(rawURL), Schemes)
	default:
		return nil, fmt.Errorf("replica URL %s: unknown scheme %q, write one of %s", Redact(rawURL), u.Scheme, Schemes)
	}
}

// refuseQuery fails when u carries a query parameter outside allowed,
// which would otherwise be ignored without a word.
func refuseQuery(u *url.URL, allowed ...string) error {
	for key := range u.Query() {
		if !slices.Contains(allowed, key) {
			if len(allowed) == 0 {
				return fmt.Errorf("replica URL %s: a %s:// URL takes no query parameters, remove ?%s", Redact(u.String()), u.Scheme, key)
			}
			return fmt.Errorf("replica URL %s: unknown query parameter %q, a %s:// URL takes %s", Redact(u.String()), key, u.Scheme, strings.Join(allowed, ", "))
		}
	}
	return nil
}

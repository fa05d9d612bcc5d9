package replicaclient

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/s3"
)

// s3Query are the settings an s3:// URL may carry, by Litestream's names.
var s3Query = []string{
	"endpoint", "region", "force-path-style", "sign-payload",
	"skip-verify", "storage-class", "sse-kms-key-id",
}

// s3CredentialQuery are query names someone might put a key in; New
// points them to the environment rather than calling them unknown.
var s3CredentialQuery = []string{
	"access-key-id", "accessKeyId", "access_key_id", "AWS_ACCESS_KEY_ID",
	"secret-access-key", "secretAccessKey", "secret_access_key", "AWS_SECRET_ACCESS_KEY",
	"session-token", "sessionToken", "session_token", "AWS_SESSION_TOKEN",
	"sse-customer-key", "sseCustomerKey",
}

const s3CredentialsFromEnv = "remove them and set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN if yours expire) in the environment"

// newS3 is the client for s3://bucket/path, on AWS or on an S3-compatible
// store named by ?endpoint=. Credentials come from the AWS SDK's chain:
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else
// AWS_PROFILE and the shared files, else an instance role.
func newS3(u *url.URL) (litestream.ReplicaClient, error) {
	const want = "write s3://BUCKET/PATH, e.g. s3://my-backups/inbox"
	red := Redact(u.String())
	if u.User != nil {
		return nil, fmt.Errorf("replica URL %s holds credentials: %s", red, s3CredentialsFromEnv)
	}
	query := u.Query()
	for key := range query {
		if slices.Contains(s3CredentialQuery, key) {
			return nil, fmt.Errorf("replica URL %s holds a secret in ?%s: %s", red, key, s3CredentialsFromEnv)
		}
	}
	if err := refuseQuery(u, s3Query...); err != nil {
		return nil, err
	}
	if endpoint := query.Get("endpoint"); endpoint != "" {
		e, err := url.Parse(endpoint)
		if err != nil || strings.Contains(endpoint, "@") || (e.Scheme != "" && e.Host == "") {
			return nil, fmt.Errorf("replica URL %s: endpoint must be the store's address alone, e.g. endpoint=https://s3.eu-central-003.backblazeb2.com; credentials go in the environment", red)
		}
	}
	if u.Host == "" {
		return nil, fmt.Errorf("replica URL %s names no bucket: %s", red, want)
	}
	if _, port, _ := strings.Cut(u.Host, ":"); port != "" {
		return nil, fmt.Errorf("replica URL %s: the host of an s3:// URL is the bucket, put the store's address in ?endpoint=http://HOST:PORT", red)
	}
	dir := litestream.CleanReplicaURLPath(u.Path)
	if dir == "" {
		// A path keeps the replica's files, which retention deletes, apart
		// from whatever else the bucket holds.
		return nil, fmt.Errorf("replica URL %s names no path inside the bucket: %s", red, want)
	}
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if (id == "") != (secret == "") {
		return nil, fmt.Errorf("replica URL %s: only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set, set both", red)
	}

	if os.Getenv("AWS_CA_BUNDLE") != "" {
		// Litestream gives the SDK its own HTTP client, to which the SDK
		// cannot add a CA bundle: every request would fail. Go's TLS
		// reads SSL_CERT_FILE for the machine's roots instead.
		return nil, fmt.Errorf("replica URL %s: AWS_CA_BUNDLE is set, which Litestream's S3 client cannot use; unset it and point SSL_CERT_FILE at the bundle instead", red)
	}

	rc, err := s3.NewReplicaClientFromURL("s3", u.Host, dir, query, nil)
	if err != nil {
		return nil, fmt.Errorf("replica URL %s: %w", red, err)
	}
	c := rc.(*s3.ReplicaClient)
	// Litestream hands a key pair it finds to the SDK as static
	// credentials without the session token; left empty, the SDK's own
	// chain reads all three from the environment.
	c.AccessKeyID, c.SecretAccessKey = "", ""
	return c, nil
}

package replicaclient

import (
	"net/url"
	"regexp"
	"slices"
)

// secretMark stands where Redact took a secret out.
const secretMark = "xxxxx"

// plainQuery are the query parameters whose values are no secret: every
// other value Redact replaces, so a parameter added later is hidden
// until someone decides it may be shown.
var plainQuery = []string{
	"endpoint", "region", "force-path-style", "sign-payload",
	"skip-verify", "storage-class", "sse-kms-key-id", "tls",
}

// leadingScheme is what Redact keeps of a URL that does not parse.
var leadingScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// Redact returns rawURL fit for a log line, a stats page or an error:
// the password and any user name but sftp's replaced by xxxxx, every
// query value but the plain settings (endpoint, region and the like)
// replaced too, the fragment dropped. A URL that does not parse keeps
// only its scheme.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return leadingScheme.FindString(rawURL) + "[unparseable URL]"
	}
	if u.User != nil {
		_, hasPassword := u.User.Password()
		switch {
		case u.Scheme == "sftp" && hasPassword:
			u.User = url.UserPassword(u.User.Username(), secretMark)
		case u.Scheme == "sftp":
		default:
			// An S3 URL's user is an access key, a NATS URL's a token.
			u.User = url.User(secretMark)
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for key, values := range q {
			for i, v := range values {
				switch {
				case key == "endpoint":
					values[i] = redactEndpoint(v)
				case !slices.Contains(plainQuery, key):
					values[i] = secretMark
				}
			}
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// redactEndpoint is an S3 endpoint without user or query.
func redactEndpoint(s string) string {
	e, err := url.Parse(s)
	if err != nil {
		return secretMark
	}
	if e.User != nil {
		e.User = url.User(secretMark)
	}
	if e.RawQuery != "" {
		e.RawQuery = secretMark
	}
	e.Fragment, e.RawFragment = "", ""
	return e.String()
}

package replicaclient_test

import (
	"strings"
	"testing"

	"inbox/replicaclient"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"file:///var/backups/inbox", "file:///var/backups/inbox"},
		{"s3://bucket/inbox?endpoint=https://s3.example.com&region=eu-1&force-path-style=true",
			"s3://bucket/inbox?endpoint=https%3A%2F%2Fs3.example.com&force-path-style=true&region=eu-1"},
		{"s3://AKIAKEY:s3cr3t@bucket/inbox", "s3://xxxxx@bucket/inbox"},
		{"s3://bucket/inbox?secret-access-key=s3cr3t&sse-customer-key=k3y", "s3://bucket/inbox?secret-access-key=xxxxx&sse-customer-key=xxxxx"},
		{"s3://bucket/inbox?endpoint=https://u:s3cr3t@h.example/?token=s3cr3t", "s3://bucket/inbox?endpoint=https%3A%2F%2Fxxxxx%40h.example%2F%3Fxxxxx"},
		{"sftp://backup@host:2222/srv/inbox", "sftp://backup@host:2222/srv/inbox"},
		{"sftp://backup:s3cr3t@host:2222/srv/inbox", "sftp://backup:xxxxx@host:2222/srv/inbox"},
		{"nats://s3cr3t@127.0.0.1:4222/bucket", "nats://xxxxx@127.0.0.1:4222/bucket"},
		{"nats://u:s3cr3t@127.0.0.1:4222/bucket#s3cr3t", "nats://xxxxx@127.0.0.1:4222/bucket"},
		{"nats://127.0.0.1:4222/bucket?tls=true", "nats://127.0.0.1:4222/bucket?tls=true"},
		{"sftp://u:s3cr3t@host:port/x", "sftp://[unparseable URL]"},
		{"::s3cr3t", "[unparseable URL]"},
	} {
		got := replicaclient.Redact(tc.in)
		if got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "s3cr3t") || strings.Contains(got, "k3y") {
			t.Errorf("Redact(%q) = %q holds a secret", tc.in, got)
		}
	}
}

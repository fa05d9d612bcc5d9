package replicaclient_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/benbjohnson/litestream"

	"inbox/replicaclient"
	"inbox/replicaclient/replicatest"
)

const (
	testBucket    = replicatest.S3Bucket
	testAccessKey = replicatest.S3AccessKey
	testSecret    = "s3cr3t-key-never-shown"
	testToken     = "s3ss10n-token-never-shown"
)

// s3Env sets the credentials the SDK finds and hides any other source
// the machine has (a profile, shared files, an instance role).
func s3Env(t *testing.T, id, secret, token string) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", id)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", token)
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CA_BUNDLE", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("LITESTREAM_ACCESS_KEY_ID", "")
	t.Setenv("LITESTREAM_SECRET_ACCESS_KEY", "")
	t.Setenv("LITESTREAM_S3_ENDPOINT", "")
	for _, k := range []string{"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CA_BUNDLE"} {
		if os.Getenv(k) == "" {
			os.Unsetenv(k)
		}
	}
}

func TestS3RoundTrip(t *testing.T) {
	f := replicatest.StartFakeS3(t)
	s3Env(t, testAccessKey, testSecret, "")
	client, err := replicaclient.New(context.Background(), "s3://"+testBucket+"/vm1/inbox?endpoint="+f.URL+"&region=eu-central-1")
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, client)

	got := f.Objects(t, "vm1/inbox/0000/")
	if len(got) < 2 {
		t.Errorf("bucket holds %q under vm1/inbox/0000/, want the two syncs' LTX files; all: %q", got, f.Objects(t, ""))
	}
	for _, k := range f.Objects(t, "") {
		if !strings.HasPrefix(k, "vm1/inbox/") {
			t.Errorf("object %q outside the URL's path vm1/inbox/", k)
		}
	}
	keys, unsigned := f.Signed()
	if unsigned != 0 || len(keys) != 1 || keys[testAccessKey] == 0 {
		t.Errorf("requests signed with %v, %d unsigned; want every one signed with %s from the environment", keys, unsigned, testAccessKey)
	}
}

func TestS3SessionToken(t *testing.T) {
	f := replicatest.StartFakeS3(t)
	s3Env(t, testAccessKey, testSecret, testToken)
	client, err := replicaclient.New(context.Background(), "s3://"+testBucket+"/inbox?endpoint="+f.URL+"&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, client)
	if tokens := f.Tokens(); tokens[testToken] == 0 || len(tokens) != 1 {
		t.Errorf("session tokens sent %v, want AWS_SESSION_TOKEN's on the requests", tokens)
	}
}

func TestS3RefusedCredentialsStaySecret(t *testing.T) {
	f := replicatest.StartFakeS3(t)
	const wrongSecret = "wr0ng-s3cr3t-never-shown"
	s3Env(t, "AKIAWRONGKEY", wrongSecret, "")
	client, err := replicaclient.New(context.Background(), "s3://"+testBucket+"/inbox?endpoint="+f.URL+"&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	err = listLTX(client)
	if err == nil {
		t.Fatal("listing with a refused key succeeded")
	}
	if !strings.Contains(err.Error(), "InvalidAccessKeyId") {
		t.Errorf("error %q does not say the key was refused", err)
	}
	if strings.Contains(err.Error(), wrongSecret) {
		t.Errorf("error %q holds the secret key", err)
	}
}

func listLTX(client litestream.ReplicaClient) error {
	it, err := client.LTXFiles(context.Background(), 0, 0, false)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Next() {
	}
	return it.Err()
}

func TestS3Refuses(t *testing.T) {
	s3Env(t, testAccessKey, testSecret, "")
	for _, tc := range []struct {
		name, url string
		says      []string
	}{
		{"credentials in userinfo", "s3://AKIAINBOXTEST:" + testSecret + "@bucket/inbox", []string{"AWS_ACCESS_KEY_ID", "environment"}},
		{"secret in query", "s3://bucket/inbox?secret-access-key=" + testSecret, []string{"AWS_SECRET_ACCESS_KEY", "environment"}},
		{"secret in endpoint", "s3://bucket/inbox?endpoint=https://k:" + testSecret + "@s3.example.com", []string{"endpoint", "environment"}},
		{"no bucket", "s3:///inbox", []string{"no bucket", "s3://BUCKET/PATH"}},
		{"no path", "s3://bucket", []string{"no path", "s3://BUCKET/PATH"}},
		{"root path", "s3://bucket/", []string{"no path"}},
		{"endpoint as host", "s3://127.0.0.1:9000/bucket/inbox", []string{"?endpoint="}},
		{"unknown parameter", "s3://bucket/inbox?regoin=eu", []string{`"regoin"`, "region"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := replicaclient.New(context.Background(), tc.url)
			if err == nil {
				t.Fatalf("New(%q) succeeded, want an error", replicaclient.Redact(tc.url))
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Errorf("error %q holds the secret", err)
			}
		})
	}

	t.Run("half a key pair", func(t *testing.T) {
		t.Setenv("AWS_SECRET_ACCESS_KEY", "")
		_, err := replicaclient.New(context.Background(), "s3://bucket/inbox")
		if err == nil || !strings.Contains(err.Error(), "set both") {
			t.Fatalf("New with AWS_ACCESS_KEY_ID alone: %v, want an error saying to set both", err)
		}
	})
	t.Run("AWS_CA_BUNDLE", func(t *testing.T) {
		t.Setenv("AWS_CA_BUNDLE", "/etc/ssl/private-ca.pem")
		_, err := replicaclient.New(context.Background(), "s3://bucket/inbox")
		if err == nil || !strings.Contains(err.Error(), "SSL_CERT_FILE") {
			t.Fatalf("New with AWS_CA_BUNDLE set: %v, want an error pointing to SSL_CERT_FILE", err)
		}
	})
}

package replicaclient_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"inbox/replicaclient"
	"inbox/replicaclient/replicatest"
)

func natsEnv(t *testing.T, creds, token, user, password string) {
	t.Helper()
	t.Setenv(replicaclient.EnvNATSCreds, creds)
	t.Setenv(replicaclient.EnvNATSToken, token)
	t.Setenv(replicaclient.EnvNATSUser, user)
	t.Setenv(replicaclient.EnvNATSPassword, password)
}

func TestNATSRoundTrip(t *testing.T) {
	addr := replicatest.NATSAddr(t)
	store, bucket := replicatest.ObjectStore(t, addr)
	natsEnv(t, "", "", "", "")
	client, err := replicaclient.New(context.Background(), "nats://"+addr+"/"+bucket+"/vm1")
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, client)

	infos, err := store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, info := range infos {
		names = append(names, info.Name)
		if !strings.HasPrefix(info.Name, "vm1/") {
			t.Errorf("object %q outside the URL's path vm1/", info.Name)
		}
	}
	if len(names) < 2 {
		t.Errorf("bucket holds %q, want the two syncs' LTX files", names)
	}
}

func TestNATSToken(t *testing.T) {
	const token = "t0ken-never-shown"
	addr := replicatest.StartNATS(t, &server.Options{Authorization: token})
	_, bucket := replicatest.ObjectStore(t, addr, natsgo.Token(token))

	natsEnv(t, "", token, "", "")
	client, err := replicaclient.New(context.Background(), "nats://"+addr+"/"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := listLTX(client); err != nil {
		t.Fatalf("listing with INBOX_REPLICA_NATS_TOKEN: %v", err)
	}
	closeClient(t, client)

	const wrong = "wr0ng-t0ken-never-shown"
	natsEnv(t, "", wrong, "", "")
	client, err = replicaclient.New(context.Background(), "nats://"+addr+"/"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	err = listLTX(client)
	if err == nil {
		t.Fatal("listing with a wrong token succeeded")
	}
	if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Errorf("error %q does not say the login was refused", err)
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), token) {
		t.Errorf("error %q holds the token", err)
	}
}

func TestNATSRefuses(t *testing.T) {
	const secret = "s3cr3t-p4ss"
	for _, tc := range []struct {
		name, url                    string
		creds, token, user, password string
		says                         []string
	}{
		{"credentials in URL", "nats://u:" + secret + "@127.0.0.1:4222/b", "", "", "", "", []string{replicaclient.EnvNATSCreds, replicaclient.EnvNATSToken}},
		{"token in URL", "nats://" + secret + "@127.0.0.1:4222/b", "", "", "", "", []string{"environment"}},
		{"no host", "nats:///b", "", "", "", "", []string{"no host", "nats://HOST"}},
		{"no bucket", "nats://127.0.0.1:4222", "", "", "", "", []string{"no object store bucket"}},
		{"bad bucket", "nats://127.0.0.1:4222/my.bucket", "", "", "", "", []string{`"my.bucket"`, "letters"}},
		{"unknown parameter", "nats://127.0.0.1:4222/b?token=" + secret, "", "", "", "", []string{`"token"`, "tls"}},
		{"tls word", "nats://127.0.0.1:4222/b?tls=yes", "", "", "", "", []string{"tls=true"}},
		{"half a login", "nats://127.0.0.1:4222/b", "", "", "inbox", "", []string{"set both"}},
		{"missing creds file", "nats://127.0.0.1:4222/b", "/nonexistent/inbox.creds", "", "", "", []string{replicaclient.EnvNATSCreds, "inbox.creds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			natsEnv(t, tc.creds, tc.token, tc.user, tc.password)
			_, err := replicaclient.New(context.Background(), tc.url)
			if err == nil {
				t.Fatalf("New(%q) succeeded, want an error", replicaclient.Redact(tc.url))
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q holds the secret", err)
			}
		})
	}
}

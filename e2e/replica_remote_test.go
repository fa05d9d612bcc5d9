package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"inbox/replicaclient"
	"inbox/replicaclient/replicatest"
)

// remoteSenders is the load on the remote replicas' round trips: each
// commit waits on a network store, so fewer senders than the file one's.
const remoteSenders = 8

// TestReplicaSyncKillSFTP: the --replica-sync kill-and-restore round trip
// of TestReplicaSyncKill on Debian's sshd, started on loopback with host
// keys and a client key of its own, the key and known_hosts given to the
// binary as the docs say.
func TestReplicaSyncKillSFTP(t *testing.T) {
	t.Parallel()
	s := replicatest.StartSSHD(t)
	env := []string{
		replicaclient.EnvSFTPKeyFile + "=" + s.KeyFile,
		replicaclient.EnvSFTPPassword + "=",
		replicaclient.EnvSFTPKnownHosts + "=" + replicatest.KnownHosts(t, s.Addr, true, s.HostKeys...),
	}
	// The server is this machine: the path is absolute on the server.
	dir := filepath.Join(t.TempDir(), "replica")
	syncKillRestore(t, env, "sftp://"+s.User+"@"+s.Addr+dir, remoteSenders)
	if ltx, _ := filepath.Glob(filepath.Join(dir, "ltx", "*", "*.ltx")); len(ltx) == 0 {
		entries, _ := os.ReadDir(dir)
		t.Errorf("no LTX files under %s on the server; folder holds %v", dir, entries)
	}
}

// TestReplicaSyncKillS3: the same round trip on gofakes3 behind a
// recording handler: every object lands under the URL's path, and every
// request is signed with the access key from the environment, whose
// secret serve never logs.
func TestReplicaSyncKillS3(t *testing.T) {
	t.Parallel()
	f := replicatest.StartFakeS3(t)
	const secret = "s3cr3t-key-never-logged"
	env := []string{
		"AWS_ACCESS_KEY_ID=" + replicatest.S3AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + secret,
		"AWS_SESSION_TOKEN=",
		// Nothing else of this machine's: no profile, shared files or
		// instance role, and no AWS_CA_BUNDLE, which replicaclient refuses.
		"AWS_PROFILE=",
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CA_BUNDLE=",
		"LITESTREAM_ACCESS_KEY_ID=",
		"LITESTREAM_SECRET_ACCESS_KEY=",
		"LITESTREAM_S3_ENDPOINT=",
	}
	url := "s3://" + replicatest.S3Bucket + "/vm1/inbox?endpoint=" + f.URL + "&region=eu-central-1"
	logs := syncKillRestore(t, env, url, remoteSenders)

	all := f.Objects(t, "")
	var ltx int
	for _, k := range all {
		if !strings.HasPrefix(k, "vm1/inbox/") {
			t.Errorf("object %q outside the URL's path vm1/inbox/", k)
		}
		if strings.HasSuffix(k, ".ltx") {
			ltx++
		}
	}
	if ltx == 0 {
		t.Errorf("no LTX files in the bucket; it holds %q", all)
	}
	keys, unsigned := f.Signed()
	if unsigned != 0 || len(keys) != 1 || keys[replicatest.S3AccessKey] == 0 {
		t.Errorf("requests signed with %v, %d unsigned; want every one signed with %s from the environment", keys, unsigned, replicatest.S3AccessKey)
	}
	if strings.Contains(logs, secret) {
		t.Errorf("serve logged the secret access key:\n%s", logs)
	}
}

// TestReplicaSyncKillNATS: the same round trip on a JetStream object
// store (the machine's server on 127.0.0.1:4222, else one started
// in-process), in a bucket of the test's own; the replica's objects are
// under the URL's path.
func TestReplicaSyncKillNATS(t *testing.T) {
	t.Parallel()
	addr := replicatest.NATSAddr(t)
	store, bucket := replicatest.ObjectStore(t, addr)
	env := []string{
		replicaclient.EnvNATSCreds + "=",
		replicaclient.EnvNATSToken + "=",
		replicaclient.EnvNATSUser + "=",
		replicaclient.EnvNATSPassword + "=",
	}
	syncKillRestore(t, env, "nats://"+addr+"/"+bucket+"/vm1", remoteSenders)

	infos, err := store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if !strings.HasPrefix(info.Name, "vm1/") {
			t.Errorf("object %q outside the URL's path vm1/", info.Name)
		}
	}
	if len(infos) == 0 {
		t.Error("the bucket holds no objects")
	}
}

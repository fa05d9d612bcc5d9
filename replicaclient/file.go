package replicaclient

import (
	"fmt"
	"net/url"
	"path"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
)

// newFile is the client for file:///absolute/dir: a directory on this
// machine, best on another disk or a mounted share.
func newFile(u *url.URL) (litestream.ReplicaClient, error) {
	const want = "write file:///absolute/dir, e.g. file:///mnt/backup/inbox"
	if u.Opaque != "" {
		return nil, fmt.Errorf("replica URL %s names a relative path: %s", Redact(u.String()), want)
	}
	if u.User != nil {
		return nil, fmt.Errorf("replica URL %s: a file:// URL takes no user or password, %s", Redact(u.String()), want)
	}
	if u.Host != "" && u.Host != "localhost" {
		// file://backups/inbox reads as host "backups": a relative path.
		return nil, fmt.Errorf("replica URL %s names host %q: a file:// URL takes an absolute path after three slashes, %s", Redact(u.String()), u.Host, want)
	}
	if err := refuseQuery(u); err != nil {
		return nil, err
	}
	dir := path.Clean(u.Path)
	if !path.IsAbs(dir) || dir == "/" {
		return nil, fmt.Errorf("replica URL %s names no directory: %s", Redact(u.String()), want)
	}
	return file.NewReplicaClient(dir), nil
}

package replicaclient

import (
	"fmt"
	"net/url"

	"github.com/benbjohnson/litestream"
)

func newNATS(u *url.URL) (litestream.ReplicaClient, error) {
	return nil, fmt.Errorf("replica URL %s: nats:// is not built yet", Redact(u.String()))
}

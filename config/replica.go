package config

import (
	"fmt"
	"strings"
	"time"
)

// FileReplica is the [replica] table of the configuration file: where
// serve replicates its SQLite file (see the --replica flags, which take
// precedence). Durations are written as Go durations ("72h", "30m").
type FileReplica struct {
	URL              string `toml:"url"`
	Sync             bool   `toml:"sync"`
	Retention        string `toml:"retention"`
	SnapshotInterval string `toml:"snapshot_interval"`
	RestoreIfMissing bool   `toml:"restore_if_missing"`
}

// ReadReplica reads the [replica] table of the configuration file at
// path; nil when it has none. It fails as reading the sources does (an
// unreadable file, an unknown key), and on a duration that does not parse.
func ReadReplica(path string) (*FileReplica, error) {
	fc, err := decodeFile(path)
	if err != nil {
		return nil, err
	}
	r := fc.Replica
	if r == nil {
		return nil, nil
	}
	for key, text := range map[string]string{"retention": r.Retention, "snapshot_interval": r.SnapshotInterval} {
		if text == "" {
			continue
		}
		if d, err := time.ParseDuration(strings.TrimSpace(text)); err != nil || d <= 0 {
			return nil, fmt.Errorf("config %s: [replica] %s = %q: want a positive duration such as 24h or 30m", path, key, text)
		}
	}
	return r, nil
}

// Package config is how an operator configures inbox, read in one place:
// the command-line flags more than one command takes (each with its
// INBOX_* variable), a duration flag that keeps what was typed, and the
// --config file of [[source]] tables with the registry that turns a
// scheme's name into the scheme. It imports no command: main and admin
// import it.
package config

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"inbox/deploy"
	"inbox/inbox"
	"inbox/scheme"
)

// Source is one configured source: where it is served, how it verifies,
// how its deliveries are classified and what an accepted one is answered.
type Source struct {
	Name     string
	Path     string
	Scheme   scheme.Scheme // under the source's tolerance
	Keys     []scheme.Secret
	Rules    inbox.Rules
	HardCap  int64 // requests above it get 413 and are not read
	Accepted int   // the status of a delivery stored or counted
	// Secrets are the file's [[source.secret]] tables in order, read or
	// not; Keys holds those that were read.
	Secrets []SecretEntry
}

// SecretEntry is one [[source.secret]] of a source.
type SecretEntry struct {
	Env     string // the variable it is read from; "" for value = ...
	Expires time.Time
	Key     []byte // nil when it was not read
	Invalid bool   // it was read but is not in its scheme's form
}

// The configuration file's form: [[source]] and [[destination]] tables.
type fileConfig struct {
	Source      []fileSource      `toml:"source"`
	Destination []fileDestination `toml:"destination"`
	Replica     *FileReplica      `toml:"replica"`
}

type fileSource struct {
	Name       string   `toml:"name"`
	Scheme     string   `toml:"scheme"`
	Path       string   `toml:"path"`
	Tolerance  string   `toml:"tolerance"`
	Events     []string `toml:"events"`
	MaxBody    string   `toml:"max_body"`
	MaxRequest string   `toml:"max_request"`
	Status     int      `toml:"status"`
	JobIDs     []string `toml:"job_ids"`
	// ExpectedOnly stores only the jobs inbox expect recorded; any other
	// is parked unknown_job.
	ExpectedOnly bool         `toml:"expected_only"`
	Secrets      []fileSecret `toml:"secret"`
	HMAC         fileHMAC     `toml:"hmac"`
}

type fileSecret struct {
	// Env names the environment variable holding the secret (preferred:
	// the file then holds none); Value holds it in the file itself.
	Env     string    `toml:"env"`
	Value   string    `toml:"value"`
	Expires time.Time `toml:"expires"`
}

type fileHMAC struct {
	Header          string `toml:"header"`
	Prefix          string `toml:"prefix"`
	Encoding        string `toml:"encoding"`
	TimestampHeader string `toml:"timestamp_header"`
	KeyField        string `toml:"key_field"`
	KeyHeader       string `toml:"key_header"`
	KeyFrom         string `toml:"key_from"`
	EventField      string `toml:"event_field"`
	EventHeader     string `toml:"event_header"`
}

// LoadSources reads the sources of a configuration file, taking secrets
// named by env from getenv. With getenv nil no secret is read (Keys stay
// empty): for the commands that only classify, such as reprocess, which an
// operator runs without the secrets. It fails on an unreadable file, an unknown key
// (a misspelt option must not be silently ignored), a missing or repeated
// name or path, an unknown scheme, a source without a secret, and a
// secret that is set twice, not in its scheme's form, or empty while not
// expired (an expired one may be unset: it could verify nothing); its errors
// never hold a secret. A source whose secrets have all expired loads (inbox
// sources still lists it); serve refuses to start with it.
func LoadSources(path string, getenv func(string) string) ([]Source, error) {
	return loadSources(path, getenv, false)
}

// DescribeSources reads the sources of a configuration file as
// LoadSources does, but a secret that is unset or not in its scheme's form
// is left unread (its SecretEntry has no Key) rather than an error: for
// inbox sources, which shows what it can without every secret.
func DescribeSources(path string, getenv func(string) string) ([]Source, error) {
	return loadSources(path, getenv, true)
}

func loadSources(path string, getenv func(string) string, lenient bool) ([]Source, error) {
	fc, err := decodeFile(path)
	if err != nil {
		return nil, err
	}
	if len(fc.Source) == 0 {
		return nil, fmt.Errorf("config %s: no [[source]]", path)
	}
	var out []Source
	names, paths := map[string]bool{}, map[string]bool{}
	for i, fs := range fc.Source {
		src, err := fs.source(getenv, lenient)
		if err != nil {
			return nil, fmt.Errorf("config %s: source %d (%s): %w", path, i+1, fs.Name, err)
		}
		if names[src.Name] || paths[src.Path] {
			return nil, fmt.Errorf("config %s: source %s: name or path %s used twice", path, src.Name, src.Path)
		}
		names[src.Name], paths[src.Path] = true, true
		out = append(out, src)
	}
	return out, nil
}

func (fs fileSource) source(getenv func(string) string, lenient bool) (Source, error) {
	if !ValidName(fs.Name) {
		return Source{}, errors.New("name must be 1 to 32 of a-z, 0-9, - and _")
	}
	src := Source{Name: fs.Name, Path: fs.Path, Accepted: fs.Status}
	if src.Path == "" {
		src.Path = "/webhooks/" + fs.Name
	}
	var err error
	src.Rules.Events = fs.Events
	if src.Rules.MaxBody, err = parseSizeOr(fs.MaxBody, "1MiB"); err != nil {
		return Source{}, fmt.Errorf("max_body: %w", err)
	}
	if src.HardCap, err = parseSizeOr(fs.MaxRequest, "4MiB"); err != nil {
		return Source{}, fmt.Errorf("max_request: %w", err)
	}
	key, err := newScheme(fs, &src)
	if err != nil {
		return Source{}, err
	}
	// Reprocess keys the rows as the receiver does.
	src.Rules = scheme.Rules(src.Scheme, src.Rules)
	if fs.Scheme != "hmac" && fs.HMAC != (fileHMAC{}) {
		return Source{}, errors.New("[source.hmac] belongs to scheme hmac only")
	}
	if fs.Scheme != "vibe" && fs.JobIDs != nil {
		return Source{}, errors.New("job_ids belongs to scheme vibe only")
	}
	if fs.ExpectedOnly && (fs.Scheme != "sume" || fs.Name != inbox.DefaultSource) {
		return Source{}, errors.New("expected_only belongs to the source named sume (scheme sume) only: inbox expect records its jobs")
	}
	src.Rules.ExpectedOnly = fs.ExpectedOnly
	if src.Accepted == 0 {
		src.Accepted = http.StatusOK
		if fs.Scheme == "sume" {
			src.Accepted = http.StatusNoContent
		}
	}
	if src.Accepted < 200 || src.Accepted > 299 {
		return Source{}, fmt.Errorf("status %d: want 2xx", src.Accepted)
	}
	if src.HardCap < src.Rules.MaxBody {
		return Source{}, errors.New("max_request must be at least max_body")
	}
	if len(fs.Secrets) == 0 {
		return Source{}, errors.New("no [[source.secret]]")
	}
	now := time.Now()
	for j, fsec := range fs.Secrets {
		if fsec.Env != "" && fsec.Value != "" {
			return Source{}, fmt.Errorf("secret %d: set env or value, not both", j+1)
		}
		entry := SecretEntry{Env: fsec.Env, Expires: fsec.Expires}
		src.Secrets = append(src.Secrets, entry)
		if getenv == nil {
			continue
		}
		raw := fsec.Value
		if fsec.Env != "" {
			raw = getenv(fsec.Env)
		}
		expired := !fsec.Expires.IsZero() && !now.Before(fsec.Expires)
		if raw == "" {
			if lenient || expired {
				continue // it could verify nothing anyway
			}
			return Source{}, fmt.Errorf("secret %d: empty (env %s unset?)", j+1, fsec.Env)
		}
		if deploy.Placeholder(raw) {
			if lenient {
				src.Secrets[j].Invalid = true
				continue
			}
			return Source{}, fmt.Errorf("secret %d: %s holds the placeholder of the shipped files: set it to the provider's secret", j+1, secretName(fsec))
		}
		k, err := key(raw)
		if err != nil {
			if lenient {
				src.Secrets[j].Invalid = true
				continue
			}
			if fsec.Env != "" {
				return Source{}, fmt.Errorf("secret %d: %s: %w", j+1, fsec.Env, err)
			}
			return Source{}, fmt.Errorf("secret %d (value in the file): %w", j+1, err)
		}
		src.Secrets[j].Key = k
		src.Keys = append(src.Keys, scheme.Secret{Key: k, Expires: fsec.Expires})
	}
	return src, nil
}

// secretName names where a [[source.secret]] is read from, for an error.
func secretName(s fileSecret) string {
	if s.Env != "" {
		return s.Env
	}
	return "its value"
}

func parseSizeOr(s, def string) (int64, error) {
	if s == "" {
		s = def
	}
	return ParseSize(s)
}

// ValidName accepts source names that are safe in a path and a row id.
func ValidName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// exactKeys refuses a key of the file that names a field of t only in
// another case: the TOML decoder takes NAME for name, and a table holding
// both would keep whichever came last.
func exactKeys(md toml.MetaData, t reflect.Type) error {
	for _, key := range md.Keys() {
		ft := t
		for _, part := range key {
			for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() != reflect.Struct {
				break
			}
			f, ok := fieldByTag(ft, part)
			if !ok {
				return fmt.Errorf("unknown key %s (keys are case-sensitive)", key)
			}
			ft = f.Type
		}
	}
	return nil
}

// fieldByTag returns the field of the struct t whose toml tag is name.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); strings.Split(f.Tag.Get("toml"), ",")[0] == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

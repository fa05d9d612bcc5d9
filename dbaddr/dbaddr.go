// Package dbaddr takes the database's address out of a text: what the
// admin commands print, alert notifies and serve and dispatch log never
// names the store's host, port, user, database name or password.
package dbaddr

import (
	"cmp"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Where a store's error named the database, addressFree puts these.
const (
	dbPathMark = "[--db]"
	dbDirMark  = "[the --db directory]"
	userMark   = "[user]"
	hostMark   = "[host]"
	portMark   = "[port]"
	dbNameMark = "[dbname]"
	secretMark = "[redacted]"
)

var (
	// pgxConnect is the start of pgx's connection error, which names the
	// user and the database: "failed to connect to `user=u database=d`:".
	pgxConnect = regexp.MustCompile("failed to connect to `[^`]*`")
	// hostPortIP is pgx's "host:port (address): " before each address
	// tried.
	hostPortIP = regexp.MustCompile(`\S+:\d+ \([^)]*\): `)
	// ipv4 and ipv6 are addresses a dial or read error names: the
	// database's, which its host name resolved to.
	ipv4 = regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b`)
	ipv6 = regexp.MustCompile(`\[[0-9A-Fa-f:.%\w]*:[0-9A-Fa-f:.%\w]*\](?::\d+)?`)
)

// Free is err's text without the address of the store db names:
// the text the admin commands print and alert notifies when the inbox
// cannot be read, which operating.md promises never carries it. A
// SQLite path becomes [--db]; a PostgreSQL URL's user, hosts, ports,
// database name and password their marks, and any IP address too.
func Free(err error, db string) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if !IsPostgres(db) {
		return replaceAll(s, pathForms(db))
	}
	s = pgxConnect.ReplaceAllString(s, "failed to connect to the database")
	s = hostPortIP.ReplaceAllString(s, "")
	// The addresses first: a port of one digit is a whole word inside one.
	s = ipv4.ReplaceAllString(s, hostMark)
	s = ipv6.ReplaceAllString(s, hostMark)
	return replaceAll(s, pgForms(db))
}

// IsPostgres reports whether db names a PostgreSQL database by URL.
func IsPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// NamesAddress reports whether msg holds the driver's connection error
// or its host:port (address) form: a text Free must clean.
func NamesAddress(msg string) bool {
	return pgxConnect.MatchString(msg) || hostPortIP.MatchString(msg)
}

// form is a text that names the database, and what replaces it.
type form struct{ text, mark string }

// pathForms are the ways a SQLite error may name the file at db: as
// given, cleaned, absolute and with its links resolved, and its
// directory.
func pathForms(db string) []form {
	if db == "" {
		return nil
	}
	var out []form
	add := func(p string) {
		if p == "" {
			return
		}
		out = append(out, form{p, dbPathMark})
		if dir := filepath.Dir(p); dir != "." && dir != "/" && dir != p {
			out = append(out, form{dir, dbDirMark})
		}
	}
	add(db)
	add(filepath.Clean(db))
	if abs, err := filepath.Abs(db); err == nil {
		add(abs)
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			add(real)
		} else if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
			add(filepath.Join(dir, filepath.Base(abs)))
		}
	}
	return out
}

// pgForms are the parts of a PostgreSQL URL an error may name: the URL
// itself, its password, user, hosts, ports and database name, as written
// and as the driver resolves them (PGUSER, PGHOST, the defaults).
func pgForms(db string) []form {
	out := []form{{db, dbPathMark}}
	if u, err := url.Parse(db); err == nil {
		out = append(out, form{u.Redacted(), dbPathMark})
		if u.User != nil {
			if pw, ok := u.User.Password(); ok {
				out = append(out, form{pw, secretMark}, form{url.QueryEscape(pw), secretMark})
			}
			out = append(out, form{u.User.Username(), userMark})
		}
		for _, hp := range strings.Split(u.Host, ",") {
			h, p, err := netSplit(hp)
			if err == nil {
				out = append(out, form{h, hostMark}, form{p, portMark})
			}
		}
		if name := strings.TrimPrefix(u.Path, "/"); name != "" {
			out = append(out, form{name, dbNameMark})
		}
		if pw := u.Query().Get("password"); pw != "" {
			out = append(out, form{pw, secretMark})
		}
	}
	if cfg, err := pgconn.ParseConfig(db); err == nil {
		out = append(out, form{cfg.Password, secretMark}, form{cfg.User, userMark},
			form{cfg.Database, dbNameMark}, form{cfg.Host, hostMark}, form{strconv.Itoa(int(cfg.Port)), portMark})
		for _, fb := range cfg.Fallbacks {
			out = append(out, form{fb.Host, hostMark}, form{strconv.Itoa(int(fb.Port)), portMark})
		}
	}
	return out
}

// netSplit splits host:port, the port empty when there is none.
func netSplit(hp string) (host, port string, err error) {
	if i := strings.LastIndex(hp, ":"); i >= 0 && !strings.HasSuffix(hp, "]") {
		return strings.Trim(hp[:i], "[]"), hp[i+1:], nil
	}
	return strings.Trim(hp, "[]"), "", nil
}

// replaceAll replaces each form's text in s with its mark, the longest
// first, so a host inside the URL is not replaced before the URL. A text
// that begins or ends with a letter or digit is replaced only as a whole
// word, so the user "in" leaves "inbox" whole.
func replaceAll(s string, forms []form) string {
	forms = slices.DeleteFunc(forms, func(f form) bool { return f.text == "" })
	slices.SortStableFunc(forms, func(a, b form) int { return cmp.Compare(len(b.text), len(a.text)) })
	for _, f := range forms {
		re := regexp.QuoteMeta(f.text)
		if word(f.text[0]) {
			re = `(?:^|\b)` + re
		}
		if word(f.text[len(f.text)-1]) {
			re += `(?:\b|$)`
		}
		s = regexp.MustCompile(re).ReplaceAllLiteralString(s, f.mark)
	}
	return s
}

func word(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// ForLogs returns what serve and dispatch log of an error while their
// store is db. An error of the store (the driver's connection error, or
// one naming one of the database's ports) reads as Free gives it; any
// other only loses the URL and the password, so a destination's address
// in its own error stays for the operator.
func ForLogs(db string) func(error) string {
	if !IsPostgres(db) {
		return func(err error) string { return err.Error() }
	}
	all := pgForms(db)
	var secret []form
	var ports []string
	for _, f := range all {
		switch {
		case f.mark == portMark && f.text != "":
			ports = append(ports, regexp.QuoteMeta(f.text))
		case f.mark == dbPathMark || f.mark == secretMark:
			secret = append(secret, f)
		}
	}
	onPort := regexp.MustCompile(`:(?:` + strings.Join(append(ports, "5432"), "|") + `)\b`)
	return func(err error) string {
		msg := err.Error()
		if NamesAddress(msg) || onPort.MatchString(msg) {
			return Free(err, db)
		}
		return replaceAll(msg, secret)
	}
}

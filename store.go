package main

import (
	"context"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"

	"inbox/admin"
	"inbox/inbox"
	"inbox/postgres"
	"inbox/sqlite"
)

// storeOptions are what a command asks of the store --db names.
type storeOptions struct {
	// readOnly opens it for reading only; mustExist refuses to create one.
	readOnly, mustExist bool
	// schema is applied at open (SQLite): serve's and dispatch's.
	schema string
	// busyTimeout bounds a write's wait for another's lock.
	busyTimeout time.Duration
	// onCommit and onFileLost are the store's observers (see sqlite.Options).
	onCommit   func(n int, took time.Duration, err error)
	onFileLost func(error)
}

// isPostgres reports whether db is a PostgreSQL URL rather than a path.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// openStore opens the store db names: a postgres:// or postgresql:// URL
// is PostgreSQL, anything else the path of a SQLite file. It is the one
// place that knows every store. It fails as the store's Open does, and at
// once for PostgreSQL while postgres.Store lacks a method of inbox.Store.
func openStore(ctx context.Context, db string, o storeOptions) (inbox.Store, error) {
	if !isPostgres(db) {
		s, err := sqlite.Open(ctx, db, sqlite.Options{
			Schema:      o.schema,
			ReadOnly:    o.readOnly,
			MustExist:   o.mustExist,
			BusyTimeout: o.busyTimeout,
			OnCommit:    o.onCommit,
			OnFileLost:  o.onFileLost,
		})
		if err != nil {
			return nil, err // not a nil *sqlite.Store in a non-nil interface
		}
		return s, nil
	}
	if missing := postgresMissing(); len(missing) > 0 {
		return nil, fmt.Errorf("open store: --db names a PostgreSQL database, which this build cannot use yet: its store lacks %s", strings.Join(missing, ", "))
	}
	s, err := postgres.Open(ctx, db, postgres.Options{
		ReadOnly:    o.readOnly,
		BusyTimeout: o.busyTimeout,
		OnCommit:    o.onCommit,
	})
	if err != nil {
		return nil, err
	}
	// Checked above: the conversion holds.
	return any(s).(inbox.Store), nil
}

// postgresMissing names the methods of inbox.Store that *postgres.Store
// lacks or has with another signature; none once it is at parity.
func postgresMissing() []string {
	want := reflect.TypeFor[inbox.Store]()
	have := reflect.TypeFor[*postgres.Store]()
	var missing []string
	for i := range want.NumMethod() {
		m := want.Method(i)
		if hm, ok := have.MethodByName(m.Name); !ok || !sameSignature(hm.Type, m.Type) {
			missing = append(missing, m.Name)
		}
	}
	return missing
}

// sameSignature compares a method value's type (receiver first) with an
// interface method's.
func sameSignature(method, want reflect.Type) bool {
	if method.NumIn()-1 != want.NumIn() || method.NumOut() != want.NumOut() {
		return false
	}
	for i := range want.NumIn() {
		if method.In(i+1) != want.In(i) {
			return false
		}
	}
	for i := range want.NumOut() {
		if method.Out(i) != want.Out(i) {
			return false
		}
	}
	return true
}

// describeDB is db as logs show it: a SQLite path as given, a PostgreSQL
// URL without its password and query (which may hold one).
func describeDB(db string) string {
	if !isPostgres(db) {
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		return "postgres://"
	}
	u.RawQuery, u.Fragment = "", ""
	return u.Redacted()
}

// adminOpener is how the operator's commands open the store --db names:
// never creating one, read-only unless they write.
func adminOpener(ctx context.Context, db string, a admin.Access) (inbox.Store, error) {
	return openStore(ctx, db, storeOptions{readOnly: !a.Write, mustExist: true, busyTimeout: a.BusyTimeout})
}

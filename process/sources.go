package process

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"inbox/admin"
	"inbox/config"
	"inbox/inbox"
	"inbox/receiver"
	"inbox/scheme"
)

// sourceSet is the handlers of one config's sources, at their paths.
type sourceSet struct {
	sources  []config.Source
	handlers []*receiver.Handler
	mux      *http.ServeMux
}

// liveSources answers the webhooks with the sources of the config last
// loaded. A reload swaps the whole set at once: a request already handed
// to a handler finishes with the config it started with, the next one is
// answered by the new set, and a path the new set lacks answers 404.
type liveSources struct {
	cur atomic.Pointer[sourceSet]
	// build makes the handlers of sources (the store, the shared bounds
	// and the metrics are serve's); it fails as NewHandler does.
	build func(sources []config.Source) (*sourceSet, error)
	// check runs serve's start-up checks of sources read from a file.
	check func(sources []config.Source) error
	// read reads the sources of a file, as at start (ReadSources).
	read func(file string) ([]config.Source, error)
	// grace is how long a retired handler may still verify a delivery it
	// took before the swap: its uses are saved until then.
	grace   time.Duration
	log     zerolog.Logger
	mu      sync.Mutex
	retired []retiredSet
	// onSwap, when set, is told of each set put into effect by a reload
	// (the console's list of sources).
	onSwap func(sources []config.Source)
}

// retiredSet is a set a reload replaced, and when.
type retiredSet struct {
	set *sourceSet
	at  time.Time
}

// ServeHTTP hands r to the live set's mux.
func (l *liveSources) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.cur.Load().mux.ServeHTTP(w, r)
}

// sources returns the sources being served.
func (l *liveSources) sources() []config.Source { return l.cur.Load().sources }

// reload is the sources' reloadStep: it reads file as serve does at start
// (every secret read and in its scheme's form, none a placeholder, not
// every one of a source expired, names and paths unique, each path one
// serve can take, each request cap within --max-body-memory) and builds
// its handlers; applying swaps them in.
func (l *liveSources) reload(file string) (func(), error) {
	sources, err := l.read(file)
	if err != nil {
		return nil, err
	}
	if err := l.check(sources); err != nil {
		return nil, fmt.Errorf("config %s: %w", file, err)
	}
	set, err := l.build(sources)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", file, err)
	}
	// Looked at now, not in apply: a stat that hangs must not hold up the
	// apply, which shutdown waits for.
	var who string
	if valueSecrets(sources) {
		who = readableByOthers(file)
	}
	return func() {
		l.mu.Lock()
		old := l.cur.Swap(set)
		l.retired = append(l.retired, retiredSet{set: old, at: time.Now()})
		l.mu.Unlock()
		if l.onSwap != nil {
			l.onSwap(sources)
		}
		names := make([]string, len(sources))
		for i, src := range sources {
			names[i] = src.Name
		}
		l.log.Info().Str("config", file).Strs("sources", names).Msg("reloaded: new requests get the new config")
		if who != "" {
			l.log.Warn().Str("config", file).Msg("the config holds secrets (value = ...) and is readable by " + who + ": chmod 0600 it, or use env = ...")
		}
	}, nil
}

// secretUses returns when each secret of the live set, and of the sets
// reloads retired, last verified a delivery; saved, called once those
// uses are in the store, forgets the retired sets that could not have
// verified anything since.
func (l *liveSources) secretUses() (uses []inbox.SecretUse, saved func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	taken := time.Now()
	for _, s := range l.sets() {
		for _, h := range s.handlers {
			uses = append(uses, h.SecretUses()...)
		}
	}
	return uses, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.retired = slices.DeleteFunc(l.retired, func(r retiredSet) bool { return taken.Sub(r.at) > l.grace })
	}
}

// uses returns when each secret of the live set, and of the sets reloads
// retired, last verified a delivery, as secretUses does, for a reader: the
// console, GET /sources.
func (l *liveSources) uses() []inbox.SecretUse {
	uses, _ := l.secretUses()
	return uses
}

// sets returns the live set and those reloads retired; l.mu is held.
func (l *liveSources) sets() []*sourceSet {
	sets := []*sourceSet{l.cur.Load()}
	for _, r := range l.retired {
		sets = append(sets, r.set)
	}
	return sets
}

// unverified takes from each handler of the live set, and of the sets
// reloads retired, the requests that failed verification since the last
// call.
func (l *liveSources) unverified() []inbox.Unverified {
	l.mu.Lock()
	defer l.mu.Unlock()
	var runs []inbox.Unverified
	for _, s := range l.sets() {
		for _, h := range s.handlers {
			if run := h.Unverified(); run.Count > 0 {
				runs = append(runs, run)
			}
		}
	}
	return runs
}

// ReadSources reads the sources of --config with the process's
// environment and refuses a source whose every secret has expired.
func ReadSources(file string) ([]config.Source, error) {
	sources, err := config.LoadSources(file, os.Getenv)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, src := range sources {
		if !slices.ContainsFunc(src.Keys, func(k scheme.Secret) bool { return k.Live(now) }) {
			return nil, fmt.Errorf("config %s: source %s: every secret has expired: it could verify nothing", file, src.Name)
		}
	}
	return sources, nil
}

// handleSources serves GET /sources on the admin address: the live
// sources, a line per secret as inbox sources --json prints it (the
// fingerprint, never the secret), each with the later of its last use
// saved in the store and the one this process holds unsaved.
func handleSources(mux *http.ServeMux, live *liveSources, store admin.SecretUseReader, log zerolog.Logger) {
	mux.HandleFunc("GET /sources", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
		defer cancel()
		uses := live.uses()
		saved, err := store.SecretUses(ctx)
		if err != nil {
			// The config is still worth showing while the store is down.
			log.Warn().Err(err).Msg("GET /sources: read the saved secret uses")
		}
		rows := admin.SourceSecrets(live.sources(), append(saved, uses...), time.Now())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		for _, row := range rows {
			if err := enc.Encode(row); err != nil {
				return
			}
		}
	})
}

// valueSecrets reports whether any source has a secret written in the file
// itself (value = ...) rather than named by env.
func valueSecrets(sources []config.Source) bool {
	for _, src := range sources {
		for _, e := range src.Secrets {
			if e.Env == "" {
				return true
			}
		}
	}
	return false
}

// readableByOthers says who besides this process's user and group can read
// file ("others", "its group"), or "" when nobody else (or it cannot tell).
func readableByOthers(file string) string {
	fi, err := os.Stat(file)
	if err != nil {
		return ""
	}
	perm := fi.Mode().Perm()
	if perm&0o004 != 0 {
		return "others"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && perm&0o040 != 0 && int(st.Gid) != os.Getgid() {
		return "its group"
	}
	return ""
}

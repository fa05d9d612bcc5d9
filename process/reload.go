package process

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/rs/zerolog"
)

// reloadStep is one part of serve or dispatch that SIGHUP re-reads
// --config for. It
// reads and checks file and returns how to put what it read into effect,
// or an error naming the problem; it changes nothing itself. A reload
// applies its steps only once every one of them has accepted the file, so
// a file one part refuses changes no part.
type reloadStep func(file string) (apply func(), err error)

// hangups returns the SIGHUPs from now on, which then no longer end the
// process; stop ends that.
func hangups() (hup <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	return c, func() { signal.Stop(c) }
}

// reloadOnHangup re-reads file through steps on each hup until ctx is
// done: what every step accepts takes effect, in the order of steps; a
// file any step refuses is logged, once, and the running config stays.
// Without --config (file "") a SIGHUP logs that there is nothing to
// reload. SIGHUP never ends serve or dispatch.
//
// A reload runs beside the signals, so a slow one (the file is read within
// config.ReadTimeout) never holds up shutdown: once ctx is done this
// returns at once, and a reload still reading then changes nothing. The
// SIGHUPs that arrive while a reload runs are logged and coalesced into
// one more reload once it ends: the file is read again after the last
// change, and no SIGHUP goes unsaid.
func reloadOnHangup(ctx context.Context, hup <-chan os.Signal, file string, log zerolog.Logger, steps ...reloadStep) {
	var applying sync.Mutex
	var running chan struct{} // closed when the reload under way ends; nil when none
	again := false
	start := func() {
		done := make(chan struct{})
		running = done
		go func() {
			defer close(done)
			reload(file, log, steps, func(apply func()) {
				applying.Lock()
				defer applying.Unlock()
				if ctx.Err() == nil {
					apply()
				}
			})
		}()
	}
	for {
		select {
		case <-ctx.Done():
			// An apply under way finishes; none starts from here on.
			applying.Lock()
			applying.Unlock()
			return
		case <-hup:
			if running == nil {
				start()
				continue
			}
			if again {
				log.Warn().Str("config", file).Msg("SIGHUP while a reload is still running: one more reload is already due once it ends")
			} else {
				log.Warn().Str("config", file).Msg("SIGHUP while a reload is still running: reloading again once it ends")
			}
			again = true
		case <-running:
			running = nil
			if again {
				again = false
				start()
			}
		}
	}
}

// reload re-reads file once through steps, as reloadOnHangup says; commit
// puts what the steps accepted into effect, or drops it.
func reload(file string, log zerolog.Logger, steps []reloadStep, commit func(apply func())) {
	if file == "" {
		log.Warn().Msg("SIGHUP: no --config: nothing to reload (restart to change the flags or the environment)")
		return
	}
	applies := make([]func(), 0, len(steps))
	for _, step := range steps {
		apply, err := step(file)
		if err != nil {
			log.Error().Err(err).Str("config", file).Msg("reload refused: the running config stays")
			return
		}
		applies = append(applies, apply)
	}
	commit(func() {
		for _, apply := range applies {
			apply()
		}
	})
}

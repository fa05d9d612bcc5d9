package dispatch

import (
	"slices"
	"sync"

	"inbox/inbox"
)

// Routing is every configured destination's route, by which a claim
// matches the new rows to their destinations. The dispatchers of a Group
// share one, so that a reload changes the routing of all of them at once.
type Routing struct {
	// mu is held for reading over each claim, so Set waits for the claims
	// routing by the routes it replaces.
	mu     sync.RWMutex
	routes []inbox.Route
}

// NewRouting returns the Routing of routes.
func NewRouting(routes []inbox.Route) *Routing { return &Routing{routes: routes} }

// Set makes routes the routing of every claim from now on. It returns
// once the claims under way with the old routes have returned, so a row
// stored after Set returns is routed by routes. It fails as
// inbox.CheckRoutes does, changing nothing then; no routes at all is
// allowed (the Group then has no dispatcher to claim).
func (r *Routing) Set(routes []inbox.Route) error {
	if len(routes) > 0 {
		if err := inbox.CheckRoutes(routes); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.routes = slices.Clone(routes)
	r.mu.Unlock()
	return nil
}

// Routes returns the routes now in effect.
func (r *Routing) Routes() []inbox.Route {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.routes)
}

// claim runs fn with the routes in effect, which Set does not change
// before fn returns.
func (r *Routing) claim(fn func(routes []inbox.Route)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn(r.routes)
}

// includes reports whether routes include the destination name.
func includes(routes []inbox.Route, name string) bool {
	return slices.ContainsFunc(routes, func(rt inbox.Route) bool { return rt.Name == name })
}

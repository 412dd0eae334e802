package api

import "strings"

// RouteSet selects the routes a handler serves (Options.Routes). Locally one handler serves them
// all; in AWS the HTTP API sends /v1/admin/… to the admin function and every other route to the
// api function, each serving only its own set — so only the admin function's role holds what
// the operator routes need (reading, deleting and moving dead letters, sending to every queue),
// and a request that reaches the wrong function some other way (a direct invoke, a route
// changed by hand) is not served by it. A route outside the set answers 404 like an unknown
// path: it does not exist on that handler.
type RouteSet int

const (
	// AllRoutes is every route (the local runtime).
	AllRoutes RouteSet = iota
	// ServiceRoutes is every route except the operator routes under /v1/admin/ (the api function).
	ServiceRoutes
	// AdminRoutes is the operator routes under /v1/admin/ (the admin function).
	AdminRoutes
)

// adminPrefix starts every operator route's path.
const adminPrefix = "/v1/admin/"

// serves reports whether rt is in the set; public routes (/healthz, /openapi.json) are in all.
func (s RouteSet) serves(rt route) bool {
	if rt.Public {
		return true
	}
	admin := strings.HasPrefix(rt.Path, adminPrefix)
	switch s {
	case ServiceRoutes:
		return !admin
	case AdminRoutes:
		return admin
	}
	return true
}

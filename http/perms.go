package http

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
)

// This file checks a request's user against its route's categories and
// keys (routes.go): the route's name for +command rules is its operation
// id in lower case, its keys' access is writing for a route in @write and
// reading otherwise, and a prefix (a listing's, an export's, a ranking's)
// is allowed only when a pattern P* of the user covers it.

// routePerm is what serveRoute checks of a route, worked out once.
type routePerm struct {
	op     string // the operation id, as the audit trail names it
	name   string // the lower-case operation id, as +command rules give it
	cats   Category
	access acl.Access
	keys   []Key // those of the path and the query; the body's are the handler's
}

func newRoutePerm(rt *Route) routePerm {
	pm := routePerm{op: rt.Operation, name: strings.ToLower(rt.Operation), cats: rt.Categories, access: acl.AccessOf(rt.Categories)}
	for _, k := range rt.Keys {
		if k.In != InBody {
			pm.keys = append(pm.keys, k)
		}
	}
	return pm
}

// permit checks u against the route and the keys of its path and query,
// answering 403 permission_denied (and writing the audit line) when it
// refuses. It reports whether the request may go on.
func (s *Server) permit(w http.ResponseWriter, r *http.Request, u *acl.User, pm routePerm) bool {
	if !u.Allowed(pm.name, pm.cats) {
		s.refuse(w, r, u, pm.op, nil, "user "+u.Name()+" may not "+pm.op+": it needs "+pm.cats.String())
		return false
	}
	for _, k := range pm.keys {
		var v string
		switch k.In {
		case InPath:
			v = r.PathValue(k.Name)
		case InQuery:
			v = r.URL.Query().Get(k.Name)
		}
		if k.In == InStore || k.Kind == KeyPrefix {
			if !u.Prefix(v, pm.access) {
				s.refuse(w, r, u, pm.op, []string{v + "*"}, "user "+u.Name()+" may not "+pm.op+" of every key that starts with "+
					strconv.Quote(v)+": it needs a pattern P* with P a prefix of it")
				return false
			}
			continue
		}
		if !u.Key(v, pm.access) {
			s.refuse(w, r, u, pm.op, []string{v}, "user "+u.Name()+" may not touch "+strconv.Quote(v)+": no pattern of it matches")
			return false
		}
	}
	return true
}

// restricted reports whether r's user is one whose keys are checked:
// there are users, so the handler must check the keys of its body.
func restricted(r *http.Request) bool {
	u := requestOf(r).user
	return u != nil && u != acl.Everyone
}

// permitKeys checks the keys a handler found in a request's body (a
// batch's counters) against the request's user with the route's access,
// answering 403 and reporting false when one is outside: the request is
// refused whole, before anything is done.
func (s *Server) permitKeys(w http.ResponseWriter, r *http.Request, op string, access acl.Access, keys []string) bool {
	u := requestOf(r).user
	if u == nil || u == acl.Everyone {
		return true
	}
	for _, k := range keys {
		if !u.Key(k, access) {
			s.refuse(w, r, u, op, keys, "user "+u.Name()+" may not touch "+strconv.Quote(k)+": no pattern of it matches; nothing was done")
			return false
		}
	}
	return true
}

// permitPrefix is permitKeys for a prefix in a body (a ranking's).
func (s *Server) permitPrefix(w http.ResponseWriter, r *http.Request, op string, access acl.Access, prefix string) bool {
	u := requestOf(r).user
	if u == nil || u == acl.Everyone || u.Prefix(prefix, access) {
		return true
	}
	s.refuse(w, r, u, op, []string{prefix + "*"}, "user "+u.Name()+" may not "+op+" of every key that starts with "+
		strconv.Quote(prefix)+": it needs a pattern P* with P a prefix of it")
	return false
}

// refuse answers 403 permission_denied and writes the audit line.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, u *acl.User, op string, keys []string, msg string) {
	s.opts.Audit.Log("http", r.RemoteAddr, u.Name(), op, keys, "refused: "+msg)
	s.error(w, r, shardcounter.Errorf(shardcounter.EPERMISSION, "%s", msg))
}

// auditDone writes the audit line of an @admin or @keyspace request,
// with the status it was answered.
func (s *Server) auditDone(w http.ResponseWriter, r *http.Request, u *acl.User, pm routePerm) {
	status := http.StatusOK
	if sw, ok := w.(*statusWriter); ok && sw.status != 0 {
		status = sw.status
	}
	if status == http.StatusForbidden {
		return // refused, and audited as such
	}
	var keys []string
	for _, k := range pm.keys {
		switch k.In {
		case InPath:
			keys = append(keys, r.PathValue(k.Name))
		case InQuery:
			keys = append(keys, r.URL.Query().Get(k.Name)+"*")
		case InStore:
			keys = append(keys, "*")
		}
	}
	s.opts.Audit.Log("http", r.RemoteAddr, u.Name(), pm.op, keys, strconv.Itoa(status))
}

// Permissions returns the categories of every route that needs the token,
// by its operation id in lower case: what a users file's +command and
// -command rules may name (acl.Parse).
func Permissions() map[string]acl.Category {
	out := map[string]acl.Category{}
	for _, rt := range Routes() {
		if rt.NeedsToken() {
			out[strings.ToLower(rt.Operation)] = rt.Categories
		}
	}
	return out
}

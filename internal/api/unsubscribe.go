package api

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"

	"herald/internal/notify"
)

// One-click unsubscribe (RFC 8058). A marketing email's List-Unsubscribe names /u/{token}; the
// mailbox provider POSTs "List-Unsubscribe=One-Click" there when its user clicks Unsubscribe,
// and a person who follows the link gets a page whose button POSTs the same. The routes are
// public: the signed token is the credential, naming the user, channel and category it opts out
// of. An unknown or altered token is a plain 404, the same as a route that does not exist.

var unsubscribePageHTML = template.Must(template.New("unsubscribe").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title></head>
<body><main>
<h1>{{.Title}}</h1>
<p>{{.Text}}</p>
{{if .Ask}}<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>{{end}}
</main></body></html>
`))

type unsubscribeView struct {
	Title, Text string
	Ask         bool
}

// unsubscribeToken reads the route's token; false when this deployment did not sign it.
func (s *server) unsubscribeToken(r *http.Request) (notify.Unsubscribe, bool) {
	u, ok := notify.ParseUnsubscribeToken(s.unsubscribeKey, r.PathValue("token"))
	if !ok || len(u.UserID) > 128 || !printable.MatchString(u.UserID) || !slices.Contains(notify.Channels, u.Channel) ||
		(u.Category != notify.CategoryMarketing && u.Category != notify.CategoryTransactional) {
		return u, false
	}
	return u, true
}

func writeUnsubscribePage(w http.ResponseWriter, status int, v unsubscribeView) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; form-action 'self'")
	w.WriteHeader(status)
	_ = unsubscribePageHTML.Execute(w, v)
}

// unsubscribePage is GET /u/{token}: the page that asks, with one button. Nothing changes on a
// GET, since mail scanners follow links.
func (s *server) unsubscribePage(w http.ResponseWriter, r *http.Request) error {
	u, ok := s.unsubscribeToken(r)
	if !ok {
		writeUnsubscribePage(w, http.StatusNotFound, unsubscribeView{Title: "Link not valid", Text: "This unsubscribe link is not one we sent."})
		return nil
	}
	writeUnsubscribePage(w, http.StatusOK, unsubscribeView{Title: "Unsubscribe",
		Text: fmt.Sprintf("Stop receiving %s messages by %s?", u.Category, u.Channel), Ask: true})
	return nil
}

// unsubscribe is POST /u/{token}: the user opts out of the token's category on its channel (a
// preference, as PUT /v1/users/{user}/preferences sets it), once however often it is posted,
// with an audit entry whose actor is the user.
func (s *server) unsubscribe(w http.ResponseWriter, r *http.Request) (err error) {
	u, ok := s.unsubscribeToken(r)
	if !ok {
		writeUnsubscribePage(w, http.StatusNotFound, unsubscribeView{Title: "Link not valid", Text: "This unsubscribe link is not one we sent."})
		return nil
	}
	ctx := r.Context()
	prefs, err := s.store.GetPreferences(ctx, []string{u.UserID})
	if err != nil {
		return fmt.Errorf("unsubscribe: %w", err)
	}
	p := prefs[u.UserID]
	p.UserID = u.UserID
	if out := p.OptOut[u.Channel]; !slices.Contains(out, u.Category) && !slices.Contains(out, "*") {
		if p.OptOut == nil {
			p.OptOut = map[notify.Channel][]notify.Category{}
		}
		p.OptOut[u.Channel] = append(slices.Clip(out), u.Category)
		p.UpdatedAt = s.clock.Now().UTC()
		if err := s.store.PutPreferences(ctx, p); err != nil {
			return fmt.Errorf("unsubscribe: %w", err)
		}
	}
	s.auditUnsubscribe(r, u)
	writeUnsubscribePage(w, http.StatusOK, unsubscribeView{Title: "Unsubscribed",
		Text: fmt.Sprintf("You will no longer receive %s messages by %s.", u.Category, u.Channel)})
	return nil
}

// auditUnsubscribe records the opt-out under the user who made it.
func (s *server) auditUnsubscribe(r *http.Request, u notify.Unsubscribe) {
	if s.auditLog == nil {
		return
	}
	e := notify.AuditEntry{At: s.clock.Now().UTC(), Actor: u.UserID, ActorKind: notify.ActorUser,
		Action: notify.AuditUserUnsubscribe, TargetType: notify.AuditTargetUser, TargetID: u.UserID,
		Params: map[string]string{"channel": string(u.Channel), "category": string(u.Category)}, Result: notify.AuditResultOK}
	if s.requestID != nil {
		e.RequestID = s.requestID(r)
	}
	e.ID = notify.AuditIDFor(e.RequestID, e.Actor, e.Action, e.TargetType, e.TargetID, e.At)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditTimeout)
	defer cancel()
	if err := s.auditLog.AppendAudit(ctx, e); err != nil {
		s.log.ErrorContext(ctx, "audit entry not written", "action", e.Action, "error", err.Error())
	}
}

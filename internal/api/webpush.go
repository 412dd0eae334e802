package api

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"herald/internal/netguard"
	"herald/internal/notify"
)

// Web Push subscriptions are devices with Platform webpush whose token is the subscription's
// canonical JSON (notify.WebPushSubscription.Token); these routes speak the browser's
// PushSubscription JSON instead of tokens, and show endpoints masked, by their id.

// webPushBody is PUT /v1/users/{user}/web-push-subscriptions: PushSubscription.toJSON() as the
// page got it, with the user's locale and time zone optionally.
type webPushBody struct {
	Endpoint       string   `json:"endpoint"`
	ExpirationTime *float64 `json:"expirationTime"` // the browser's hint; not stored
	Keys           *struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
	Locale   string `json:"locale"`
	TimeZone string `json:"time_zone"`
}

// webPushView is one subscription as the API shows it.
type webPushView struct {
	ID        string    `json:"id"`
	UserID    string    `json:"user_id"`
	Endpoint  string    `json:"endpoint"` // masked: an endpoint is a capability to push to the browser
	App       string    `json:"app"`
	Locale    string    `json:"locale,omitempty"`
	TimeZone  string    `json:"time_zone,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

func webPushViewOf(d notify.Device, sub notify.WebPushSubscription) webPushView {
	return webPushView{ID: notify.WebPushID(sub.Endpoint), UserID: d.UserID, Endpoint: notify.MaskWebPushEndpoint(sub.Endpoint),
		App: d.App, Locale: d.Locale, TimeZone: d.TimeZone, UpdatedAt: utc(d.UpdatedAt)}
}

// webPushConfigured answers 501 when no VAPID key is configured: a subscription could never be
// sent to.
func (s *server) webPushConfigured(w http.ResponseWriter) bool {
	if s.vapidPublicKey == "" {
		writeNotImplemented(w, "web push is not configured (providers.webpush)")
		return false
	}
	return true
}

// vapidPublicKey serves the application server key a page passes to pushManager.subscribe.
func (s *server) vapidPublicKeyRoute(w http.ResponseWriter, _ *http.Request) error {
	if !s.webPushConfigured(w) {
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]string{"public_key": s.vapidPublicKey})
	return nil
}

// userWebPush returns the user's web push devices with their subscriptions.
func (s *server) userWebPush(r *http.Request, user string) ([]notify.Device, []notify.WebPushSubscription, error) {
	got, err := s.store.ListDevices(r.Context(), []string{user})
	if err != nil {
		return nil, nil, fmt.Errorf("list devices: %w", err)
	}
	var ds []notify.Device
	var subs []notify.WebPushSubscription
	for _, d := range got[user] {
		if d.Platform != notify.PlatformWebPush {
			continue
		}
		if sub, ok := notify.ParseWebPushToken(d.Token); ok {
			ds, subs = append(ds, d), append(subs, sub)
		}
	}
	return ds, subs, nil
}

// putWebPushSubscription registers a browser's subscription for the user. It is idempotent on
// the endpoint: the same endpoint again (with new keys, after the browser rotated them) replaces
// the earlier registration instead of adding a second one.
func (s *server) putWebPushSubscription(w http.ResponseWriter, r *http.Request) error {
	if !s.webPushConfigured(w) {
		return nil
	}
	var b webPushBody
	if err := s.decode(w, r, &b); err != nil {
		return err
	}
	if b.Keys == nil {
		if b.Endpoint == "" {
			return notify.FieldError("endpoint", "required: the PushSubscription's endpoint URL")
		}
		return notify.FieldError("keys", "required: the PushSubscription's keys (p256dh and auth)")
	}
	sub := notify.WebPushSubscription{Endpoint: b.Endpoint, Keys: notify.WebPushKeys{P256dh: b.Keys.P256dh, Auth: b.Keys.Auth}}
	if err := sub.Validate(s.localPush); err != nil {
		return err
	}
	// A name that resolves to a private, loopback or metadata address is refused now; the
	// sender's dialer refuses it again at every connection, should the name change its answer.
	if u, err := url.Parse(sub.Endpoint); err == nil {
		if err := (netguard.Policy{AllowLoopback: s.localPush}).CheckHost(r.Context(), u.Hostname(), s.resolveHost); err != nil {
			return notify.FieldError("endpoint", "must be on a public host: %v", err)
		}
	}
	if err := checkLocaleZone(b.Locale, b.TimeZone); err != nil {
		return err
	}
	user := r.PathValue("user")
	d := notify.Device{UserID: user, Platform: notify.PlatformWebPush, App: defaultApp, Token: sub.Token(),
		Environment: "production", Locale: b.Locale, TimeZone: b.TimeZone, UpdatedAt: s.clock.Now()}
	if err := s.store.PutDevice(r.Context(), d); err != nil {
		return fmt.Errorf("put web push subscription: %w", err)
	}
	ds, subs, err := s.userWebPush(r, user)
	if err != nil {
		return err
	}
	for i, old := range subs {
		if old.Endpoint == sub.Endpoint && ds[i].Token != d.Token {
			if err := s.store.DeleteDevice(r.Context(), user, ds[i].Token); err != nil && !notify.IsCode(err, notify.ENOTFOUND) {
				return fmt.Errorf("replace web push subscription: %w", err)
			}
		}
	}
	writeJSON(w, http.StatusOK, webPushViewOf(d, sub))
	return nil
}

// webPushList is GET /v1/users/{user}/web-push-subscriptions.
type webPushList struct {
	UserID        string        `json:"user_id"`
	Subscriptions []webPushView `json:"subscriptions"`
}

func (s *server) listWebPushSubscriptions(w http.ResponseWriter, r *http.Request) error {
	user := r.PathValue("user")
	ds, subs, err := s.userWebPush(r, user)
	if err != nil {
		return err
	}
	out := webPushList{UserID: user, Subscriptions: []webPushView{}}
	for i := range ds {
		out.Subscriptions = append(out.Subscriptions, webPushViewOf(ds[i], subs[i]))
	}
	slices.SortFunc(out.Subscriptions, func(a, b webPushView) int {
		return cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), strings.Compare(a.ID, b.ID))
	})
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteWebPushSubscription removes the user's subscription named by ?endpoint= (what the page
// has) or ?id= (what the listing shows).
func (s *server) deleteWebPushSubscription(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	endpoint, id := q.Get("endpoint"), q.Get("id")
	switch {
	case endpoint == "" && id == "":
		return notify.FieldError("endpoint", "give the subscription's endpoint, or its id (?id=)")
	case endpoint != "" && id != "":
		return notify.FieldError("id", "give the endpoint or the id, not both")
	}
	user := r.PathValue("user")
	ds, subs, err := s.userWebPush(r, user)
	if err != nil {
		return err
	}
	removed := 0
	for i, sub := range subs {
		if (endpoint != "" && sub.Endpoint == endpoint) || (id != "" && notify.WebPushID(sub.Endpoint) == id) {
			err := s.store.DeleteDevice(r.Context(), user, ds[i].Token)
			if err != nil && !notify.IsCode(err, notify.ENOTFOUND) {
				return fmt.Errorf("delete web push subscription: %w", err)
			}
			if err == nil {
				removed++
			}
		}
	}
	if removed == 0 {
		return notify.Errorf(notify.ENOTFOUND, "no such web push subscription registered to this user")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

package api

import (
	"fmt"
	"net/http"
	"slices"
	"time"
	_ "time/tzdata" // time zones are validated by name; Lambda images may have no zoneinfo

	"herald/internal/notify"
)

// deviceBody is PUT /v1/users/{user}/devices/{token}.
type deviceBody struct {
	Platform    notify.Platform `json:"platform"`
	App         string          `json:"app"`
	Environment string          `json:"environment"`
	Locale      string          `json:"locale"`
	TimeZone    string          `json:"time_zone"`
}

func (s *server) putDevice(w http.ResponseWriter, r *http.Request) error {
	var b deviceBody
	if err := s.decode(w, r, &b); err != nil {
		return err
	}
	if b.Platform == "" {
		return notify.FieldError("platform", "required: fcm or apns")
	}
	if b.Platform == notify.PlatformWebPush {
		return notify.FieldError("platform", "a web push subscription is registered with PUT /v1/users/{user}/web-push-subscriptions")
	}
	if !b.Platform.Valid() {
		return notify.FieldError("platform", "unknown platform %q (want fcm or apns)", b.Platform)
	}
	if b.App == "" {
		b.App = "default"
	}
	if len(b.App) > 128 || !printable.MatchString(b.App) {
		return notify.FieldError("app", "must be 1–128 printable ASCII characters without spaces")
	}
	if err := s.checkApp("app", b.Platform, b.App); err != nil {
		return err
	}
	switch b.Environment {
	case "":
		b.Environment = "production"
	case "production", "sandbox":
	default:
		return notify.FieldError("environment", "unknown environment %q (want production or sandbox)", b.Environment)
	}
	if err := checkLocaleZone(b.Locale, b.TimeZone); err != nil {
		return err
	}
	d := notify.Device{
		UserID:      r.PathValue("user"),
		Platform:    b.Platform,
		App:         b.App,
		Token:       r.PathValue("token"),
		Environment: b.Environment,
		Locale:      b.Locale,
		TimeZone:    b.TimeZone,
		UpdatedAt:   s.clock.Now(),
	}
	if err := s.store.PutDevice(r.Context(), d); err != nil {
		return fmt.Errorf("put device: %w", err)
	}
	d.Token = notify.MaskToken(d.Token)
	d.UpdatedAt = utc(d.UpdatedAt)
	writeJSON(w, http.StatusOK, d)
	return nil
}

// devicesView is GET /v1/users/{user}/devices.
type devicesView struct {
	UserID  string          `json:"user_id"`
	Devices []notify.Device `json:"devices"`
}

// listDevices lists a user's devices, oldest registration first, each token masked as
// everywhere else the API shows one.
func (s *server) listDevices(w http.ResponseWriter, r *http.Request) error {
	user := r.PathValue("user")
	got, err := s.store.ListDevices(r.Context(), []string{user})
	if err != nil {
		return fmt.Errorf("list devices: %w", err)
	}
	ds := slices.Clone(got[user])
	slices.SortStableFunc(ds, func(a, b notify.Device) int { return a.UpdatedAt.Compare(b.UpdatedAt) })
	for i := range ds {
		ds[i].Token = notify.MaskToken(ds[i].Token)
		ds[i].UpdatedAt = utc(ds[i].UpdatedAt)
	}
	if ds == nil {
		ds = []notify.Device{}
	}
	writeJSON(w, http.StatusOK, devicesView{UserID: user, Devices: ds})
	return nil
}

func (s *server) deleteDevice(w http.ResponseWriter, r *http.Request) error {
	err := s.store.DeleteDevice(r.Context(), r.PathValue("user"), r.PathValue("token"))
	if notify.IsCode(err, notify.ENOTFOUND) {
		return notify.Errorf(notify.ENOTFOUND, "no such device registered to this user")
	}
	if err != nil {
		return fmt.Errorf("delete device: %w", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// contactsBody is PUT /v1/users/{user}/contacts. It replaces the user's contact: a field left
// out is removed.
type contactsBody struct {
	Email    string `json:"email"`
	Phone    string `json:"phone"`
	Locale   string `json:"locale"`
	TimeZone string `json:"time_zone"`
}

func (s *server) putContacts(w http.ResponseWriter, r *http.Request) error {
	var b contactsBody
	if err := s.decode(w, r, &b); err != nil {
		return err
	}
	if b.Email == "" && b.Phone == "" {
		return notify.FieldError("email", "give an email, a phone or both")
	}
	if b.Email != "" && !notify.ValidEmail(b.Email) {
		return notify.FieldError("email", "not an email address")
	}
	if b.Phone != "" && !notify.ValidPhone(b.Phone) {
		return notify.FieldError("phone", "not an E.164 phone number (e.g. +821012345678)")
	}
	if err := checkLocaleZone(b.Locale, b.TimeZone); err != nil {
		return err
	}
	c := notify.Contact{
		UserID:    r.PathValue("user"),
		Email:     b.Email,
		Phone:     b.Phone,
		Locale:    b.Locale,
		TimeZone:  b.TimeZone,
		UpdatedAt: s.clock.Now(),
	}
	if err := s.store.PutContact(r.Context(), c); err != nil {
		return fmt.Errorf("put contact: %w", err)
	}
	writeJSON(w, http.StatusOK, maskedContact(c))
	return nil
}

// getContacts returns a user's contact with the email and phone masked: the API never shows a
// stored address in full.
func (s *server) getContacts(w http.ResponseWriter, r *http.Request) error {
	user := r.PathValue("user")
	got, err := s.store.GetContacts(r.Context(), []string{user})
	if err != nil {
		return fmt.Errorf("get contacts: %w", err)
	}
	c, ok := got[user]
	if !ok {
		return notify.Errorf(notify.ENOTFOUND, "no contact registered for this user")
	}
	writeJSON(w, http.StatusOK, maskedContact(c))
	return nil
}

// maskedContact is c as the API shows it.
func maskedContact(c notify.Contact) notify.Contact {
	if c.Email != "" {
		c.Email = notify.MaskEmail(c.Email)
	}
	if c.Phone != "" {
		c.Phone = notify.MaskPhone(c.Phone)
	}
	c.UpdatedAt = utc(c.UpdatedAt)
	return c
}

func checkLocaleZone(locale, zone string) error {
	if locale != "" && !notify.ValidLocale(locale) {
		return notify.FieldError("locale", "not a locale tag (e.g. \"ko\", \"en-US\")")
	}
	if zone == "" {
		return nil
	}
	// "Local" would mean the server's zone, which differs between a laptop and Lambda.
	if _, err := time.LoadLocation(zone); err != nil || zone == "Local" {
		return notify.FieldError("time_zone", "unknown time zone %q (want an IANA name such as \"Asia/Seoul\")", zone)
	}
	return nil
}

// preferencesBody is PUT /v1/users/{user}/preferences. It replaces the user's preferences: a
// consent left out is withdrawn.
type preferencesBody struct {
	OptOut           map[string][]string `json:"opt_out"`
	MarketingConsent bool                `json:"marketing_consent"`
	NightConsent     bool                `json:"night_consent"`
}

// preferencesView is what GET and PUT return: the consents as booleans and as the time they
// were given.
type preferencesView struct {
	UserID             string                               `json:"user_id"`
	OptOut             map[notify.Channel][]notify.Category `json:"opt_out"`
	MarketingConsent   bool                                 `json:"marketing_consent"`
	MarketingConsentAt *time.Time                           `json:"marketing_consent_at"`
	NightConsent       bool                                 `json:"night_consent"`
	NightConsentAt     *time.Time                           `json:"night_consent_at"`
	UpdatedAt          *time.Time                           `json:"updated_at"` // null: never set, defaults apply
}

func toPreferencesView(userID string, p notify.Preferences, stored bool) preferencesView {
	v := preferencesView{
		UserID:             userID,
		OptOut:             p.OptOut,
		MarketingConsent:   p.MarketingConsent != nil,
		MarketingConsentAt: utcPtr(p.MarketingConsent),
		NightConsent:       p.NightConsent != nil,
		NightConsentAt:     utcPtr(p.NightConsent),
	}
	if v.OptOut == nil {
		v.OptOut = map[notify.Channel][]notify.Category{}
	}
	if stored {
		v.UpdatedAt = utcPtr(&p.UpdatedAt)
	}
	return v
}

func (s *server) getPreferences(w http.ResponseWriter, r *http.Request) error {
	user := r.PathValue("user")
	got, err := s.store.GetPreferences(r.Context(), []string{user})
	if err != nil {
		return fmt.Errorf("get preferences: %w", err)
	}
	p, ok := got[user]
	writeJSON(w, http.StatusOK, toPreferencesView(user, p, ok))
	return nil
}

func (s *server) putPreferences(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	user := r.PathValue("user")
	var b preferencesBody
	if err := s.decode(w, r, &b); err != nil {
		return err
	}
	optOut, err := checkOptOut(b.OptOut)
	if err != nil {
		return err
	}
	got, err := s.store.GetPreferences(ctx, []string{user})
	if err != nil {
		return fmt.Errorf("get preferences: %w", err)
	}
	old := got[user]
	now := s.clock.Now()
	p := notify.Preferences{
		UserID:           user,
		OptOut:           optOut,
		MarketingConsent: consent(b.MarketingConsent, old.MarketingConsent, now),
		NightConsent:     consent(b.NightConsent, old.NightConsent, now),
		UpdatedAt:        now,
	}
	if err := s.store.PutPreferences(ctx, p); err != nil {
		return fmt.Errorf("put preferences: %w", err)
	}
	writeJSON(w, http.StatusOK, toPreferencesView(user, p, true))
	return nil
}

// consent is when consent was given: kept from before if it already was (the original date is
// the legal record), now if it is given now, nil if withdrawn.
func consent(on bool, before *time.Time, now time.Time) *time.Time {
	switch {
	case !on:
		return nil
	case before != nil:
		return before
	default:
		return &now
	}
}

// checkOptOut validates channel → categories, "*" standing for all of either, and drops
// duplicates and empty lists.
func checkOptOut(in map[string][]string) (map[notify.Channel][]notify.Category, error) {
	out := map[notify.Channel][]notify.Category{}
	channels := make([]string, 0, len(in))
	for c := range in {
		channels = append(channels, c)
	}
	slices.Sort(channels) // the first error reported is the same every time
	for _, c := range channels {
		if c != "*" && !notify.Channel(c).Valid() {
			return nil, notify.FieldError("opt_out."+c, "unknown channel %q (want push, email, sms, inbox, alimtalk or *)", c)
		}
		var cats []notify.Category
		for i, k := range in[c] {
			switch notify.Category(k) {
			case notify.CategoryTransactional, notify.CategoryMarketing, "*":
			default:
				return nil, notify.FieldError(fmt.Sprintf("opt_out.%s[%d]", c, i), "unknown category %q (want transactional, marketing or *)", k)
			}
			if !slices.Contains(cats, notify.Category(k)) {
				cats = append(cats, notify.Category(k))
			}
		}
		if len(cats) > 0 {
			out[notify.Channel(c)] = cats
		}
	}
	return out, nil
}

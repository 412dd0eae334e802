package api

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"herald/internal/notify"
)

// defaultApp is the provider app of a device or token that names none.
const defaultApp = "default"

// checkApp refuses an app that is not configured for platform (any platform when platform is
// ""): such a send would otherwise be accepted and fail at the provider stage, for every
// recipient. With no apps configured (Options.Apps nil) nothing is checked.
func (s *server) checkApp(field string, platform notify.Platform, app string) error {
	if s.apps == nil {
		return nil
	}
	if app == "" {
		app = defaultApp
	}
	var known []string
	for _, p := range []notify.Platform{notify.PlatformFCM, notify.PlatformAPNs, notify.PlatformWebPush} {
		if platform != "" && p != platform {
			continue
		}
		if slices.Contains(s.apps[p], app) {
			return nil
		}
		known = append(known, s.apps[p]...)
	}
	slices.Sort(known)
	known = slices.Compact(known)
	on := ""
	if platform != "" {
		on = " for " + string(platform)
	}
	return notify.FieldError(field, "unknown provider app %q%s (configured: %s)", app, on, strings.Join(known, ", "))
}

// checkRecipientApps checks the app of every direct-token recipient.
func (s *server) checkRecipientApps(rs []notify.Recipient) error {
	var (
		prevApp      string
		prevPlatform notify.Platform // "" until one is checked
	)
	for i, r := range rs {
		var p notify.Platform
		switch {
		case r.FCMToken != "":
			p = notify.PlatformFCM
		case r.APNsToken != "":
			p = notify.PlatformAPNs
		default:
			continue
		}
		if r.App == prevApp && p == prevPlatform {
			continue // checked on the recipient before: a list of tokens mostly names one app
		}
		if err := s.checkApp("recipients["+strconv.Itoa(i)+"].app", p, r.App); err != nil {
			return err
		}
		prevApp, prevPlatform = r.App, p
	}
	return nil
}

// checkAudienceApps checks the app of every app_devices source.
func (s *server) checkAudienceApps(a notify.Audience) error {
	for i, src := range a.Sources {
		if src.Kind != notify.AudienceAppDevices || src.App == "" {
			continue
		}
		if err := s.checkApp(fmt.Sprintf("audience.sources[%d].app", i), src.Platform, src.App); err != nil {
			return err
		}
	}
	return nil
}

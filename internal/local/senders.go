package local

import (
	"context"
	"errors"
	"fmt"
	"os"

	"herald/internal/alimtalk"
	"herald/internal/apns"
	"herald/internal/config"
	"herald/internal/fcm"
	"herald/internal/notify"
	"herald/internal/sandbox"
	"herald/internal/ses"
	"herald/internal/twilio"
	"herald/internal/webpush"
)

// sandboxAPNsKeyID and team are what the local runtime signs sandbox APNs tokens with; the key
// itself is generated at every start and trusted by the sandbox.
const (
	sandboxAPNsKeyID  = "SANDBOXKEY"
	sandboxAPNsTeamID = "SANDBOXTEAM"
)

// sandboxWebPushSubscriber is the VAPID contact of a sandbox configuration that names none.
const sandboxWebPushSubscriber = "mailto:dev@sandbox.herald.local"

// buildSenders makes one sender per provider from config; in sandbox mode every provider points
// at the sandbox.
func buildSenders(ctx context.Context, cfg *config.Config, sb *sandbox.Server) ([]notify.Sender, func() error, error) {
	p := cfg.Providers
	var out []notify.Sender
	var closers []func() error

	if len(p.FCM.Apps) > 0 {
		fc := fcm.Config{Apps: map[string]fcm.App{}}
		for name, a := range p.FCM.Apps {
			app := fcm.App{ProjectID: a.ProjectID, Endpoint: a.Endpoint}
			if sb != nil {
				app.Endpoint = sb.URL() + "/v1"
			} else if a.CredentialsFile != "" {
				b, err := os.ReadFile(a.CredentialsFile)
				if err != nil {
					return nil, nil, fmt.Errorf("providers.fcm.apps.%s.credentials_file: %w", name, err)
				}
				app.CredentialsJSON = b
			}
			fc.Apps[name] = app
		}
		s, err := fcm.New(ctx, fc)
		if err != nil {
			return nil, nil, fmt.Errorf("fcm: %w", err)
		}
		out = append(out, s)
		closers = append(closers, s.Close)
	}

	if len(p.APNs.Apps) > 0 {
		ac := apns.Config{Apps: map[string]apns.App{}}
		var sbKey []byte
		if sb != nil {
			key, pub, err := apns.GenerateKey()
			if err != nil {
				return nil, nil, fmt.Errorf("apns: sandbox key: %w", err)
			}
			sb.TrustAPNsKey(sandboxAPNsKeyID, sandboxAPNsTeamID, pub)
			sbKey = key
		}
		for name, a := range p.APNs.Apps {
			app := apns.App{Topic: a.Topic, KeyID: a.KeyID, TeamID: a.TeamID, Endpoint: a.Endpoint}
			if sb != nil {
				app.KeyID, app.TeamID, app.KeyP8 = sandboxAPNsKeyID, sandboxAPNsTeamID, sbKey
				app.Endpoint, app.RootCAs = sb.TLSURL(), sb.CertPool()
			} else {
				b, err := os.ReadFile(a.KeyFile)
				if err != nil {
					return nil, nil, fmt.Errorf("providers.apns.apps.%s.key_file: %w", name, err)
				}
				app.KeyP8 = b
			}
			ac.Apps[name] = app
		}
		s, err := apns.New(ac)
		if err != nil {
			return nil, nil, fmt.Errorf("apns: %w", err)
		}
		out = append(out, s)
		closers = append(closers, s.Close)
	}

	if p.SES.From != "" {
		sc := ses.Config{From: p.SES.From, ConfigurationSet: p.SES.ConfigurationSet, Region: p.SES.Region, Endpoint: p.SES.Endpoint}
		if sb != nil {
			sc.Endpoint = sb.URL()
		}
		s, err := ses.New(ctx, sc)
		if err != nil {
			return nil, nil, fmt.Errorf("ses: %w", err)
		}
		out = append(out, s)
		closers = append(closers, func() error { s.CloseIdleConnections(); return nil })
	}

	if p.Twilio.AccountSID != "" {
		if sb == nil && p.Twilio.AuthToken == "" {
			return nil, nil, fmt.Errorf("providers.twilio.auth_token: required by the local runtime (auth_token_secret is read by the AWS runtime)")
		}
		tc := twilio.Config{AccountSID: p.Twilio.AccountSID, AuthToken: p.Twilio.AuthToken, From: p.Twilio.From,
			MessagingServiceSID: p.Twilio.MessagingServiceSID, BaseURL: p.Twilio.BaseURL}
		if sb != nil {
			tc.BaseURL = sb.URL()
		}
		s, err := twilio.New(tc)
		if err != nil {
			return nil, nil, fmt.Errorf("twilio: %w", err)
		}
		out = append(out, s)
		closers = append(closers, func() error { s.CloseIdleConnections(); return nil })
	}
	if a := p.AlimTalk; a.Configured() {
		if sb == nil && a.APISecret == "" {
			return nil, nil, fmt.Errorf("providers.alimtalk.api_secret: required by the local runtime (api_secret_secret is read by the AWS runtime)")
		}
		ac := alimtalk.Config{APIKey: a.APIKey, APISecret: a.APISecret, From: a.From, BaseURL: a.BaseURL, Apps: map[string]alimtalk.App{}}
		for name, app := range a.Apps {
			ac.Apps[name] = alimtalk.App{SenderKey: app.SenderKey}
		}
		if sb != nil {
			ac.BaseURL = sb.URL()
			if ac.APISecret == "" {
				ac.APISecret = "sandbox-alimtalk-secret"
			}
			sb.TrustAlimTalkKey(ac.APIKey, ac.APISecret)
		}
		s, err := alimtalk.New(ac)
		if err != nil {
			return nil, nil, fmt.Errorf("alimtalk: %w", err)
		}
		out = append(out, s)
		closers = append(closers, func() error { s.CloseIdleConnections(); return nil })
	}
	if w := p.WebPush; w.Enabled() {
		if w.VAPIDPrivateKey == "" {
			return nil, nil, fmt.Errorf("providers.webpush.vapid_private_key: required by the local runtime (vapid_private_key_secret is read by the AWS runtime)")
		}
		// The sandbox's push service is on this machine; otherwise endpoints are public hosts.
		wc := webpush.Config{VAPIDPublicKey: w.VAPIDPublicKey, VAPIDPrivateKey: w.VAPIDPrivateKey, Subscriber: w.Subscriber, AllowLoopback: sb != nil}
		if sb != nil && wc.Subscriber == "" {
			wc.Subscriber = sandboxWebPushSubscriber
		}
		s, err := webpush.New(wc)
		if err != nil {
			return nil, nil, fmt.Errorf("providers.webpush: %w", err)
		}
		out = append(out, s)
		closers = append(closers, func() error { s.CloseIdleConnections(); return nil })
	}
	closeAll := func() error {
		var errs []error
		for _, c := range closers {
			errs = append(errs, c())
		}
		return errors.Join(errs...)
	}
	return out, closeAll, nil
}

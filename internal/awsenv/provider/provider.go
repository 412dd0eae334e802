// Package provider builds the provider senders of the AWS runtime, with credentials from Secrets
// Manager. Only the send function imports it, so the other functions stay small.
package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"herald/internal/alimtalk"
	"herald/internal/apns"
	"herald/internal/awsenv"
	"herald/internal/config"
	"herald/internal/fcm"
	"herald/internal/notify"
	"herald/internal/ses"
	"herald/internal/twilio"
	"herald/internal/webpush"
)

var _ awsenv.SenderBuilder = Senders

// Senders makes one sender per configured provider, reading credentials from Secrets Manager by
// the names in herald.yaml.
func Senders(ctx context.Context, sm *secretsmanager.Client, cfg *config.Config, awsCfg aws.Config) ([]notify.Sender, error) {
	p := cfg.Providers
	var out []notify.Sender
	if len(p.FCM.Apps) > 0 {
		fc := fcm.Config{Apps: map[string]fcm.App{}}
		for name, a := range p.FCM.Apps {
			app := fcm.App{ProjectID: a.ProjectID, Endpoint: a.Endpoint}
			if a.CredentialsSecret != "" {
				v, err := awsenv.Secret(ctx, sm, a.CredentialsSecret)
				if err != nil {
					return nil, fmt.Errorf("providers.fcm.apps.%s.credentials_secret: %w", name, err)
				}
				app.CredentialsJSON = []byte(v)
			}
			fc.Apps[name] = app
		}
		s, err := fcm.New(ctx, fc)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(p.APNs.Apps) > 0 {
		ac := apns.Config{Apps: map[string]apns.App{}}
		for name, a := range p.APNs.Apps {
			v, err := awsenv.Secret(ctx, sm, a.KeySecret)
			if err != nil {
				return nil, fmt.Errorf("providers.apns.apps.%s.key_secret: %w", name, err)
			}
			ac.Apps[name] = apns.App{Topic: a.Topic, KeyID: a.KeyID, TeamID: a.TeamID, KeyP8: []byte(v), Endpoint: a.Endpoint}
		}
		s, err := apns.New(ac)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if p.SES.From != "" {
		c := awsCfg.Copy()
		s, err := ses.New(ctx, ses.Config{From: p.SES.From, ConfigurationSet: p.SES.ConfigurationSet, Region: p.SES.Region,
			Endpoint: p.SES.Endpoint, AWS: &c})
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if p.Twilio.AccountSID != "" {
		token := p.Twilio.AuthToken
		if p.Twilio.AuthTokenSecret != "" {
			v, err := awsenv.Secret(ctx, sm, p.Twilio.AuthTokenSecret)
			if err != nil {
				return nil, fmt.Errorf("providers.twilio.auth_token_secret: %w", err)
			}
			token = v
		}
		s, err := twilio.New(twilio.Config{AccountSID: p.Twilio.AccountSID, AuthToken: token, From: p.Twilio.From,
			MessagingServiceSID: p.Twilio.MessagingServiceSID, BaseURL: p.Twilio.BaseURL})
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if a := p.AlimTalk; a.Configured() {
		secret := a.APISecret
		if a.APISecretSecret != "" {
			v, err := awsenv.Secret(ctx, sm, a.APISecretSecret)
			if err != nil {
				return nil, fmt.Errorf("providers.alimtalk.api_secret_secret: %w", err)
			}
			secret = v
		}
		ac := alimtalk.Config{APIKey: a.APIKey, APISecret: secret, From: a.From, BaseURL: a.BaseURL, Apps: map[string]alimtalk.App{}}
		for name, app := range a.Apps {
			ac.Apps[name] = alimtalk.App{SenderKey: app.SenderKey}
		}
		s, err := alimtalk.New(ac)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if w := p.WebPush; w.Enabled() {
		priv := w.VAPIDPrivateKey
		if w.VAPIDPrivateKeySecret != "" {
			v, err := awsenv.Secret(ctx, sm, w.VAPIDPrivateKeySecret)
			if err != nil {
				return nil, fmt.Errorf("providers.webpush.vapid_private_key_secret: %w", err)
			}
			priv = strings.TrimSpace(v)
		}
		// The pipeline hands the sender its limiter (notify.SelfLimiting), paced per push service.
		s, err := webpush.New(webpush.Config{VAPIDPublicKey: w.VAPIDPublicKey, VAPIDPrivateKey: priv, Subscriber: w.Subscriber})
		if err != nil {
			return nil, fmt.Errorf("providers.webpush: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}

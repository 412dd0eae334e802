package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"herald/internal/config"
	"herald/internal/local"
	"herald/internal/notify"
)

func runDev(args []string, out io.Writer) error {
	fs := newFlagSet("dev", "[flags]", `
Runs the whole of Herald as one local process: the API, every stage's workers, the scheduler,
an SQLite store and durable queue under --data, and (with the development configuration)
sandbox FCM, APNs, SES and Twilio servers. SIGTERM or Ctrl-C drains in-flight work; after a
SIGKILL the next start resumes from the durable queue, sending again at once what was in flight.
One herald dev at a time uses a --data directory. Logs are JSON lines on stderr.`)
	addr := fs.String("addr", "127.0.0.1:8080", "API listen address")
	data := fs.String("data", "./.herald", "data directory (SQLite store and queue, sandbox record)")
	cfgPath := fs.String("config", "", "herald.yaml; empty runs the development config (service demo, key dev-demo-key, sandbox providers)")
	sandboxAddr := fs.String("sandbox-addr", "127.0.0.1:0", "sandbox providers' plain-HTTP address")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(fs, "unexpected argument %q", pos[0])
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return usagef(fs, "--log-level: %v", err)
	}
	log := notify.NewJSONLogger(os.Stderr, lvl)
	slog.SetDefault(log)

	cfg := config.Dev()
	if *cfgPath != "" {
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rt, err := local.Start(ctx, local.Options{Config: cfg, DataDir: *data, Addr: *addr, SandboxAddr: *sandboxAddr, Logger: log})
	if err != nil {
		return err
	}
	log.Info("herald dev started", "api", rt.URL, "data", *data, "config", cfg.Redacted().Env, "services", cfg.ServiceNames())
	printBanner(out, rt, cfg, *cfgPath == "")
	<-ctx.Done()
	stop()
	log.Info("shutting down: draining in-flight work (up to 30s)")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Shutdown(sctx); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

func printBanner(out io.Writer, rt *local.Runtime, cfg *config.Config, dev bool) {
	u := rt.URL
	fmt.Fprintf(out, "\nHerald is running.\n\n  API       %s   (OpenAPI: %s/openapi.json)\n", u, u)
	fmt.Fprintf(out, "  Console   %s/console   (sign in with an admin service's API key)\n", u)
	if rt.Sandbox != nil {
		fmt.Fprintf(out, "  Sandbox   %s/sandbox/deliveries   (what the fake FCM, APNs, SES, Twilio and web push received)\n", u)
		fmt.Fprintf(out, "  Web app   %s/sandbox/web/   (example page: Web Push subscription and the live inbox)\n", u)
	}
	if !dev {
		fmt.Fprintf(out, "  Services  %v\n\n", cfg.ServiceNames())
		return
	}
	fmt.Fprintf(out, "  Service   demo, API key dev-demo-key\n\nTry it (paste into another terminal):\n\n")
	for _, line := range strings.Split(strings.ReplaceAll(tryIt, "localhost:8080", u), "\n") {
		fmt.Fprintf(out, "  %s\n", line)
	}
	fmt.Fprintln(out)
}

// tryIt is the block README.md and docs/getting-started.md show under "Try it", for a Herald on
// localhost:8080; the banner prints it with the real URL. TestDocExamples holds the three to one
// text and runs it.
const tryIt = `K='Authorization: Bearer dev-demo-key'
curl -s -XPUT localhost:8080/v1/users/alice/devices/fcm-alice-phone -H "$K" -d '{"platform":"fcm"}'
curl -s -XPUT localhost:8080/v1/users/alice/devices/apns-alice-ipad -H "$K" -d '{"platform":"apns"}'
curl -s -XPUT localhost:8080/v1/users/alice/contacts -H "$K" -d '{"email":"alice@example.com","phone":"+821012345678"}'
curl -s -XPOST localhost:8080/sandbox/webpush/subscriptions |   # a browser subscription, from the sandbox's push service
  curl -s -XPUT localhost:8080/v1/users/alice/web-push-subscriptions -H "$K" -d @-
curl -s -XPOST localhost:8080/v1/notifications -H "$K" -d '{
  "idempotency_key": "order-1001-shipped",
  "channels": ["push", "email", "sms", "inbox"],
  "content": {"title": "Your order shipped", "body": "Order #1001 is on its way."},
  "recipients": [{"user_id": "alice"}]}'
curl -s localhost:8080/v1/notifications/<id> -H "$K"     # status, counts, every delivery
curl -s localhost:8080/v1/users/alice/inbox -H "$K"       # the inbox item
curl -s localhost:8080/sandbox/deliveries                 # what the fake providers received`

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

const schedulesUsage = `Usage: herald schedules rearm [flags]

  herald schedules rearm   arm again the schedule of every reserved notification and campaign,
                           from the tables (after the schedule group was replaced)
`

// runSchedules is `herald schedules rearm`.
func runSchedules(args []string, out io.Writer) error {
	return dispatch("schedules", schedulesUsage, map[string]command{"rearm": runSchedulesRearm}, args, out)
}

// runSchedulesRearm arms again the schedule of every reserved notification and campaign from
// the tables, through the API's admin route, page by page, and prints how many of each.
// Re-arming is idempotent, so it is safe to run again (after a failure half-way, too).
func runSchedulesRearm(args []string, out io.Writer) error {
	fs := newFlagSet("schedules rearm", "[flags]", `
Arms again the schedule of every reserved notification and campaign from the tables: run it
after the schedule group was replaced (a stack replace, a deleted group). Idempotent.`)
	apiURL, key := apiFlags(fs, "API key of an admin service")
	sigv4 := fs.Bool("sigv4", false, "sign requests with SigV4 using the default AWS credentials (the API behind API Gateway), instead of --key")
	limit := fs.Int("limit", 100, "reserved sends re-armed per request (1–1000)")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef(fs, "unexpected argument %q", pos[0])
	}
	do := func(u string, out any) error { return call(http.MethodPost, u, *key, nil, out) }
	if *sigv4 {
		signed, err := sigv4Caller(context.Background())
		if err != nil {
			return err
		}
		do = func(u string, out any) error { return signed(http.MethodPost, u, out) }
	}
	n, c, err := rearm(*apiURL, *limit, do, out)
	fmt.Fprintf(out, "re-armed %d reserved notifications and %d reserved campaigns\n", n, c)
	return err
}

// rearm pages POST /v1/admin/schedules/rearm until the last page, reporting progress on w, and
// returns the totals re-armed per kind (also when a page failed: what was re-armed stays armed).
func rearm(apiURL string, limit int, do func(url string, out any) error, w io.Writer) (notifications, campaigns int, err error) {
	cursor := ""
	for page := 1; ; page++ {
		var out struct {
			Notifications int    `json:"notifications"`
			Campaigns     int    `json:"campaigns"`
			NextCursor    string `json:"next_cursor"`
		}
		u := strings.TrimSuffix(apiURL, "/") + "/v1/admin/schedules/rearm?limit=" + strconv.Itoa(limit)
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		if err := do(u, &out); err != nil {
			return notifications, campaigns, err
		}
		notifications, campaigns = notifications+out.Notifications, campaigns+out.Campaigns
		if out.NextCursor == "" {
			return notifications, campaigns, nil
		}
		if page%10 == 0 {
			fmt.Fprintf(w, "… %d notifications, %d campaigns so far\n", notifications, campaigns)
		}
		cursor = out.NextCursor
	}
}

// sigv4Caller returns a caller that signs each request for API Gateway (service execute-api)
// with the default AWS credentials and region, as the stack's IAM-authorized routes require.
func sigv4Caller(ctx context.Context) (func(method, u string, out any) error, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("--sigv4 needs a region (AWS_REGION or the profile's region)")
	}
	signer := v4.NewSigner()
	emptyHash := sha256.Sum256(nil)
	return func(method, u string, out any) error {
		req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(nil))
		if err != nil {
			return err
		}
		creds, err := cfg.Credentials.Retrieve(ctx)
		if err != nil {
			return fmt.Errorf("aws credentials: %w", err)
		}
		if err := signer.SignHTTP(ctx, creds, req, hex.EncodeToString(emptyHash[:]), "execute-api", cfg.Region, time.Now()); err != nil {
			return fmt.Errorf("sign %s: %w", u, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, u, err)
		}
		return answer(method, u, resp, out)
	}, nil
}

package main

import (
	"encoding/json"
	"fmt"
	"io"

	"herald/internal/webpush"
)

const webpushUsage = `Usage: herald webpush keys [flags]

  herald webpush keys   generate a VAPID key pair for providers.webpush
`

// runWebPush is `herald webpush keys`.
func runWebPush(args []string, out io.Writer) error {
	return dispatch("webpush", webpushUsage, map[string]command{"keys": runWebPushKeys}, args, out)
}

// runWebPushKeys generates a VAPID key pair (P-256) and prints it as herald.yaml's
// providers.webpush block, or as JSON. Nothing is stored: the output is the only copy.
func runWebPushKeys(args []string, out io.Writer) error {
	fs := newFlagSet("webpush keys", "[flags]", `
Generates a VAPID key pair (P-256, base64url) for Web Push and prints it as the providers.webpush
block of herald.yaml. Browsers' subscriptions are bound to the public key: keep the pair for as
long as the subscriptions should work. In AWS, store the private key in Secrets Manager and name
it vapid_private_key_secret instead.`)
	asJSON := fs.Bool("json", false, "print {\"public_key\", \"private_key\"} instead of YAML")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef(fs, "unexpected argument %q", pos[0])
	}
	pub, priv, err := webpush.GenerateKeys()
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]string{"public_key": pub, "private_key": priv})
	}
	_, err = fmt.Fprintf(out, `providers:
  webpush:
    vapid_public_key: %s
    vapid_private_key: %s   # keep secret; in AWS: vapid_private_key_secret
    subscriber: "mailto:you@example.com"
`, pub, priv)
	return err
}

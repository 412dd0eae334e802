package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
)

// runDLQ lists queues and their dead letters, shows one queue's dead letters (reason and masked
// payload), and redrives them — through the API, as an admin service.
func runDLQ(args []string) error {
	fs := flag.NewFlagSet("dlq", flag.ContinueOnError)
	apiURL := fs.String("api", envOr("HERALD_API", "http://127.0.0.1:8080"), "Herald API base URL (env HERALD_API)")
	key := fs.String("key", envOr("HERALD_API_KEY", "dev-demo-key"), "API key of an admin service (env HERALD_API_KEY)")
	limit := fs.Int("limit", 10, "dead letters to show")
	// Flags may come before or after the subcommand (every flag here takes a value).
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		if len(args[i]) > 1 && args[i][0] == '-' {
			flags = append(flags, args[i])
			if !strings.Contains(args[i], "=") && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		rest = append(rest, args[i])
	}
	if err := fs.Parse(flags); err != nil {
		return err
	}
	switch {
	case len(rest) == 0:
		var out struct {
			Queues []struct {
				Name  string `json:"name"`
				Stats struct {
					Visible  int `json:"visible"`
					InFlight int `json:"in_flight"`
					Delayed  int `json:"delayed"`
				} `json:"stats"`
				DeadLetters int `json:"dead_letters"`
			} `json:"queues"`
		}
		if err := call(http.MethodGet, *apiURL+"/v1/admin/queues", *key, nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "queue\tvisible\tin flight\tdelayed\tdead letters\t")
		for _, q := range out.Queues {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", q.Name, q.Stats.Visible, q.Stats.InFlight, q.Stats.Delayed, q.DeadLetters)
		}
		return tw.Flush()
	case len(rest) == 2 && rest[0] == "show":
		var out json.RawMessage
		if err := call(http.MethodGet, fmt.Sprintf("%s/v1/admin/queues/%s/dead-letters?limit=%d", *apiURL, url.PathEscape(rest[1]), *limit), *key, nil, &out); err != nil {
			return err
		}
		var pretty any
		_ = json.Unmarshal(out, &pretty)
		b, _ := json.MarshalIndent(pretty, "", "  ")
		fmt.Println(string(b))
		return nil
	case len(rest) == 2 && rest[0] == "redrive":
		var out struct {
			Moved int `json:"moved"`
		}
		if err := call(http.MethodPost, *apiURL+"/v1/admin/queues/"+url.PathEscape(rest[1])+"/redrive", *key, nil, &out); err != nil {
			return err
		}
		fmt.Printf("%d dead letters moved back to %s\n", out.Moved, rest[1])
		return nil
	default:
		return fmt.Errorf("usage: herald dlq [show QUEUE | redrive QUEUE] [--api URL] [--key KEY]")
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

const exportUsage = `Usage: herald export create|list|show|download [flags]

  herald export create --kind deliveries --notification ID   ask for an export file (PENDING at once)
  herald export create --kind notifications|suppressions|audit
  herald export list                                        the latest jobs, newest first
  herald export show ID                                     the job: status, rows, download link once DONE
  herald export download ID [--out FILE]                    wait until DONE and download the file
`

// exportJob is a job as GET /v1/admin/exports/{id} shows it.
type exportJob struct {
	ID                string          `json:"id"`
	Kind              string          `json:"kind"`
	Format            string          `json:"format"`
	Filter            json.RawMessage `json:"filter"`
	Status            string          `json:"status"`
	Rows              int64           `json:"rows"`
	Bytes             int64           `json:"bytes"`
	Error             string          `json:"error,omitempty"`
	CreatedAt         time.Time       `json:"created_at"`
	ExpiresAt         time.Time       `json:"expires_at"`
	DownloadURL       string          `json:"download_url,omitempty"`
	DownloadExpiresAt *time.Time      `json:"download_expires_at,omitempty"`
}

// runExport is `herald export`.
func runExport(args []string, out io.Writer) error {
	return dispatch("export", exportUsage, map[string]command{
		"create": runExportCreate, "list": runExportList, "show": runExportShow, "download": runExportDownload}, args, out)
}

func runExportCreate(args []string, out io.Writer) error {
	fs := newFlagSet("export create", "[flags]", `
Asks for an export file and prints the job (PENDING); "herald export download ID" fetches it.
deliveries: one row per delivery of a realtime notification (addresses masked); notifications:
one row per notification of the calling service, with its counters; suppressions: one row per
suppressed address (masked); audit: the audit log. Needs an admin service's key.`)
	apiURL, key := apiFlags(fs, "API key of an admin service")
	kind := fs.String("kind", "deliveries", "deliveries, notifications, suppressions or audit")
	format := fs.String("format", "csv", "csv or jsonl")
	notification := fs.String("notification", "", "deliveries: the notification id")
	status := fs.String("status", "", "deliveries, notifications: only this status (SENT, FAILED, SKIPPED, …)")
	channel := fs.String("channel", "", "deliveries, notifications, suppressions: only this channel")
	reason := fs.String("reason", "", "deliveries, suppressions: only this reason")
	action := fs.String("action", "", "audit: only this action")
	since := fs.Duration("since", 0, "only rows in this last period, e.g. 24h (0: all; on updated_at of deliveries, created_at of notifications and suppressions)")
	asJSON := fs.Bool("json", false, "print the job as JSON")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef(fs, "unexpected argument %q", pos[0])
	}
	if *since < 0 {
		return usagef(fs, "--since must not be negative")
	}
	body := map[string]any{"kind": *kind, "format": *format}
	for k, v := range map[string]string{"notification_id": *notification, "status": *status, "channel": *channel, "reason": *reason, "action": *action} {
		if v != "" {
			body[k] = v
		}
	}
	if *since > 0 {
		body["from"] = time.Now().Add(-*since).UTC().Format(time.RFC3339)
	}
	b, _ := json.Marshal(body)
	var j exportJob
	if err := call(http.MethodPost, strings.TrimRight(*apiURL, "/")+"/v1/admin/exports", *key, b, &j); err != nil {
		return err
	}
	return printExport(out, j, *asJSON)
}

func runExportList(args []string, out io.Writer) error {
	fs := newFlagSet("export list", "[flags]", `
Prints the latest export jobs of every service, newest first, one a line.`)
	apiURL, key := apiFlags(fs, "API key of an admin service")
	limit := fs.Int("limit", 20, "how many jobs (1–100)")
	asJSON := fs.Bool("json", false, "print the jobs as JSON")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef(fs, "unexpected argument %q", pos[0])
	}
	if *limit < 1 || *limit > 100 {
		return usagef(fs, "--limit must be 1–100")
	}
	var page struct {
		Exports []exportJob `json:"exports"`
	}
	u := strings.TrimRight(*apiURL, "/") + "/v1/admin/exports?limit=" + strconv.Itoa(*limit)
	if err := call(http.MethodGet, u, *key, nil, &page); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(out).Encode(page.Exports)
	}
	for _, j := range page.Exports {
		fmt.Fprintf(out, "%s  %s  %-10s %s %-13s %s  %d rows\n", j.ID, j.CreatedAt.UTC().Format(time.RFC3339), j.Status, j.Format, j.Kind, j.Filter, j.Rows)
	}
	return nil
}

func runExportShow(args []string, out io.Writer) error {
	fs := newFlagSet("export show", "ID [flags]", `
Prints an export job: its status (PENDING, PROCESSING, DONE, FAILED, CANCELED, EXPIRED), rows
and, once DONE, a download link valid for a short while (every call mints a new one).`)
	apiURL, key := apiFlags(fs, "API key of an admin service")
	asJSON := fs.Bool("json", false, "print the job as JSON")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(fs, "want one export id")
	}
	j, err := getExportJob(*apiURL, *key, pos[0])
	if err != nil {
		return err
	}
	return printExport(out, j, *asJSON)
}

func runExportDownload(args []string, out io.Writer) error {
	fs := newFlagSet("export download", "ID [flags]", `
Waits until the export is DONE, then downloads its file through its link to --out (default: the
file name ID.csv or ID.jsonl in the current directory; "-" writes to stdout).`)
	apiURL, key := apiFlags(fs, "API key of an admin service")
	dest := fs.String("out", "", `where to write the file ("-": stdout)`)
	timeout := fs.Duration("timeout", 10*time.Minute, "give up waiting after this long")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(fs, "want one export id")
	}
	deadline := time.Now().Add(*timeout)
	var j exportJob
	for {
		if j, err = getExportJob(*apiURL, *key, pos[0]); err != nil {
			return err
		}
		if j.Status == "DONE" {
			break
		}
		if j.Status != "PENDING" && j.Status != "PROCESSING" {
			return fmt.Errorf("export %s is %s %s", j.ID, j.Status, j.Error)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("export %s still %s after %s", j.ID, j.Status, *timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
	res, err := http.Get(j.DownloadURL)
	if err != nil {
		return fmt.Errorf("download export %s: %w", j.ID, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return fmt.Errorf("download export %s: %s: %s", j.ID, res.Status, strings.TrimSpace(string(b)))
	}
	if *dest == "-" {
		_, err = io.Copy(out, res.Body)
		return err
	}
	name := *dest
	if name == "" {
		name = j.ID + "." + j.Format
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, res.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	fmt.Fprintf(out, "%s: %d rows, %d bytes\n", name, j.Rows, n)
	return nil
}

func getExportJob(apiURL, key, id string) (exportJob, error) {
	var j exportJob
	err := call(http.MethodGet, strings.TrimRight(apiURL, "/")+"/v1/admin/exports/"+url.PathEscape(id), key, nil, &j)
	return j, err
}

func printExport(out io.Writer, j exportJob, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(out).Encode(j)
	}
	fmt.Fprintf(out, "%s  %s  %s %s  %d rows", j.ID, j.Status, j.Kind, j.Format, j.Rows)
	if j.Error != "" {
		fmt.Fprintf(out, "  error: %s", j.Error)
	}
	fmt.Fprintln(out)
	if j.DownloadURL != "" && j.DownloadExpiresAt != nil {
		fmt.Fprintf(out, "download (until %s): %s\n", j.DownloadExpiresAt.Format(time.RFC3339), j.DownloadURL)
	}
	return nil
}

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func runAudience(args []string) error {
	if len(args) == 0 {
		return errors.New("want `audience upload LIST FILE` or `audience show LIST`")
	}
	switch args[0] {
	case "upload":
		return runAudienceUpload(args[1:])
	case "show":
		return runAudienceShow(args[1:])
	}
	return fmt.Errorf("unknown subcommand %q (upload, show)", args[0])
}

// audienceUploadResult is POST /v1/audience-lists/{list}/members's answer.
type audienceUploadResult struct {
	ListID     string `json:"list_id"`
	Appended   int    `json:"appended"`
	Duplicates int    `json:"duplicates"`
	Members    int64  `json:"members"`
	Lines      int    `json:"lines"`
	Rejected   []struct {
		Line   int    `json:"line"`
		Reason string `json:"reason"`
	} `json:"rejected"`
	RejectedTotal int `json:"rejected_total"`
}

func runAudienceUpload(args []string) error {
	fs := flag.NewFlagSet("audience upload", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: herald audience upload [flags] LIST FILE

Appends the user ids in FILE to the calling service's audience list LIST (created on first use):
one id per line, or CSV with the id in the first column (a header "user_id" is skipped).
Blank lines and # comments are skipped, ids repeated in FILE are added once, invalid lines are
reported with their numbers. Uploading the same file again appends it again.
A campaign then targets it with {"kind": "user_list", "list_id": LIST}.

`)
		fs.PrintDefaults()
	}
	apiURL := fs.String("api", envOr("HERALD_API", "http://127.0.0.1:8080"), "Herald API base URL (env HERALD_API)")
	key := fs.String("key", envOr("HERALD_API_KEY", "dev-demo-key"), "API key (env HERALD_API_KEY)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return errors.New("want LIST and FILE")
	}
	list, path := fs.Arg(0), fs.Arg(1)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (the upload needs its size)", path)
	}
	u := strings.TrimRight(*apiURL, "/") + "/v1/audience-lists/" + url.PathEscape(list) + "/members"
	req, err := http.NewRequest(http.MethodPost, u, f)
	if err != nil {
		return err
	}
	req.ContentLength = st.Size() // streamed from the file, never read into memory
	req.Header.Set("Authorization", "Bearer "+*key)
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	if strings.EqualFold(filepath.Ext(path), ".csv") {
		req.Header.Set("Content-Type", "text/csv; charset=utf-8")
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w (is `herald dev` running?)", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("POST %s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	var res audienceUploadResult
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("POST %s: %w", u, err)
	}
	fmt.Printf("%s: %d appended from %d lines (%d duplicates, %d rejected) in %s; the list has %d members\n",
		res.ListID, res.Appended, res.Lines, res.Duplicates, res.RejectedTotal, time.Since(start).Round(time.Millisecond), res.Members)
	for _, r := range res.Rejected {
		fmt.Printf("  line %d: %s\n", r.Line, r.Reason)
	}
	if more := res.RejectedTotal - len(res.Rejected); more > 0 {
		fmt.Printf("  … and %d more rejected lines\n", more)
	}
	return nil
}

func runAudienceShow(args []string) error {
	fs := flag.NewFlagSet("audience show", flag.ContinueOnError)
	apiURL := fs.String("api", envOr("HERALD_API", "http://127.0.0.1:8080"), "Herald API base URL (env HERALD_API)")
	key := fs.String("key", envOr("HERALD_API_KEY", "dev-demo-key"), "API key (env HERALD_API_KEY)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("want one list id: herald audience show LIST")
	}
	var v struct {
		ListID  string `json:"list_id"`
		Members int64  `json:"members"`
	}
	if err := call(http.MethodGet, strings.TrimRight(*apiURL, "/")+"/v1/audience-lists/"+url.PathEscape(fs.Arg(0)), *key, nil, &v); err != nil {
		return err
	}
	fmt.Printf("%s: %d members\n", v.ListID, v.Members)
	return nil
}

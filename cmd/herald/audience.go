package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const audienceUsage = `Usage: herald audience upload LIST FILE [flags]   append the user ids in FILE to the list LIST
       herald audience show LIST [flags]          how many members LIST has

Run "herald audience upload -h" or "herald audience show -h" for their flags.
`

func runAudience(args []string, out io.Writer) error {
	return dispatch("audience", audienceUsage, map[string]command{"upload": runAudienceUpload, "show": runAudienceShow}, args, out)
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

func runAudienceUpload(args []string, out io.Writer) error {
	fs := newFlagSet("audience upload", "LIST FILE [flags]", `
Appends the user ids in FILE to the calling service's audience list LIST (created on first use):
one id per line, or CSV with the id in the first column (a header "user_id" is skipped).
Blank lines and # comments are skipped, ids repeated in FILE are added once, invalid lines are
reported with their numbers. Uploading the same file again appends it again.
A campaign then targets it with {"kind": "user_list", "list_id": LIST}.`)
	apiURL, key := apiFlags(fs, "API key")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef(fs, "want LIST and FILE")
	}
	list, path := pos[0], pos[1]
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
		return fmt.Errorf("POST %s: %w (is Herald running there? --api or HERALD_API names the server)", u, err)
	}
	var res audienceUploadResult
	if err := answer(http.MethodPost, u, resp, &res); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %d appended from %d lines (%d duplicates, %d rejected) in %s; the list has %d members\n",
		res.ListID, res.Appended, res.Lines, res.Duplicates, res.RejectedTotal, time.Since(start).Round(time.Millisecond), res.Members)
	for _, r := range res.Rejected {
		fmt.Fprintf(out, "  line %d: %s\n", r.Line, r.Reason)
	}
	if more := res.RejectedTotal - len(res.Rejected); more > 0 {
		fmt.Fprintf(out, "  … and %d more rejected lines\n", more)
	}
	return nil
}

func runAudienceShow(args []string, out io.Writer) error {
	fs := newFlagSet("audience show", "LIST [flags]", "Prints how many members the calling service's list LIST has (0 for a list never uploaded).")
	apiURL, key := apiFlags(fs, "API key")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(fs, "want one list id: herald audience show LIST")
	}
	var v struct {
		ListID  string `json:"list_id"`
		Members int64  `json:"members"`
	}
	if err := call(http.MethodGet, strings.TrimRight(*apiURL, "/")+"/v1/audience-lists/"+url.PathEscape(pos[0]), *key, nil, &v); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %d members\n", v.ListID, v.Members)
	return nil
}

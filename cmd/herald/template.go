package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
)

const templateUsage = `Usage: herald template put NAME FILE [flags]          store FILE (JSON) as NAME's next version
       herald template show NAME [--version N] [flags]   print a stored version (default the latest)
       herald template preview NAME --data JSON [flags]  render every channel and locale with data

Run "herald template put -h" (show, preview) for their flags.
`

func runTemplate(args []string, out io.Writer) error {
	return dispatch("template", templateUsage, map[string]command{
		"put": runTemplatePut, "show": runTemplateShow, "preview": runTemplatePreview}, args, out)
}

// templatePath is the API path of template name.
func templatePath(apiURL, name string) string {
	return strings.TrimRight(apiURL, "/") + "/v1/templates/" + url.PathEscape(name)
}

// printJSON writes v indented, HTML as it is.
func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runTemplatePut(args []string, out io.Writer) error {
	fs := newFlagSet("template put", "NAME FILE [flags]", `
Stores the template in FILE as the next version of the calling service's template NAME (1 for a
new name) and prints the version. FILE is JSON:

  {"channels": {"push": {"title": "Order {{order_id}}", "body": "…"}, "email": {"title": "…", "html": "…"}},
   "locales": {"ko": {"body": "주문 {{order_id}}…"}}, "default_locale": "ko",
   "variables": [{"name": "order_id"}, {"name": "coupon", "optional": true}]}

Texts are Mustache; values are HTML-escaped in email html only. A problem names its field
(channels.email.html, locales.ko.body, variables[2]).`)
	apiURL, key := apiFlags(fs, "API key")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef(fs, "want NAME and FILE")
	}
	body, err := os.ReadFile(pos[1])
	if err != nil {
		return err
	}
	var v struct {
		Name    string `json:"name"`
		Version int    `json:"version"`
	}
	if err := call(http.MethodPut, templatePath(*apiURL, pos[0]), *key, body, &v); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: stored version %d\n", v.Name, v.Version)
	return nil
}

func runTemplateShow(args []string, out io.Writer) error {
	fs := newFlagSet("template show", "NAME [--version N] [flags]", "Prints a version of the calling service's template NAME as JSON: the latest, or --version N.")
	apiURL, key := apiFlags(fs, "API key")
	version := fs.Int("version", 0, "the version to show (default the latest)")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(fs, "want one template name: herald template show NAME")
	}
	if *version < 0 {
		return usagef(fs, "--version is 1 or more")
	}
	u := templatePath(*apiURL, pos[0])
	if *version > 0 {
		u += "?version=" + strconv.Itoa(*version)
	}
	var v json.RawMessage
	if err := call(http.MethodGet, u, *key, nil, &v); err != nil {
		return err
	}
	return printIndented(out, v)
}

func runTemplatePreview(args []string, out io.Writer) error {
	fs := newFlagSet("template preview", "NAME --data JSON [--version N] [flags]", `
Renders every channel and locale of the calling service's template NAME with the variables in
--data (a JSON object, e.g. '{"order_id": "1001"}') and prints them as JSON, with the variables
the data lacks listed by field under "missing". Nothing is sent.`)
	apiURL, key := apiFlags(fs, "API key")
	data := fs.String("data", "{}", "the variables, as a JSON object")
	version := fs.Int("version", 0, "the version to render (default the latest)")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(fs, "want one template name: herald template preview NAME --data JSON")
	}
	if *version < 0 {
		return usagef(fs, "--version is 1 or more")
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(*data), &d); err != nil || d == nil {
		return usagef(fs, "--data must be a JSON object, e.g. '{\"order_id\": \"1001\"}'")
	}
	body, err := json.Marshal(map[string]any{"data": d})
	if err != nil {
		return err
	}
	u := templatePath(*apiURL, pos[0]) + "/preview"
	if *version > 0 {
		u += "?version=" + strconv.Itoa(*version)
	}
	var v json.RawMessage
	if err := call(http.MethodPost, u, *key, body, &v); err != nil {
		return err
	}
	return printIndented(out, v)
}

// printIndented writes a JSON answer indented, without escaping its HTML.
func printIndented(out io.Writer, raw json.RawMessage) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return printJSON(out, v)
}

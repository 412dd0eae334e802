package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cbroglie/mustache"
)

func init() {
	// A variable a template uses and the data lacks is an error, never an empty string: a
	// message reading "Your order  shipped" is worse than a 400. The library keeps this as a
	// package global (it has no per-template option); Herald is its only user in the process.
	// Optional variables are given "" explicitly before rendering (see renderData).
	mustache.AllowMissingVariables = false
}

// Limits on a template.
const (
	MaxTemplateName      = 128
	MaxTemplateVariables = 100
	// MaxTemplateBytes bounds a template's content as JSON: a version is one DynamoDB item
	// (400 KB), so several 256 KB HTML variants can't be stored as one template.
	MaxTemplateBytes = 350 * 1024
)

var (
	templateNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	variableNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	missingVarRe   = regexp.MustCompile(`^missing variable "(.*)"$`)
)

// TemplateVariable is a variable a template declares. Variables are required unless Optional:
// a send that lacks a required one is refused; an optional one missing renders as "".
type TemplateVariable struct {
	Name     string `json:"name"`
	Optional bool   `json:"optional,omitempty"`
}

// TemplateSpec is what a caller stores as a template version: per-channel content and
// per-locale variants (the shapes of a SendRequest's channel_content and localized), written in
// Mustache ({{order_id}}), and the variables they use.
//
// DefaultLocale names the locale whose variant is also the content of recipients in any other
// locale; without it, those recipients get the channel content alone.
type TemplateSpec struct {
	Channels      map[Channel]Content `json:"channels,omitempty"`
	Locales       map[string]Content  `json:"locales,omitempty"`
	DefaultLocale string              `json:"default_locale,omitempty"`
	Variables     []TemplateVariable  `json:"variables,omitempty"`
}

// Template is one stored, immutable version of a service's named template.
type Template struct {
	Service string `json:"service"`
	Name    string `json:"name"`
	Version int    `json:"version"` // 1, 2, 3… in the order they were stored
	TemplateSpec
	CreatedAt time.Time `json:"created_at"`
}

// TemplateStore keeps templates, each name's versions immutable, per service.
type TemplateStore interface {
	// PutTemplateVersion stores t as the next version of (t.Service, t.Name) — 1 for a new name,
	// one more than the latest otherwise — and returns it as stored. The version is assigned
	// atomically: concurrent puts of one name get distinct versions. t.Version is ignored;
	// a zero t.CreatedAt is the store's now.
	PutTemplateVersion(ctx context.Context, t *Template) (*Template, error)
	// GetTemplate returns version of (service, name), the latest for version 0. ENOTFOUND when
	// the name or that version does not exist for service.
	GetTemplate(ctx context.Context, service, name string, version int) (*Template, error)
	// ListTemplates pages the latest version of each of service's templates, the most recently
	// stored first (ties by name, descending). cursor "" starts; next "" means no more.
	ListTemplates(ctx context.Context, service, cursor string, limit int) (ts []Template, next string, err error)
}

// ValidTemplateName reports whether s can name a template.
func ValidTemplateName(s string) bool {
	return len(s) <= MaxTemplateName && templateNameRe.MatchString(s)
}

// templateField is one text of a template: where it is (the field path) and whether it is HTML.
type templateField struct {
	path string
	text string
	html bool
	set  func(c *Content, s string)
}

// fieldsOf lists the texts of c under prefix ("channels.email") in a fixed order: title, body,
// html, link, image_url, then the data values by key.
func fieldsOf(prefix string, c Content) []templateField {
	fs := []templateField{
		{prefix + ".title", c.Title, false, func(c *Content, s string) { c.Title = s }},
		{prefix + ".body", c.Body, false, func(c *Content, s string) { c.Body = s }},
		{prefix + ".html", c.HTML, true, func(c *Content, s string) { c.HTML = s }},
		{prefix + ".link", c.Link, false, func(c *Content, s string) { c.Link = s }},
		{prefix + ".image_url", c.ImageURL, false, func(c *Content, s string) { c.ImageURL = s }},
	}
	for _, k := range slices.Sorted(maps.Keys(c.Data)) {
		fs = append(fs, templateField{prefix + ".data." + k, c.Data[k], false, func(c *Content, s string) {
			d := maps.Clone(c.Data)
			d[k] = s
			c.Data = d
		}})
	}
	return fs
}

// sections lists every content of the template with its field prefix, in a fixed order.
func (t *TemplateSpec) sections() []struct {
	prefix  string
	channel Channel
	locale  string
	c       Content
} {
	type sec = struct {
		prefix  string
		channel Channel
		locale  string
		c       Content
	}
	var out []sec
	for _, ch := range Channels {
		if c, ok := t.Channels[ch]; ok {
			out = append(out, sec{"channels." + string(ch), ch, "", c})
		}
	}
	for _, l := range slices.Sorted(maps.Keys(t.Locales)) {
		out = append(out, sec{"locales." + l, "", l, t.Locales[l]})
	}
	return out
}

// noPartials refuses every partial: a template is one stored text, and the library's default
// provider would read partials from the server's files.
var noPartials = &mustache.StaticProvider{}

// parseField compiles one text: HTML escapes the values it inserts, text does not.
func parseField(f templateField) (*mustache.Template, error) {
	return mustache.ParseStringPartialsRaw(f.text, noPartials, !f.html)
}

// Validate checks a template as stored, naming the field of the first problem:
// "channels.email.html" (including Mustache syntax errors, with their line), "locales.ko.body",
// "variables[2]".
func (t *TemplateSpec) Validate() error {
	if len(t.Channels) == 0 && len(t.Locales) == 0 {
		return FieldError("channels", "a template needs content: channels (push, email, sms, inbox, alimtalk) or locales")
	}
	for _, ch := range slices.Sorted(maps.Keys(t.Channels)) {
		if !ch.Valid() {
			return FieldError("channels."+string(ch), "unknown channel %q (want push, email, sms, inbox or alimtalk)", ch)
		}
	}
	for _, l := range slices.Sorted(maps.Keys(t.Locales)) {
		if !ValidLocale(l) {
			return FieldError("locales."+l, "not a locale tag (e.g. \"ko\", \"en-US\")")
		}
	}
	if t.DefaultLocale != "" {
		if _, ok := t.Locales[t.DefaultLocale]; !ok {
			return FieldError("default_locale", "names no locale of the template (locales.%s is missing)", t.DefaultLocale)
		}
	}
	if len(t.Variables) > MaxTemplateVariables {
		return FieldError(fmt.Sprintf("variables[%d]", MaxTemplateVariables), "at most %d variables", MaxTemplateVariables)
	}
	declared := map[string]bool{}
	for i, v := range t.Variables {
		f := fmt.Sprintf("variables[%d]", i)
		if !variableNameRe.MatchString(v.Name) || len(v.Name) > 64 {
			return FieldError(f+".name", "a variable name is 1–64 letters, digits and _, not starting with a digit")
		}
		if declared[v.Name] {
			return FieldError(f, "variable %q is declared twice", v.Name)
		}
		declared[v.Name] = true
	}
	size := 0
	for _, s := range t.sections() {
		src := s.c
		if strings.Contains(src.ImageURL, "{{") {
			src.ImageURL = "" // a URL made of placeholders is checked once rendered
		}
		if err := validateContent(s.prefix, src); err != nil {
			return err
		}
		if s.channel == ChannelAlimTalk {
			if err := validateAlimTalk(s.prefix, s.c); err != nil {
				return err
			}
			for _, name := range AlimTalkVariables(s.c.Body) {
				if !declared[name] {
					return FieldError(s.prefix+".body", "uses #{%s}, which is not declared in variables", name)
				}
			}
		}
		b, _ := json.Marshal(s.c)
		if size += len(b); size > MaxTemplateBytes {
			return FieldError(s.prefix, "the template's content is over %d KB as JSON", MaxTemplateBytes/1024)
		}
		for _, f := range fieldsOf(s.prefix, s.c) {
			if f.text == "" {
				continue
			}
			tmpl, err := parseField(f)
			if err != nil {
				return FieldError(f.path, "template syntax: %v", err)
			}
			if err := checkTags(f.path, tmpl.Tags(), declared, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTags refuses partials anywhere and, at the top level (where names are looked up in the
// send's data), a name that is not declared. Names inside a section may be the section's own
// (an item of a list), so they are not checked.
func checkTags(field string, tags []mustache.Tag, declared map[string]bool, top bool) error {
	for _, tag := range tags {
		switch tag.Type() {
		case mustache.Partial:
			return FieldError(field, "partials ({{> %s}}) are not supported", tag.Name())
		case mustache.Variable, mustache.Section, mustache.InvertedSection:
			root, _, _ := strings.Cut(tag.Name(), ".")
			if top && root != "" && !declared[root] {
				return FieldError(field, "uses {{%s}}, which is not declared in variables", tag.Name())
			}
			if tag.Type() != mustache.Variable {
				if err := checkTags(field, tag.Tags(), declared, false); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Rendered is a template rendered with a send's data: the content of a SendRequest.
type Rendered struct {
	Content        Content
	ChannelContent map[Channel]Content
	Localized      map[string]Content
}

// renderData is the data a template renders with: numbers written as they were sent (JSON
// numbers arrive as float64, which would print 12345678901 as 1.2345678901e+10), and every
// optional variable the data lacks set to "".
func (t *TemplateSpec) renderData(data map[string]any) map[string]any {
	out := make(map[string]any, len(data)+len(t.Variables))
	for k, v := range data {
		out[k] = plainNumbers(v)
	}
	for _, v := range t.Variables {
		if _, ok := out[v.Name]; !ok && v.Optional {
			out[v.Name] = ""
		}
	}
	return out
}

func plainNumbers(v any) any {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = plainNumbers(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = plainNumbers(e)
		}
		return s
	}
	return v
}

// Render renders every content of the template with data. A required variable missing from
// data, or a name a section's text looks up and data lacks, is an EINVALID naming
// "template.data.<name>".
//
// Every channel's content is Mustache, except the alimtalk channel's body: its #{name}
// placeholders are Kakao's (the approved text, compared by Kakao with what is sent), filled from
// data by fillAlimTalk, which also adds each value as the Data key #{name} (Solapi's variables).
func (t *TemplateSpec) Render(data map[string]any) (*Rendered, error) {
	for _, v := range t.Variables {
		if _, ok := data[v.Name]; !ok && !v.Optional {
			return nil, FieldError("template.data."+v.Name, "the template needs variable %q", v.Name)
		}
	}
	d := t.renderData(data)
	out := &Rendered{}
	for _, s := range t.sections() {
		c := s.c
		for _, f := range fieldsOf(s.prefix, s.c) {
			if f.text == "" {
				continue
			}
			text, err := renderField(f, d)
			if err != nil {
				return nil, err
			}
			f.set(&c, text)
		}
		if s.channel == ChannelAlimTalk {
			// Kakao's own placeholders, not Mustache: filled here, and sent as variables too.
			var err error
			if c, _, err = fillAlimTalk(s.prefix, c, d, false); err != nil {
				return nil, err
			}
		}
		// The rendered text is checked like sent content: a value may carry what a title must
		// not (a line break) or make a body too long.
		if err := validateContent(s.prefix, c); err != nil {
			var e *Error
			if errors.As(err, &e) {
				return nil, FieldError("template.data", "rendered %s: %s", e.Field, e.Message)
			}
			return nil, err
		}
		if s.channel != "" {
			if out.ChannelContent == nil {
				out.ChannelContent = map[Channel]Content{}
			}
			out.ChannelContent[s.channel] = c
		} else {
			if out.Localized == nil {
				out.Localized = map[string]Content{}
			}
			out.Localized[s.locale] = c
		}
	}
	return out, nil
}

// renderField renders one text with d (see Render).
func renderField(f templateField, d map[string]any) (string, error) {
	tmpl, err := parseField(f)
	if err != nil { // validated when stored; a failure here is a damaged store
		return "", Wrap(EINTERNAL, err, "stored template field %s does not parse", f.path)
	}
	if err := checkDataUse(f.path, "", tmpl.Tags(), []any{d}); err != nil {
		return "", err
	}
	// A section over a long list in the data repeats its text once per item: the output is
	// capped as it is written, so a small request can't make a huge string before the size
	// checks see it.
	w := &cappedWriter{max: MaxHTMLBytes}
	err = tmpl.FRender(w, d)
	if w.over || errors.Is(err, errRenderTooLarge) { // the library drops some write errors: over is the truth
		return "", FieldError("template.data", "%s renders to more than %d bytes", f.path, MaxHTMLBytes)
	}
	s := w.b.String()
	if err != nil {
		if m := missingVarRe.FindStringSubmatch(err.Error()); m != nil {
			return "", FieldError("template.data."+m[1], "%s uses variable %q, which the data lacks", f.path, m[1])
		}
		return "", FieldError("template.data", "%s: %v", f.path, err)
	}
	return s, nil
}

// TemplatePreview is a template rendered for inspection: each content as Render would make it,
// with what the data lacked rendered empty and listed under Missing by field.
type TemplatePreview struct {
	Channels map[Channel]Content `json:"channels"`
	Locales  map[string]Content  `json:"locales"`
	Missing  map[string][]string `json:"missing"`
}

// Preview renders every content of the template with data, as far as it goes: a variable the
// data lacks renders as "" and is reported under its field in Missing.
func (t *TemplateSpec) Preview(data map[string]any) TemplatePreview {
	p := TemplatePreview{Channels: map[Channel]Content{}, Locales: map[string]Content{}, Missing: map[string][]string{}}
	base := t.renderData(data)
	for _, s := range t.sections() {
		c := s.c
		for _, f := range fieldsOf(s.prefix, s.c) {
			if f.text == "" {
				continue
			}
			d := maps.Clone(base)
			var missing []string
			text := ""
			// Each round finds one missing name; a field has few. The bound stops a name the
			// library reports missing even when given (nested lookups) from looping.
			for range MaxTemplateVariables {
				r, err := renderField(f, d)
				if err == nil {
					text = r
					break
				}
				var e *Error
				if !errors.As(err, &e) {
					break
				}
				name, isVar := strings.CutPrefix(e.Field, "template.data.")
				if !isVar || slices.Contains(missing, name) {
					break
				}
				missing = append(missing, name)
				setMissing(d, name)
			}
			if len(missing) > 0 {
				p.Missing[f.path] = missing
			}
			f.set(&c, text)
		}
		if s.channel == ChannelAlimTalk {
			filled, missing, _ := fillAlimTalk(s.prefix, c, base, true)
			c = filled
			if len(missing) > 0 {
				p.Missing[s.prefix+".body"] = append(p.Missing[s.prefix+".body"], missing...)
			}
		}
		if s.channel != "" {
			p.Channels[s.channel] = c
		} else {
			p.Locales[s.locale] = c
		}
	}
	return p
}

// setMissing sets the name the library reported missing to "" where a lookup looks first: a
// top-level key (a dotted lookup fails on its first missing segment).
func setMissing(d map[string]any, name string) {
	if _, ok := d[name]; !ok {
		d[name] = ""
	}
}

// TemplateRef is a send's "template": the stored template to render, at Version (0: the latest),
// with Data.
type TemplateRef struct {
	Name    string         `json:"name"`
	Version int            `json:"version,omitempty"`
	Data    map[string]any `json:"data,omitempty"`
}

// UnmarshalJSON reads a TemplateRef, refusing a version written as 0 or less: leaving it out
// means the latest, and a 0 written out would otherwise send the latest silently. Unknown keys
// are refused, each naming its key (fields relative to the reference).
func (r *TemplateRef) UnmarshalJSON(b []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	for k := range keys {
		if k != "name" && k != "version" && k != "data" {
			return FieldError(k, "unknown field %q (keys: name, version, data)", k)
		}
	}
	var raw struct {
		Name    string         `json:"name"`
		Version *int           `json:"version"`
		Data    map[string]any `json:"data"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw.Version != nil && *raw.Version < 1 {
		return FieldError("version", "a version is 1 or more (leave it out for the latest)")
	}
	*r = TemplateRef{Name: raw.Name, Data: raw.Data}
	if raw.Version != nil {
		r.Version = *raw.Version
	}
	return nil
}

// IsZero reports whether c has nothing in it.
func (c Content) IsZero() bool {
	return c.Title == "" && c.Body == "" && c.HTML == "" && c.Link == "" && c.ImageURL == "" && len(c.Data) == 0
}

// CheckContentOrTemplate refuses a request that gives both content and a template; which one
// to name is the one to drop.
func CheckContentOrTemplate(ref *TemplateRef, content Content, others ...bool) error {
	if ref == nil {
		return nil
	}
	given := !content.IsZero()
	for _, o := range others {
		given = given || o
	}
	if given {
		return FieldError("template", "give either content or a template, not both")
	}
	if ref.Name == "" {
		return FieldError("template.name", "the name of a stored template is required")
	}
	if !ValidTemplateName(ref.Name) {
		return FieldError("template.name", "not a template name (1–%d letters, digits, '_', '.', '-')", MaxTemplateName)
	}
	if ref.Version < 0 {
		return FieldError("template.version", "a version is 1 or more (leave it out for the latest)")
	}
	return nil
}

// LoadTemplate reads the template ref names for service: an unknown name or version is an
// EINVALID naming template.name or template.version (the request is what is wrong).
func LoadTemplate(ctx context.Context, store TemplateStore, service string, ref *TemplateRef) (*Template, error) {
	t, err := store.GetTemplate(ctx, service, ref.Name, ref.Version)
	switch {
	case IsCode(err, ENOTFOUND) && ref.Version > 0:
		if _, lerr := store.GetTemplate(ctx, service, ref.Name, 0); lerr == nil {
			return nil, FieldError("template.version", "template %q has no version %d", ref.Name, ref.Version)
		}
		return nil, FieldError("template.name", "no template named %q", ref.Name)
	case IsCode(err, ENOTFOUND):
		return nil, FieldError("template.name", "no template named %q", ref.Name)
	case err != nil:
		return nil, fmt.Errorf("read template %s: %w", ref.Name, err)
	}
	return t, nil
}

// Prepare is what the API and ingest both do with a send request before it becomes a
// notification: render its template, if it names one (ApplyTemplate), and validate it. The
// fingerprint is of the request as sent — with a template, before the rendering, so a retry
// matches it whatever the template's version then — and template and version name what was
// rendered ("" and 0 for content sent as it is). known is a fingerprint already taken of the
// request (the API's, which ingest finds in the message's attributes): it is returned as it is,
// and the request is not encoded again to take it; "" takes it here.
func (r *SendRequest) Prepare(ctx context.Context, store TemplateStore, service string, now time.Time, known string) (fingerprint, template string, version int, err error) {
	fingerprint = known
	if r.Template != nil {
		if fingerprint == "" {
			fingerprint = RequestFingerprint(r)
		}
		if template, version, err = r.ApplyTemplate(ctx, store, service); err != nil {
			return "", "", 0, err
		}
	}
	if err := r.Validate(now); err != nil {
		return "", "", 0, err
	}
	if fingerprint == "" {
		fingerprint = RequestFingerprint(r)
	}
	return fingerprint, template, version, nil
}

// ApplyTemplate renders r's template (r.Template) from store into r's content, as if the caller
// had sent it, and clears r.Template; a request without one is left as it is. It returns the
// template's name and the version rendered. Errors name the request's fields: template,
// template.name, template.version, template.data.<var>, locale, channels[i].
func (r *SendRequest) ApplyTemplate(ctx context.Context, store TemplateStore, service string) (string, int, error) {
	ref := r.Template
	if err := CheckContentOrTemplate(ref, r.Content, len(r.ChannelContent) > 0, len(r.Localized) > 0); err != nil || ref == nil {
		return "", 0, err
	}
	t, out, err := RenderTemplate(ctx, store, service, ref, r.Channels, "locale", r.Locale)
	if err != nil {
		return "", 0, err
	}
	r.Content, r.ChannelContent, r.Localized, r.Template = out.Content, out.ChannelContent, out.Localized, nil
	return t.Name, t.Version, nil
}

// RenderTemplate loads the template ref names for service and renders it with ref.Data for a
// send on channels in locale (named by localeField; "" for none): the base content is the
// template's default locale (or, for a template of locales alone, the send's locale).
func RenderTemplate(ctx context.Context, store TemplateStore, service string, ref *TemplateRef, channels []Channel, localeField, locale string) (*Template, *Rendered, error) {
	t, err := LoadTemplate(ctx, store, service, ref)
	if err != nil {
		return nil, nil, err
	}
	if err := t.CheckLocale(localeField, locale); err != nil {
		return nil, nil, err
	}
	out, err := t.Render(ref.Data)
	if err != nil {
		return nil, nil, err
	}
	base := t.baseLocale(locale)
	out.Content = out.Localized[base]
	if err := t.CheckChannels(channels, base); err != nil {
		return nil, nil, err
	}
	return t, out, nil
}

// baseLocale is the locale whose variant is the send's base content — what a recipient in a
// locale without a variant gets, under the channel content: the template's default_locale, or,
// for a template without channel content, the variant of the send's locale. "" for none.
func (t *Template) baseLocale(locale string) string {
	if t.DefaultLocale != "" {
		return t.DefaultLocale
	}
	if len(t.Channels) > 0 || locale == "" {
		return ""
	}
	if _, ok := t.Locales[locale]; ok {
		return locale
	}
	if len(locale) > 2 {
		if _, ok := t.Locales[locale[:2]]; ok {
			return locale[:2]
		}
	}
	return ""
}

// CheckLocale refuses a send's locale (named by field) for which the template has neither a
// variant nor a default (channel content or a default_locale); a template of locales alone
// needs one of them named.
func (t *Template) CheckLocale(field, locale string) error {
	if len(t.Channels) > 0 || t.DefaultLocale != "" || t.baseLocale(locale) != "" {
		return nil
	}
	locales := strings.Join(slices.Sorted(maps.Keys(t.Locales)), ", ")
	if locale == "" {
		return FieldError(field, "template %q version %d has content only for locales (%s) and no default_locale: name one",
			t.Name, t.Version, locales)
	}
	return FieldError(field, "template %q version %d has no content for locale %q and no default (locales: %s)",
		t.Name, t.Version, locale, locales)
}

// CheckChannels refuses a channel the template has no content for — a body (or, for email, an
// HTML body) and, for email, a title — from its channel content over the base locale's variant.
func (t *Template) CheckChannels(channels []Channel, base string) error {
	for i, ch := range channels {
		c := t.Locales[base].merge(t.Channels[ch])
		if c.Body == "" && (ch != ChannelEmail || c.HTML == "") {
			return FieldError(fmt.Sprintf("channels[%d]", i), "template %q version %d has no body for channel %q", t.Name, t.Version, ch)
		}
		if ch == ChannelEmail && c.Title == "" {
			return FieldError(fmt.Sprintf("channels[%d]", i), "template %q version %d has no title (the subject) for channel email", t.Name, t.Version)
		}
	}
	return nil
}

var errRenderTooLarge = errors.New("rendered text too large")

// cappedWriter keeps what is written to it up to max bytes and refuses more, remembering that
// it did.
type cappedWriter struct {
	b    strings.Builder
	max  int
	over bool
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if w.over || w.b.Len()+len(p) > w.max {
		w.over = true
		return 0, errRenderTooLarge
	}
	return w.b.Write(p)
}

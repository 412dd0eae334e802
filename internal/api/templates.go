package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"herald/internal/notify"
)

const (
	defaultTemplatePage = 20
	maxTemplatePage     = 100
)

// templateView is a stored template version: PUT and GET /v1/templates/{name}.
type templateView struct {
	Name          string                            `json:"name"`
	Version       int                               `json:"version"`
	Channels      map[notify.Channel]notify.Content `json:"channels"`
	Locales       map[string]notify.Content         `json:"locales"`
	DefaultLocale string                            `json:"default_locale,omitempty"`
	Variables     []notify.TemplateVariable         `json:"variables"`
	CreatedAt     time.Time                         `json:"created_at"`
}

func toTemplateView(t *notify.Template) templateView {
	v := templateView{Name: t.Name, Version: t.Version, Channels: t.Channels, Locales: t.Locales,
		DefaultLocale: t.DefaultLocale, Variables: t.Variables, CreatedAt: utc(t.CreatedAt)}
	if v.Channels == nil {
		v.Channels = map[notify.Channel]notify.Content{}
	}
	if v.Locales == nil {
		v.Locales = map[string]notify.Content{}
	}
	if v.Variables == nil {
		v.Variables = []notify.TemplateVariable{}
	}
	return v
}

// templateSummary is one entry of GET /v1/templates: a template at its latest version.
type templateSummary struct {
	Name      string                    `json:"name"`
	Version   int                       `json:"version"`
	Variables []notify.TemplateVariable `json:"variables"`
	CreatedAt time.Time                 `json:"created_at"`
}

type templatePage struct {
	Templates  []templateSummary `json:"templates"`
	NextCursor string            `json:"next_cursor"`
}

// previewRequest is POST /v1/templates/{name}/preview.
type previewRequest struct {
	Data map[string]any `json:"data"`
}

// previewView answers it: every content of the template rendered with the data, and the
// variables the data lacked, by field.
type previewView struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	notify.TemplatePreview
}

// templateName is the {name} of the path, checked.
func templateName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if !notify.ValidTemplateName(name) {
		return "", notify.FieldError("name", "not a template name (1–%d letters, digits, '_', '.', '-', starting with a letter or digit)", notify.MaxTemplateName)
	}
	return name, nil
}

// queryVersion is ?version=: 0 (the latest) when absent.
func queryVersion(r *http.Request) (int, error) {
	s := r.URL.Query().Get("version")
	if s == "" {
		return 0, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return 0, notify.FieldError("version", "a version is an integer of 1 or more")
	}
	return v, nil
}

// putTemplate stores the body as the next version of the caller's template.
func (s *server) putTemplate(w http.ResponseWriter, r *http.Request) error {
	name, err := templateName(r)
	if err != nil {
		return err
	}
	var spec notify.TemplateSpec
	if err := s.decode(w, r, &spec); err != nil {
		return err
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	t, err := s.store.PutTemplateVersion(r.Context(), &notify.Template{Service: serviceOf(r), Name: name,
		TemplateSpec: spec, CreatedAt: s.clock.Now()})
	if err != nil {
		return fmt.Errorf("put template %s: %w", name, err)
	}
	w.Header().Set("Location", fmt.Sprintf("/v1/templates/%s?version=%d", url.PathEscape(name), t.Version))
	writeJSON(w, http.StatusCreated, toTemplateView(t))
	return nil
}

// ownTemplate reads the caller's template at ?version= (latest when absent); another
// service's template does not exist for the caller.
func (s *server) ownTemplate(r *http.Request) (*notify.Template, error) {
	name, err := templateName(r)
	if err != nil {
		return nil, err
	}
	version, err := queryVersion(r)
	if err != nil {
		return nil, err
	}
	t, err := s.store.GetTemplate(r.Context(), serviceOf(r), name, version)
	switch {
	case notify.IsCode(err, notify.ENOTFOUND) && version > 0:
		return nil, notify.Errorf(notify.ENOTFOUND, "template %s has no version %d", name, version)
	case notify.IsCode(err, notify.ENOTFOUND):
		return nil, notify.Errorf(notify.ENOTFOUND, "template %s not found", name)
	case err != nil:
		return nil, fmt.Errorf("get template %s: %w", name, err)
	}
	return t, nil
}

func (s *server) getTemplate(w http.ResponseWriter, r *http.Request) error {
	t, err := s.ownTemplate(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toTemplateView(t))
	return nil
}

func (s *server) listTemplates(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryLimit(r, defaultTemplatePage, maxTemplatePage)
	if err != nil {
		return err
	}
	service := serviceOf(r)
	cursor, err := s.queryCursor(r, "templates", service)
	if err != nil {
		return err
	}
	ts, next, err := s.store.ListTemplates(r.Context(), service, cursor, limit)
	if err != nil {
		return fmt.Errorf("list templates: %w", err)
	}
	page := templatePage{Templates: make([]templateSummary, 0, len(ts)), NextCursor: s.sealCursor("templates", service, next)}
	for _, t := range ts {
		vars := t.Variables
		if vars == nil {
			vars = []notify.TemplateVariable{}
		}
		page.Templates = append(page.Templates, templateSummary{Name: t.Name, Version: t.Version, Variables: vars, CreatedAt: utc(t.CreatedAt)})
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *server) previewTemplate(w http.ResponseWriter, r *http.Request) error {
	t, err := s.ownTemplate(r)
	if err != nil {
		return err
	}
	var req previewRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, previewView{Name: t.Name, Version: t.Version, TemplatePreview: t.Preview(req.Data)})
	return nil
}

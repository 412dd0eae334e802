package herald

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// Sender sends notifications: HTTPTransport (the API) and SQSTransport (the ingest queue).
type Sender interface {
	// Send sends one request; its IdempotencyKey is required.
	Send(ctx context.Context, req *SendRequest) (*Accepted, error)
	// SendBatch sends several, each its own notification under its own key.
	SendBatch(ctx context.Context, reqs []*SendRequest) ([]Accepted, error)
}

var (
	_ Sender = (*HTTPTransport)(nil)
	_ Sender = (*SQSTransport)(nil)
)

// Client sends through its Sender and reaches every other route over its HTTP transport.
type Client struct {
	Sender
	HTTP *HTTPTransport
}

// New is a client that sends through sender (nil: through h) and manages users, templates and
// campaigns through h.
func New(h *HTTPTransport, sender Sender) *Client {
	if sender == nil {
		sender = h
	}
	return &Client{Sender: sender, HTTP: h}
}

func seg(s string) string { return url.PathEscape(s) }

// GetNotification is GET /v1/notifications/{id}: status, counts and the first page of deliveries.
func (c *Client) GetNotification(ctx context.Context, id string) (*Notification, error) {
	var n Notification
	_, err := c.HTTP.do(ctx, http.MethodGet, "/v1/notifications/"+seg(id), nil, nil, &n)
	return &n, err
}

// CancelNotification is DELETE /v1/notifications/{id}: a reserved send that has not gone out.
func (c *Client) CancelNotification(ctx context.Context, id string) error {
	_, err := c.HTTP.do(ctx, http.MethodDelete, "/v1/notifications/"+seg(id), nil, nil, nil)
	return err
}

// CreateCampaign is POST /v1/campaigns; its IdempotencyKey is required, as a send's is.
func (c *Client) CreateCampaign(ctx context.Context, req *CampaignRequest) (*CampaignAccepted, error) {
	if err := checkKey(req.IdempotencyKey, ""); err != nil {
		return nil, err
	}
	var a CampaignAccepted
	status, err := c.HTTP.do(ctx, http.MethodPost, "/v1/campaigns", nil, req, &a)
	if err != nil {
		return nil, err
	}
	a.Replayed = status == http.StatusOK
	return &a, nil
}

// PutDevice is PUT /v1/users/{user}/devices/{token}.
func (c *Client) PutDevice(ctx context.Context, user, token string, req *DeviceRequest) (*Device, error) {
	var d Device
	_, err := c.HTTP.do(ctx, http.MethodPut, "/v1/users/"+seg(user)+"/devices/"+seg(token), nil, req, &d)
	return &d, err
}

// DeleteDevice is DELETE /v1/users/{user}/devices/{token}.
func (c *Client) DeleteDevice(ctx context.Context, user, token string) error {
	_, err := c.HTTP.do(ctx, http.MethodDelete, "/v1/users/"+seg(user)+"/devices/"+seg(token), nil, nil, nil)
	return err
}

// ListDevices is GET /v1/users/{user}/devices, tokens masked.
func (c *Client) ListDevices(ctx context.Context, user string) (*DeviceList, error) {
	var l DeviceList
	_, err := c.HTTP.do(ctx, http.MethodGet, "/v1/users/"+seg(user)+"/devices", nil, nil, &l)
	return &l, err
}

// PutContacts is PUT /v1/users/{user}/contacts: it replaces the contact.
func (c *Client) PutContacts(ctx context.Context, user string, req *ContactsRequest) (*Contacts, error) {
	var out Contacts
	_, err := c.HTTP.do(ctx, http.MethodPut, "/v1/users/"+seg(user)+"/contacts", nil, req, &out)
	return &out, err
}

// GetContacts is GET /v1/users/{user}/contacts, masked.
func (c *Client) GetContacts(ctx context.Context, user string) (*Contacts, error) {
	var out Contacts
	_, err := c.HTTP.do(ctx, http.MethodGet, "/v1/users/"+seg(user)+"/contacts", nil, nil, &out)
	return &out, err
}

// PutPreferences is PUT /v1/users/{user}/preferences: it replaces them.
func (c *Client) PutPreferences(ctx context.Context, user string, req *PreferencesRequest) (*Preferences, error) {
	var out Preferences
	_, err := c.HTTP.do(ctx, http.MethodPut, "/v1/users/"+seg(user)+"/preferences", nil, req, &out)
	return &out, err
}

// GetPreferences is GET /v1/users/{user}/preferences.
func (c *Client) GetPreferences(ctx context.Context, user string) (*Preferences, error) {
	var out Preferences
	_, err := c.HTTP.do(ctx, http.MethodGet, "/v1/users/"+seg(user)+"/preferences", nil, nil, &out)
	return &out, err
}

// PutWebPushSubscription is PUT /v1/users/{user}/web-push-subscriptions.
func (c *Client) PutWebPushSubscription(ctx context.Context, user string, req *WebPushSubscriptionRequest) (*WebPushSubscription, error) {
	var out WebPushSubscription
	_, err := c.HTTP.do(ctx, http.MethodPut, "/v1/users/"+seg(user)+"/web-push-subscriptions", nil, req, &out)
	return &out, err
}

// DeleteWebPushSubscription is DELETE /v1/users/{user}/web-push-subscriptions?id=.
func (c *Client) DeleteWebPushSubscription(ctx context.Context, user, id string) error {
	_, err := c.HTTP.do(ctx, http.MethodDelete, "/v1/users/"+seg(user)+"/web-push-subscriptions", url.Values{"id": {id}}, nil, nil)
	return err
}

// ListWebPushSubscriptions is GET /v1/users/{user}/web-push-subscriptions, endpoints masked.
func (c *Client) ListWebPushSubscriptions(ctx context.Context, user string) (*WebPushSubscriptionList, error) {
	var out WebPushSubscriptionList
	_, err := c.HTTP.do(ctx, http.MethodGet, "/v1/users/"+seg(user)+"/web-push-subscriptions", nil, nil, &out)
	return &out, err
}

// PutTemplate is PUT /v1/templates/{name}: a new version.
func (c *Client) PutTemplate(ctx context.Context, name string, req *TemplateRequest) (*Template, error) {
	var out Template
	_, err := c.HTTP.do(ctx, http.MethodPut, "/v1/templates/"+seg(name), nil, req, &out)
	return &out, err
}

// GetTemplate is GET /v1/templates/{name}: version 0 is the latest.
func (c *Client) GetTemplate(ctx context.Context, name string, version int) (*Template, error) {
	var q url.Values
	if version > 0 {
		q = url.Values{"version": {strconv.Itoa(version)}}
	}
	var out Template
	_, err := c.HTTP.do(ctx, http.MethodGet, "/v1/templates/"+seg(name), q, nil, &out)
	return &out, err
}

// ListInbox is GET /v1/users/{user}/inbox: a page, newest first (cursor "" for the first).
func (c *Client) ListInbox(ctx context.Context, user, cursor string, limit int) (*InboxPage, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out InboxPage
	_, err := c.HTTP.do(ctx, http.MethodGet, "/v1/users/"+seg(user)+"/inbox", q, nil, &out)
	return &out, err
}

// MarkRead is POST /v1/users/{user}/inbox/{id}/read.
func (c *Client) MarkRead(ctx context.Context, user, id string) error {
	_, err := c.HTTP.do(ctx, http.MethodPost, "/v1/users/"+seg(user)+"/inbox/"+seg(id)+"/read", nil, nil, nil)
	return err
}

// DeleteInboxItem is DELETE /v1/users/{user}/inbox/{id}.
func (c *Client) DeleteInboxItem(ctx context.Context, user, id string) error {
	_, err := c.HTTP.do(ctx, http.MethodDelete, "/v1/users/"+seg(user)+"/inbox/"+seg(id), nil, nil, nil)
	return err
}

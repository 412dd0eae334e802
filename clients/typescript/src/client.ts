import { HeraldError } from "./errors.js";
import { HttpTransport, routePath } from "./http.js";
import { checkKey, requireKeys } from "./idempotency.js";
import type { CallOptions, Sender } from "./sender.js";
import type {
  Accepted,
  Campaign,
  CampaignAccepted,
  CampaignRequest,
  Contacts,
  ContactsRequest,
  Device,
  DeviceList,
  DeviceRequest,
  InboxPage,
  Notification,
  Preferences,
  PreferencesRequest,
  ReadAllResult,
  ScheduleResult,
  SendRequest,
  Template,
  TemplatePage,
  TemplatePreview,
  TemplatePreviewRequest,
  TemplateRequest,
  UnreadCount,
  VAPIDPublicKey,
  WebPushSubscription,
  WebPushSubscriptionList,
  WebPushSubscriptionRequest,
} from "./types.gen.js";

/** PageOptions page through a list: the previous page's next_cursor, and a page size. */
export interface PageOptions extends CallOptions {
  cursor?: string;
  limit?: number;
}

export interface HeraldClientOptions {
  /** The HTTP transport for the routes other than sending, when the sender is an SqsTransport. */
  http?: HttpTransport;
}

/**
 * HeraldClient is Herald's producer client. It sends through a Sender — an HttpTransport or an
 * SqsTransport — and, given an HttpTransport (as its sender or as options.http), calls every
 * other route: notifications, campaigns, devices, contacts, preferences, web push
 * subscriptions, templates, and the end user's inbox.
 *
 * send and sendBatch require an idempotency_key on every request: a request without one is
 * refused (HeraldError, code "invalid", field "idempotency_key") before anything is sent, so
 * that every retry — the transport's own or the caller's — can be recognised by Herald. Build
 * keys with deriveKey.
 */
export class HeraldClient {
  readonly sender: Sender;
  readonly http: HttpTransport | undefined;

  constructor(sender: Sender, options: HeraldClientOptions = {}) {
    if (!sender || typeof sender.send !== "function" || typeof sender.sendBatch !== "function") {
      throw new TypeError("HeraldClient needs a Sender: an HttpTransport or an SqsTransport");
    }
    this.sender = sender;
    this.http = options.http ?? (sender instanceof HttpTransport ? sender : undefined);
  }

  // ---- sending ----

  /** send sends one notification; its answer is {id, status} (ACCEPTED, or SCHEDULED over HTTP). */
  async send(req: SendRequest, opts?: CallOptions): Promise<Accepted> {
    const err = checkKey(req);
    if (err) throw err;
    return this.sender.send(req, opts);
  }

  /**
   * sendBatch sends notifications, each its own, answering in order. Over HTTP the API takes or
   * refuses each group of 50 whole; over SQS each request is its own message and fails alone
   * (HeraldBatchError tells which).
   */
  async sendBatch(reqs: readonly SendRequest[], opts?: CallOptions): Promise<Accepted[]> {
    requireKeys(reqs);
    if (reqs.length === 0) return [];
    return this.sender.sendBatch(reqs, opts);
  }

  /** close sends what the sender still buffers (SqsTransport) and releases it. */
  async close(): Promise<void> {
    await this.sender.close?.();
  }

  // ---- notifications ----

  /** getNotification: GET /v1/notifications/{id}, with a page of its deliveries. */
  async getNotification(id: string, opts: PageOptions = {}): Promise<Notification> {
    return this.api().request("GET", routePath`/v1/notifications/${p("id", id)}`, { query: { cursor: opts.cursor, limit: opts.limit }, signal: opts.signal });
  }

  /** rescheduleNotification: PATCH /v1/notifications/{id}, a reserved send's new send_at. */
  async rescheduleNotification(id: string, sendAt: string | Date, opts: CallOptions = {}): Promise<ScheduleResult> {
    return this.api().request("PATCH", routePath`/v1/notifications/${p("id", id)}`, { body: { send_at: time(sendAt) }, signal: opts.signal, idempotent: true });
  }

  /** cancelNotification: DELETE /v1/notifications/{id}; cancelling twice answers the same. */
  async cancelNotification(id: string, opts: CallOptions = {}): Promise<ScheduleResult> {
    return this.api().request("DELETE", routePath`/v1/notifications/${p("id", id)}`, { signal: opts.signal });
  }

  // ---- campaigns ----

  /**
   * createCampaign: POST /v1/campaigns. With an idempotency_key it is retried like a send;
   * without one, only when the server cannot have acted on it (429, connection refused).
   */
  async createCampaign(req: CampaignRequest, opts: CallOptions = {}): Promise<CampaignAccepted> {
    return this.api().request("POST", "/v1/campaigns", { body: req, signal: opts.signal, idempotent: !!req?.idempotency_key });
  }

  /** getCampaign: GET /v1/campaigns/{id}. */
  async getCampaign(id: string, opts: CallOptions = {}): Promise<Campaign> {
    return this.api().request("GET", routePath`/v1/campaigns/${p("id", id)}`, { signal: opts.signal });
  }

  /** rescheduleCampaign: PATCH /v1/campaigns/{id}, a reserved campaign's new send_at. */
  async rescheduleCampaign(id: string, sendAt: string | Date, opts: CallOptions = {}): Promise<CampaignAccepted> {
    return this.api().request("PATCH", routePath`/v1/campaigns/${p("id", id)}`, { body: { send_at: time(sendAt) }, signal: opts.signal, idempotent: true });
  }

  /** cancelCampaign: DELETE /v1/campaigns/{id}. */
  async cancelCampaign(id: string, opts: CallOptions = {}): Promise<CampaignAccepted> {
    return this.api().request("DELETE", routePath`/v1/campaigns/${p("id", id)}`, { signal: opts.signal });
  }

  /** pauseCampaign: POST /v1/campaigns/{id}/pause. */
  async pauseCampaign(id: string, opts: CallOptions = {}): Promise<CampaignAccepted> {
    return this.api().request("POST", routePath`/v1/campaigns/${p("id", id)}/pause`, { signal: opts.signal, idempotent: true });
  }

  /** resumeCampaign: POST /v1/campaigns/{id}/resume. */
  async resumeCampaign(id: string, opts: CallOptions = {}): Promise<CampaignAccepted> {
    return this.api().request("POST", routePath`/v1/campaigns/${p("id", id)}/resume`, { signal: opts.signal, idempotent: true });
  }

  // ---- devices ----

  /** putDevice: PUT /v1/users/{user}/devices/{token}, registering a push token. */
  async putDevice(user: string, token: string, req: DeviceRequest, opts: CallOptions = {}): Promise<Device> {
    return this.api().request("PUT", routePath`/v1/users/${p("user", user)}/devices/${p("token", token)}`, { body: req, signal: opts.signal });
  }

  /** deleteDevice: DELETE /v1/users/{user}/devices/{token}. */
  async deleteDevice(user: string, token: string, opts: CallOptions = {}): Promise<void> {
    await this.api().request("DELETE", routePath`/v1/users/${p("user", user)}/devices/${p("token", token)}`, { signal: opts.signal });
  }

  /** listDevices: GET /v1/users/{user}/devices (tokens masked). */
  async listDevices(user: string, opts: CallOptions = {}): Promise<DeviceList> {
    return this.api().request("GET", routePath`/v1/users/${p("user", user)}/devices`, { signal: opts.signal });
  }

  // ---- contacts and preferences ----

  /** getContacts: GET /v1/users/{user}/contacts (masked). */
  async getContacts(user: string, opts: CallOptions = {}): Promise<Contacts> {
    return this.api().request("GET", routePath`/v1/users/${p("user", user)}/contacts`, { signal: opts.signal });
  }

  /** putContacts: PUT /v1/users/{user}/contacts; replaces them (a field left out is removed). */
  async putContacts(user: string, req: ContactsRequest, opts: CallOptions = {}): Promise<Contacts> {
    return this.api().request("PUT", routePath`/v1/users/${p("user", user)}/contacts`, { body: req, signal: opts.signal });
  }

  /** getPreferences: GET /v1/users/{user}/preferences. */
  async getPreferences(user: string, opts: CallOptions = {}): Promise<Preferences> {
    return this.api().request("GET", routePath`/v1/users/${p("user", user)}/preferences`, { signal: opts.signal });
  }

  /** putPreferences: PUT /v1/users/{user}/preferences; replaces them (a consent left out is withdrawn). */
  async putPreferences(user: string, req: PreferencesRequest, opts: CallOptions = {}): Promise<Preferences> {
    return this.api().request("PUT", routePath`/v1/users/${p("user", user)}/preferences`, { body: req, signal: opts.signal });
  }

  // ---- web push ----

  /** listWebPushSubscriptions: GET /v1/users/{user}/web-push-subscriptions (endpoints masked). */
  async listWebPushSubscriptions(user: string, opts: CallOptions = {}): Promise<WebPushSubscriptionList> {
    return this.api().request("GET", routePath`/v1/users/${p("user", user)}/web-push-subscriptions`, { signal: opts.signal });
  }

  /** putWebPushSubscription: PUT /v1/users/{user}/web-push-subscriptions, a browser's PushSubscription JSON. */
  async putWebPushSubscription(user: string, req: WebPushSubscriptionRequest, opts: CallOptions = {}): Promise<WebPushSubscription> {
    return this.api().request("PUT", routePath`/v1/users/${p("user", user)}/web-push-subscriptions`, { body: req, signal: opts.signal });
  }

  /** deleteWebPushSubscription: DELETE /v1/users/{user}/web-push-subscriptions, by ?endpoint= or ?id=. */
  async deleteWebPushSubscription(user: string, which: { endpoint: string } | { id: string }, opts: CallOptions = {}): Promise<void> {
    const w = which as { endpoint?: string; id?: string };
    if (!w || (!w.endpoint && !w.id) || (w.endpoint && w.id)) {
      throw HeraldError.invalid("endpoint", "name the subscription by its endpoint or by its id, one of them");
    }
    await this.api().request("DELETE", routePath`/v1/users/${p("user", user)}/web-push-subscriptions`, {
      query: { endpoint: w.endpoint || undefined, id: w.id || undefined },
      signal: opts.signal,
    });
  }

  /** getVapidPublicKey: GET /v1/web-push/vapid-public-key, the key pages subscribe with. */
  async getVapidPublicKey(opts: CallOptions = {}): Promise<VAPIDPublicKey> {
    return this.api().request("GET", "/v1/web-push/vapid-public-key", { signal: opts.signal });
  }

  // ---- templates ----

  /**
   * putTemplate: PUT /v1/templates/{name}, storing the template's next version (201). Every PUT
   * stores a new version, so it is retried only when the server cannot have taken it.
   */
  async putTemplate(name: string, req: TemplateRequest, opts: CallOptions = {}): Promise<Template> {
    return this.api().request("PUT", routePath`/v1/templates/${p("name", name)}`, { body: req, signal: opts.signal, idempotent: false });
  }

  /** getTemplate: GET /v1/templates/{name}, the latest version or `version`. */
  async getTemplate(name: string, opts: CallOptions & { version?: number } = {}): Promise<Template> {
    return this.api().request("GET", routePath`/v1/templates/${p("name", name)}`, { query: { version: opts.version }, signal: opts.signal });
  }

  /** listTemplates: GET /v1/templates, each at its latest version, newest first. */
  async listTemplates(opts: PageOptions = {}): Promise<TemplatePage> {
    return this.api().request("GET", "/v1/templates", { query: { cursor: opts.cursor, limit: opts.limit }, signal: opts.signal });
  }

  /** previewTemplate: POST /v1/templates/{name}/preview, rendering every channel and locale with data. */
  async previewTemplate(name: string, req: TemplatePreviewRequest, opts: CallOptions & { version?: number } = {}): Promise<TemplatePreview> {
    return this.api().request("POST", routePath`/v1/templates/${p("name", name)}/preview`, { body: req, query: { version: opts.version }, signal: opts.signal, idempotent: true });
  }

  // ---- the end user's inbox (API key, SigV4, or the user's JWT) ----

  /** listInbox: GET /v1/users/{user}/inbox, newest first. */
  async listInbox(user: string, opts: PageOptions = {}): Promise<InboxPage> {
    return this.api().request("GET", routePath`/v1/users/${p("user", user)}/inbox`, { query: { cursor: opts.cursor, limit: opts.limit }, signal: opts.signal });
  }

  /** unreadCount: GET /v1/users/{user}/inbox/unread-count. */
  async unreadCount(user: string, opts: CallOptions = {}): Promise<UnreadCount> {
    return this.api().request("GET", routePath`/v1/users/${p("user", user)}/inbox/unread-count`, { signal: opts.signal });
  }

  /** markAllRead: POST /v1/users/{user}/inbox/read-all. */
  async markAllRead(user: string, opts: CallOptions = {}): Promise<ReadAllResult> {
    return this.api().request("POST", routePath`/v1/users/${p("user", user)}/inbox/read-all`, { signal: opts.signal, idempotent: true });
  }

  /** markRead: POST /v1/users/{user}/inbox/{id}/read. */
  async markRead(user: string, id: string, opts: CallOptions = {}): Promise<void> {
    await this.api().request("POST", routePath`/v1/users/${p("user", user)}/inbox/${p("id", id)}/read`, { signal: opts.signal, idempotent: true });
  }

  /** deleteInboxItem: DELETE /v1/users/{user}/inbox/{id}. */
  async deleteInboxItem(user: string, id: string, opts: CallOptions = {}): Promise<void> {
    await this.api().request("DELETE", routePath`/v1/users/${p("user", user)}/inbox/${p("id", id)}`, { signal: opts.signal });
  }

  private api(): HttpTransport {
    if (!this.http) {
      throw new HeraldError({
        status: 0,
        code: "unsupported",
        message: "this route needs an HttpTransport: pass one as the sender or as options.http",
      });
    }
    return this.http;
  }
}

function p(name: string, value: string): { name: string; value: string } {
  return { name, value };
}

function time(t: string | Date): string {
  return t instanceof Date ? t.toISOString() : t;
}

package run

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"herald/internal/stackbox/iam"
)

// Call is one AWS call the box saw, with its IAM decision.
type Call struct {
	Caller  string // a function name, a producer, or a service principal
	Request iam.Request
	Allowed bool
	Reason  string
	// Foreign marks a call made to try a side door — a probe signed as a role of the stack, a
	// schedule of another group: its refusal is not a defect, and if allowed it uses no grant.
	Foreign bool
}

func (c Call) String() string {
	return fmt.Sprintf("%s %s on %s", c.Caller, c.Request.Action, c.Request.Resource)
}

// Recorder keeps every call and its decision.
type Recorder struct {
	stack *iam.Stack
	// identity are the identity policies of principals outside the stack (producers).
	identity map[string][]iam.Policy

	mu    sync.Mutex
	calls []Call
	trust int
}

func newRecorder(s *iam.Stack) *Recorder {
	return &Recorder{stack: s, identity: map[string][]iam.Policy{}}
}

func (r *Recorder) countTrust() { r.mu.Lock(); r.trust++; r.mu.Unlock() }

// check evaluates and records one request made by caller.
func (r *Recorder) check(caller string, req iam.Request) Call {
	return r.checkAs(caller, req, false, nil)
}

// checkAs is check for a call that may be foreign, or whose decision was made elsewhere (d, as
// for a role's trust policy).
func (r *Recorder) checkAs(caller string, req iam.Request, foreign bool, made *iam.Decision) Call {
	var d iam.Decision
	r.mu.Lock()
	p, ok := r.identity[req.Principal]
	r.mu.Unlock()
	switch {
	case made != nil:
		d = *made
	case ok:
		d = iam.Evaluate(req, p, r.stack.ResourcePolicies(req.Resource))
	default:
		d = r.stack.Evaluate(req)
	}
	c := Call{Caller: caller, Request: req, Allowed: d.Allowed, Reason: d.Reason, Foreign: foreign}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return c
}

// Calls returns the calls so far.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// Calls returns every call the box checked.
func (b *Box) Calls() []Call { return b.recorder.Calls() }

// Denied returns the denied calls whose caller is one of the stack's own principals (its
// functions, the state machine, the scheduler, S3 and SNS): each is a defect of the template.
func (b *Box) Denied() []Call {
	var out []Call
	for _, c := range b.recorder.Calls() {
		if !c.Allowed && !c.Foreign && !b.isProducer(c.Request.Principal) {
			out = append(out, c)
		}
	}
	return out
}

func (b *Box) isProducer(p string) bool {
	b.recorder.mu.Lock()
	defer b.recorder.mu.Unlock()
	_, ok := b.recorder.identity[p]
	return ok
}

// UnusedGrants lists the grants of the stack's roles no call used.
func (b *Box) UnusedGrants() []iam.Unused {
	var reqs []iam.Request
	for _, c := range b.recorder.Calls() {
		if c.Allowed && !c.Foreign {
			reqs = append(reqs, c.Request)
		}
	}
	return b.IAM.UnusedGrants(reqs)
}

// Summary is the IAM proof's report: "iam: N calls checked, M denied", the denied calls, and
// the grants never used that allow does not explain ("iam: N grants never used outside the
// allowlist (K allowlisted)"), with the allowlist's stale lines.
func (b *Box) Summary(allow []AllowEntry) string {
	calls := b.recorder.Calls()
	denied := b.Denied()
	var sb strings.Builder
	fmt.Fprintf(&sb, "iam: %d calls checked, %d denied\n", len(calls), len(denied))
	seen := map[string]int{}
	var order []Call
	for _, c := range denied {
		if seen[c.String()] == 0 {
			order = append(order, c)
		}
		seen[c.String()]++
	}
	for _, c := range order {
		fmt.Fprintf(&sb, "  DENIED %s (×%d): %s\n", c, seen[c.String()], c.Reason)
	}
	counts := map[string]int{}
	for _, c := range calls {
		if c.Allowed {
			counts[c.Caller+" "+c.Request.Action]++
		}
	}
	unused, allowlisted, stale := b.UnusedReport(allow)
	fmt.Fprintf(&sb, "iam: %d grants never used outside the allowlist (%d allowlisted)\n", len(unused), allowlisted)
	sb.WriteString("  (logs:* and xray:* are Lambda's and Step Functions' own calls, not made by the box, and not counted)\n")
	// role → resources → actions
	byRole := map[string]map[string][]string{}
	for _, u := range unused {
		name := b.callerName(u.Principal)
		if byRole[name] == nil {
			byRole[name] = map[string][]string{}
		}
		res := strings.Join(u.Resources, ", ")
		byRole[name][res] = append(byRole[name][res], u.Action)
	}
	for _, role := range sortedKeys(byRole) {
		fmt.Fprintf(&sb, "  %s:\n", role)
		for _, res := range sortedKeys(byRole[role]) {
			fmt.Fprintf(&sb, "    %s on %s\n", strings.Join(byRole[role][res], ", "), res)
		}
	}
	for _, e := range stale {
		fmt.Fprintf(&sb, "  allowlist line %d explains no unused grant (remove it): %s %s %s\n", e.Line, e.Who, e.Action, e.Resource)
	}
	return sb.String()
}

// authz is one IAM request a call makes.
type authz struct {
	Action, Resource string
	Context          map[string]string
	Multi            map[string][]string // multivalued condition keys (dynamodb:LeadingKeys)
}

// parser reads what a request asks for.
type parser func(r *http.Request, body []byte) ([]authz, error)

// sigv4AKID is the access key id in a SigV4 Authorization header.
var sigv4AKID = regexp.MustCompile(`Credential=([^/,\s]+)/`)

// proxy records and authorizes each request, then passes it to next (denied ones are
// answered AccessDenied in the service's protocol).
func (b *Box) proxy(service string, parse parser, deny func(w http.ResponseWriter, msg string), next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m := sigv4AKID.FindStringSubmatch(r.Header.Get("Authorization"))
		principal := ""
		if m != nil {
			principal = b.principalOf(m[1])
		}
		if principal == "" {
			b.log.Error("stackbox: unsigned or unknown caller", "service", service, "path", r.URL.Path)
			deny(w, "The security token included in the request is invalid")
			return
		}
		reqs, err := parse(r, body)
		if err != nil {
			b.log.Error("stackbox: cannot tell the action", "service", service, "error", err)
			deny(w, "stackbox: "+err.Error())
			return
		}
		probe := b.isProbe(m[1])
		for _, a := range reqs {
			c := b.recorder.checkAs(b.callerName(principal), iam.Request{Principal: principal, Action: a.Action, Resource: a.Resource, Context: a.Context, Multi: a.Multi}, probe, nil)
			if !c.Allowed {
				b.log.Warn("stackbox: denied", "caller", c.Caller, "action", a.Action, "resource", a.Resource, "reason", c.Reason)
				deny(w, c.Reason)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// callerName names a principal: the function whose role it is, or the principal itself.
func (b *Box) callerName(principal string) string {
	for _, f := range b.Functions {
		if f.Role == principal {
			return f.Name
		}
	}
	if b.States != nil {
		for _, sm := range b.States.machines {
			if sm.Role == principal {
				return sm.Name
			}
		}
	}
	return principal
}

func jsonDeny(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-query-error", "AccessDenied;Sender")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazon.coral.service#AccessDeniedException", "message": msg})
}

func restDeny(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException")
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(map[string]string{"Message": msg, "message": msg})
}

func xmlDeny(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "<Error><Code>AccessDenied</Code><Message>%s</Message></Error>", strings.NewReplacer("<", "&lt;", "&", "&amp;").Replace(msg))
}

func target(r *http.Request) string {
	t := r.Header.Get("X-Amz-Target")
	return t[strings.LastIndexByte(t, '.')+1:]
}

func (b *Box) arn(service, resource string) string {
	return fmt.Sprintf("arn:aws:%s:%s:%s:%s", service, Region, AccountID, resource)
}

// dynamoRequests maps a DynamoDB call to the IAM actions it needs, per table or index. An
// item-level call carries dynamodb:LeadingKeys, the partition key values of the items it reads
// or writes, as DynamoDB sets it: the key of GetItem, PutItem, UpdateItem and DeleteItem (and
// of each item of a transaction, authorized one by one), the set of a batch's keys per table,
// and the partition key value a Query's key condition names (of the index it queries, if any).
// Scan has none. Partition key attributes come from the template's tables; a table outside
// the template, or a key not found in the request, leaves the key out.
func (b *Box) dynamoRequests(r *http.Request, body []byte) ([]authz, error) {
	op := target(r)
	var in struct {
		TableName     string
		IndexName     string
		Key, Item     map[string]json.RawMessage
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct {
			TableName string
			Key, Item map[string]json.RawMessage
		}
		queryInput
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("dynamodb %s: %w", op, err)
	}
	keys := partitionKeys(b.Template, b.Resolver)
	table := func(n string) string { return b.arn("dynamodb", "table/"+n) }
	switch op {
	case "BatchGetItem", "BatchWriteItem":
		var out []authz
		for _, n := range sortedKeys(in.RequestItems) {
			vals := batchLeadingKeys(op, in.RequestItems[n], keys[n].hash)
			out = append(out, authz{Action: "dynamodb:" + op, Resource: table(n), Multi: vals.multi()})
		}
		return out, nil
	case "TransactWriteItems", "TransactGetItems":
		var out []authz
		actions := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
		for _, it := range in.TransactItems {
			for _, k := range sortedKeys(it) {
				v := it[k]
				item := v.Key
				if k == "Put" {
					item = v.Item
				}
				var vals keyValues
				vals.add(item, keys[v.TableName].hash)
				out = append(out, authz{Action: "dynamodb:" + actions[k], Resource: table(v.TableName), Multi: vals.multi()})
			}
		}
		return out, nil
	case "ListTables":
		return []authz{{Action: "dynamodb:ListTables", Resource: "*"}}, nil
	}
	if in.TableName == "" {
		return nil, fmt.Errorf("dynamodb %s without TableName", op)
	}
	res := table(in.TableName)
	if in.IndexName != "" {
		res += "/index/" + in.IndexName
	}
	a := authz{Action: "dynamodb:" + op, Resource: res}
	tk := keys[in.TableName]
	var vals keyValues
	switch op {
	case "GetItem", "UpdateItem", "DeleteItem":
		vals.add(in.Key, tk.hash)
	case "PutItem":
		vals.add(in.Item, tk.hash)
	case "Query":
		hash := tk.hash
		if in.IndexName != "" {
			hash = tk.indexes[in.IndexName]
		}
		if v, ok := queryPartitionValue(in.queryInput, hash); ok {
			vals = keyValues{v}
		}
	}
	a.Multi = vals.multi()
	return []authz{a}, nil
}

// queueARN turns a queue URL into the queue's ARN.
func (b *Box) queueARN(u string) string {
	return b.arn("sqs", u[strings.LastIndexByte(u, '/')+1:])
}

func (b *Box) sqsRequests(r *http.Request, body []byte) ([]authz, error) {
	op := target(r)
	var in struct {
		QueueUrl, QueueName, SourceArn, DestinationArn string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("sqs %s: %w", op, err)
	}
	action := strings.TrimSuffix(op, "Batch")
	switch op {
	case "ListQueues":
		return []authz{{Action: "sqs:ListQueues", Resource: "*"}}, nil
	case "GetQueueUrl", "CreateQueue":
		return []authz{{Action: "sqs:" + op, Resource: b.arn("sqs", in.QueueName)}}, nil
	case "StartMessageMoveTask":
		out := []authz{{Action: "sqs:StartMessageMoveTask", Resource: in.SourceArn}, {Action: "sqs:ReceiveMessage", Resource: in.SourceArn},
			{Action: "sqs:DeleteMessage", Resource: in.SourceArn}, {Action: "sqs:GetQueueAttributes", Resource: in.SourceArn}}
		if in.DestinationArn != "" {
			out = append(out, authz{Action: "sqs:SendMessage", Resource: in.DestinationArn})
		}
		return out, nil
	case "ListMessageMoveTasks", "CancelMessageMoveTask":
		res := in.SourceArn
		if res == "" {
			res = "*"
		}
		return []authz{{Action: "sqs:" + op, Resource: res}}, nil
	}
	if in.QueueUrl == "" {
		return nil, fmt.Errorf("sqs %s without QueueUrl", op)
	}
	return []authz{{Action: "sqs:" + action, Resource: b.queueARN(in.QueueUrl)}}, nil
}

func (b *Box) schedulerRequests(r *http.Request, body []byte) ([]authz, error) {
	name, ok := strings.CutPrefix(r.URL.Path, "/schedules/")
	if !ok {
		if g, ok := strings.CutPrefix(r.URL.Path, "/schedule-groups/"); ok {
			return []authz{{Action: "scheduler:CreateScheduleGroup", Resource: b.arn("scheduler", "schedule-group/"+g)}}, nil
		}
		return nil, fmt.Errorf("scheduler: %s %s", r.Method, r.URL.Path)
	}
	name, _ = url.PathUnescape(name)
	var in struct {
		GroupName string
		Target    struct{ RoleArn string }
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, fmt.Errorf("scheduler: %w", err)
		}
	}
	group := in.GroupName
	if group == "" {
		group = r.URL.Query().Get("groupName")
	}
	if group == "" {
		group = "default"
	}
	op := map[string]string{"POST": "CreateSchedule", "PUT": "UpdateSchedule", "GET": "GetSchedule", "DELETE": "DeleteSchedule"}[r.Method]
	out := []authz{{Action: "scheduler:" + op, Resource: b.arn("scheduler", "schedule/"+group+"/"+name)}}
	if in.Target.RoleArn != "" {
		out = append(out, authz{Action: "iam:PassRole", Resource: in.Target.RoleArn,
			Context: map[string]string{"iam:PassedToService": "scheduler.amazonaws.com"}})
	}
	return out, nil
}

func (b *Box) statesRequests(r *http.Request, body []byte) ([]authz, error) {
	op := target(r)
	var in struct{ StateMachineArn, ExecutionArn string }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("states %s: %w", op, err)
	}
	res := in.StateMachineArn
	if res == "" {
		res = in.ExecutionArn
	}
	return []authz{{Action: "states:" + op, Resource: res}}, nil
}

func (b *Box) eventsRequests(r *http.Request, body []byte) ([]authz, error) {
	op := target(r)
	var in struct {
		Entries []struct{ EventBusName string }
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("events %s: %w", op, err)
	}
	seen := map[string]bool{}
	var out []authz
	for _, e := range in.Entries {
		bus := e.EventBusName
		if bus == "" {
			bus = "default"
		}
		if !strings.HasPrefix(bus, "arn:") {
			bus = b.arn("events", "event-bus/"+bus)
		}
		if !seen[bus] {
			seen[bus] = true
			out = append(out, authz{Action: "events:" + op, Resource: bus})
		}
	}
	return out, nil
}

func (b *Box) s3Requests(r *http.Request, _ []byte) ([]authz, error) {
	p := strings.TrimPrefix(r.URL.Path, "/")
	if p == "" {
		return nil, fmt.Errorf("s3: no bucket in %s", r.URL.Path)
	}
	res := "arn:aws:s3:::" + p
	var action string
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		action = "s3:GetObject"
		if r.URL.Query().Get("versionId") != "" {
			action = "s3:GetObjectVersion"
		}
	case http.MethodPut:
		action = "s3:PutObject"
	case http.MethodDelete:
		action = "s3:DeleteObject"
	default:
		return nil, fmt.Errorf("s3: %s %s", r.Method, r.URL.Path)
	}
	return []authz{{Action: action, Resource: res}}, nil
}

func (b *Box) secretsRequests(r *http.Request, body []byte) ([]authz, error) {
	op := target(r)
	var in struct{ SecretId string }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("secretsmanager %s: %w", op, err)
	}
	return []authz{{Action: "secretsmanager:" + op, Resource: b.Secrets.ARN(in.SecretId)}}, nil
}

// sesRequests: SendEmail is authorized on the sending identity and the configuration set.
func (b *Box) sesRequests(r *http.Request, body []byte) ([]authz, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/v2/email/outbound-emails" {
		return nil, fmt.Errorf("sesv2: %s %s", r.Method, r.URL.Path)
	}
	var in struct {
		FromEmailAddress     string
		ConfigurationSetName string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("sesv2 SendEmail: %w", err)
	}
	from := in.FromEmailAddress
	if a, err := mail.ParseAddress(from); err == nil {
		from = a.Address
	}
	region := sesRegion(r)
	out := []authz{{Action: "ses:SendEmail", Resource: fmt.Sprintf("arn:aws:ses:%s:%s:identity/%s", region, AccountID, from)}}
	if in.ConfigurationSetName != "" {
		out = append(out, authz{Action: "ses:SendEmail", Resource: fmt.Sprintf("arn:aws:ses:%s:%s:configuration-set/%s", region, AccountID, in.ConfigurationSetName)})
	}
	return out, nil
}

var sigv4Region = regexp.MustCompile(`Credential=[^/]+/\d+/([^/]+)/`)

// sesRegion is the region a SigV4 request was signed for.
func sesRegion(r *http.Request) string {
	m := sigv4Region.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return Region
	}
	return m[1]
}

// reverseProxy forwards to a server on its own URL (DynamoDB Local, the scheduler fake) with
// every caller's access key id replaced by one: DynamoDB Local keeps one database per access
// key id and region unless started shared. The signature is not checked by either.
func reverseProxy(endpoint string) (http.Handler, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	orig := rp.Director
	rp.Director = func(r *http.Request) {
		orig(r)
		r.Host = u.Host
		r.Header.Set("Authorization", sigv4AKID.ReplaceAllString(r.Header.Get("Authorization"), "Credential=stackbox/"))
	}
	return rp, nil
}

// accountRewrite serves the SQS fake under the template's account: the fake's ARNs and URLs
// name its own account, the stack's name AccountID. Only the ARNs and URLs of the protocol are
// rewritten, never message bodies or attributes (their checksums must hold).
func accountRewrite(fakeAccount string, next http.Handler) http.Handler {
	in := strings.NewReplacer(":"+AccountID+":", ":"+fakeAccount+":", "/"+AccountID+"/", "/"+fakeAccount+"/")
	out := strings.NewReplacer(":"+fakeAccount+":", ":"+AccountID+":", "/"+fakeAccount+"/", "/"+AccountID+"/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		body = rewriteJSON(body, in)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rec := &bufferedWriter{header: http.Header{}}
		next.ServeHTTP(rec, r)
		resp := rewriteJSON(rec.buf.Bytes(), out)
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(resp)
	})
}

// payloadKeys hold what senders wrote: never rewritten.
var payloadKeys = map[string]bool{"MessageBody": true, "Body": true, "MessageAttributes": true, "MessageSystemAttributes": true,
	"MD5OfBody": true, "MD5OfMessageBody": true, "MD5OfMessageAttributes": true}

func rewriteJSON(b []byte, r *strings.Replacer) []byte {
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return b
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch c := v.(type) {
		case map[string]any:
			for k, x := range c {
				if !payloadKeys[k] {
					c[k] = walk(x)
				}
			}
		case []any:
			for i, x := range c {
				c[i] = walk(x)
			}
		case string:
			return r.Replace(c)
		}
		return v
	}
	out, err := json.Marshal(walk(v))
	if err != nil {
		return b
	}
	return out
}

type bufferedWriter struct {
	header http.Header
	buf    bytes.Buffer
	status int
}

func (w *bufferedWriter) Header() http.Header { return w.header }
func (w *bufferedWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.buf.Write(p)
}
func (w *bufferedWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}

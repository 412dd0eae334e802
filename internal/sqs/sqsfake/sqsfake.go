// Package sqsfake is an in-memory Amazon SQS speaking the JSON protocol (awsJson1_0) of
// aws-sdk-go-v2's service/sqs, for tests of the SQS adapter and the Lambda glue. No SQS emulator
// available here speaks that protocol, so this one covers what Herald and a Lambda event source
// mapping use: queues with a redrive policy, send (with attributes, delay and MessageGroupId),
// receive with long polling and receive counts, delete, visibility changes, dead-lettering at
// receive time and message move tasks — with the MD5 checksums and error shapes real SQS sends.
//
// One deliberate difference: a Delete or ChangeMessageVisibility with a stale receipt handle (the
// message was received again since) fails with ReceiptHandleIsInvalid and changes nothing, where
// real SQS may answer a stale Delete with success without deleting. Herald's queue contract
// reports a stale receipt, so the fake makes it observable.
package sqsfake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Account and Region appear in every queue URL and ARN the fake hands out.
const (
	Account = "000000000000"
	Region  = "us-east-1"
)

// Limits as in SQS.
const (
	MaxMessageSize    = 1 << 20 // body plus attributes, and all entries of a batch together
	maxBatch          = 10
	maxVisibility     = 43200 // seconds
	maxDelay          = 900   // SQS's own cap, seconds (notify.MaxQueueDelay is Herald's reading of it)
	maxWait           = 20
	defaultVisibility = 30
	maxAttributes     = 10
)

// Server is the fake. It is safe for concurrent use; serve it with httptest.NewServer.
type Server struct {
	mu      sync.Mutex
	queues  map[string]*queue      // by name
	tasks   map[string][]*moveTask // by source ARN, oldest first
	seq     int64
	fails   map[string][]*apiError // action → errors to answer the next requests with
	entries map[string]int         // body → SendMessageBatch entries still to fail
	closed  chan struct{}
	once    sync.Once
}

// New returns an empty fake.
func New() *Server {
	return &Server{
		queues:  map[string]*queue{},
		tasks:   map[string][]*moveTask{},
		fails:   map[string][]*apiError{},
		entries: map[string]int{},
		closed:  make(chan struct{}),
	}
}

// Close ends every waiting ReceiveMessage, so that httptest.Server.Close need not wait for
// long polls. Call it before closing the HTTP server.
func (s *Server) Close() { s.once.Do(func() { close(s.closed) }) }

// FailNext makes the next n requests for action (e.g. "SendMessageBatch") fail with an
// AWS-shaped error: status 400 with code "RequestThrottled", or 500 with "InternalError".
func (s *Server) FailNext(action string, n, status int, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.fails[action] = append(s.fails[action], &apiError{status: status, code: code, query: code, msg: "injected failure"})
	}
}

// FailEntries makes the next n SendMessageBatch entries whose body is body fail on the server's
// side (SenderFault false, code InternalError), as SQS reports a partial batch failure.
func (s *Server) FailEntries(body string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries[body] += n
}

type queue struct {
	name, arn  string
	created    time.Time
	attrs      map[string]string // as declared
	visibility int
	delay      int
	wait       int
	dlqArn     string
	maxReceive int
	msgs       []*message    // in send order
	changed    chan struct{} // closed and replaced whenever a message may have become visible
}

type message struct {
	seq       int64
	id        string
	body      string
	attrs     map[string]AttributeValue
	group     string
	sent      time.Time
	visibleAt time.Time
	received  int
	firstRecv time.Time
	receipt   string // of the latest receive; "" before the first
	source    string // ARN of the queue it dead-lettered from
	md5Body   string
}

// AttributeValue is a message attribute as the JSON protocol carries it.
type AttributeValue struct {
	DataType    string  `json:"DataType"`
	StringValue *string `json:"StringValue,omitempty"`
	BinaryValue []byte  `json:"BinaryValue,omitempty"`
}

// wake tells waiting receivers to look again.
func (q *queue) wake() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// apiError is an AWS-shaped error: code is the JSON __type (without the namespace), query the
// code of the X-Amzn-Query-Error header the SDK reports for query-compatible services.
type apiError struct {
	status      int
	code, query string
	msg         string
}

func errorf(code, query, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, query: query, msg: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *apiError {
	return errorf("InvalidParameterValueException", "InvalidParameterValue", format, args...)
}

func missing(param string) *apiError {
	return errorf("MissingRequiredParameterException", "MissingParameter", "The request must contain the parameter %s.", param)
}

var errNoQueue = errorf("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.")

func (s *Server) write(w http.ResponseWriter, v any, e *apiError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-RequestId", newID())
	if e != nil {
		fault := "Sender"
		if e.status >= 500 {
			fault = "Receiver"
		}
		w.Header().Set("X-Amzn-Query-Error", e.query+";"+fault)
		w.WriteHeader(e.status)
		v = map[string]string{"__type": "com.amazonaws.sqs#" + e.code, "message": e.msg}
	}
	_ = json.NewEncoder(w).Encode(v)
}

// call is one request: its context, the base URL queue URLs are built on, and the JSON body.
type call struct {
	ctx  context.Context
	base string
	body []byte
}

func decode[T any](c *call) (*T, *apiError) {
	var v T
	if err := json.Unmarshal(c.body, &v); err != nil {
		return nil, errorf("SerializationException", "SerializationException", "cannot decode request: %v", err)
	}
	return &v, nil
}

// route adapts a handler of typed requests to the dispatch table.
func route[T any](fn func(*Server, *call, *T) (any, *apiError)) func(*Server, *call) (any, *apiError) {
	return func(s *Server, c *call) (any, *apiError) {
		req, err := decode[T](c)
		if err != nil {
			return nil, err
		}
		return fn(s, c, req)
	}
}

var actions map[string]func(*Server, *call) (any, *apiError)

func init() {
	actions = map[string]func(*Server, *call) (any, *apiError){
		"CreateQueue":                  route((*Server).createQueue),
		"GetQueueUrl":                  route((*Server).getQueueURL),
		"GetQueueAttributes":           route((*Server).getQueueAttributes),
		"ListDeadLetterSourceQueues":   route((*Server).listDeadLetterSourceQueues),
		"PurgeQueue":                   route((*Server).purgeQueue),
		"SendMessage":                  route((*Server).sendMessage),
		"SendMessageBatch":             route((*Server).sendMessageBatch),
		"ReceiveMessage":               route((*Server).receiveMessage),
		"DeleteMessage":                route((*Server).deleteMessage),
		"DeleteMessageBatch":           route((*Server).deleteMessageBatch),
		"ChangeMessageVisibility":      route((*Server).changeVisibility),
		"ChangeMessageVisibilityBatch": route((*Server).changeVisibilityBatch),
		"StartMessageMoveTask":         route((*Server).startMoveTask),
		"ListMessageMoveTasks":         route((*Server).listMoveTasks),
	}
}

// ServeHTTP answers one awsJson1_0 request: POST / with X-Amz-Target: AmazonSQS.<Action>.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	action, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	fn := actions[action]
	if r.Method != http.MethodPost || !ok || fn == nil {
		s.write(w, nil, errorf("UnknownOperationException", "UnknownOperation", "unknown operation %q", r.Header.Get("X-Amz-Target")))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4*MaxMessageSize))
	if err != nil {
		s.write(w, nil, errorf("RequestEntityTooLarge", "RequestEntityTooLarge", "request body: %v", err))
		return
	}
	s.mu.Lock()
	if f := s.fails[action]; len(f) > 0 {
		s.fails[action] = f[1:]
		s.mu.Unlock()
		s.write(w, nil, f[0])
		return
	}
	s.mu.Unlock()
	v, e := fn(s, &call{ctx: r.Context(), base: "http://" + r.Host, body: body})
	s.write(w, v, e)
}

// queueByURL finds the queue a QueueUrl names: its last path segment, whatever the host.
// Callers hold s.mu.
func (s *Server) queueByURL(url *string) (*queue, *apiError) {
	if url == nil || *url == "" {
		return nil, missing("QueueUrl")
	}
	q := s.queues[(*url)[strings.LastIndexByte(*url, '/')+1:]]
	if q == nil {
		return nil, errNoQueue
	}
	return q, nil
}

func (s *Server) queueByArn(arn string) *queue {
	if name, ok := strings.CutPrefix(arn, "arn:aws:sqs:"+Region+":"+Account+":"); ok {
		return s.queues[name]
	}
	return nil
}

func (c *call) url(q *queue) string { return c.base + "/" + Account + "/" + q.name }

func validQueueName(n string) bool {
	if n == "" || len(n) > 80 {
		return false
	}
	for _, r := range n {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func intAttr(attrs map[string]string, name string, def, max int) (int, *apiError) {
	v, ok := attrs[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > max {
		return 0, errorf("InvalidAttributeValue", "InvalidAttributeValue", "Invalid value for the parameter %s.", name)
	}
	return n, nil
}

type createQueueReq struct {
	QueueName  string
	Attributes map[string]string
}

func (s *Server) createQueue(c *call, req *createQueueReq) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !validQueueName(req.QueueName) {
		return nil, invalid("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	if q := s.queues[req.QueueName]; q != nil {
		for k, v := range req.Attributes {
			if q.attrs[k] != v {
				return nil, errorf("QueueNameExists", "QueueAlreadyExists", "A queue already exists with the same name and a different value for attribute %s", k)
			}
		}
		return map[string]string{"QueueUrl": c.url(q)}, nil
	}
	q := &queue{name: req.QueueName, arn: "arn:aws:sqs:" + Region + ":" + Account + ":" + req.QueueName,
		created: time.Now(), attrs: map[string]string{}, changed: make(chan struct{})}
	var e *apiError
	for k, v := range req.Attributes {
		switch k {
		case "VisibilityTimeout", "DelaySeconds", "ReceiveMessageWaitTimeSeconds", "RedrivePolicy",
			"MaximumMessageSize", "MessageRetentionPeriod", "SqsManagedSseEnabled":
			q.attrs[k] = v
		default:
			return nil, errorf("InvalidAttributeName", "InvalidAttributeName", "Unknown Attribute %s.", k)
		}
	}
	if q.visibility, e = intAttr(q.attrs, "VisibilityTimeout", defaultVisibility, maxVisibility); e != nil {
		return nil, e
	}
	if q.delay, e = intAttr(q.attrs, "DelaySeconds", 0, maxDelay); e != nil {
		return nil, e
	}
	if q.wait, e = intAttr(q.attrs, "ReceiveMessageWaitTimeSeconds", 0, maxWait); e != nil {
		return nil, e
	}
	if rp, ok := q.attrs["RedrivePolicy"]; ok {
		var p struct {
			DeadLetterTargetArn string
			MaxReceiveCount     json.RawMessage // a number or a string holding one, as SQS accepts both
		}
		err := json.Unmarshal([]byte(rp), &p)
		if err == nil {
			q.maxReceive, err = strconv.Atoi(strings.Trim(string(p.MaxReceiveCount), `"`))
		}
		switch {
		case err != nil || q.maxReceive < 1 || q.maxReceive > 1000:
			return nil, errorf("InvalidAttributeValue", "InvalidAttributeValue", "Invalid value for the parameter RedrivePolicy: %s", rp)
		case s.queueByArn(p.DeadLetterTargetArn) == nil:
			return nil, errorf("InvalidAttributeValue", "InvalidAttributeValue", "Value %s for parameter RedrivePolicy is invalid. Reason: Dead letter target does not exist.", rp)
		}
		q.dlqArn = p.DeadLetterTargetArn
	}
	s.queues[q.name] = q
	return map[string]string{"QueueUrl": c.url(q)}, nil
}

type queueNameReq struct{ QueueName string }

func (s *Server) getQueueURL(c *call, req *queueNameReq) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[req.QueueName]
	if q == nil {
		return nil, errNoQueue
	}
	return map[string]string{"QueueUrl": c.url(q)}, nil
}

type queueAttributesReq struct {
	QueueUrl       *string
	AttributeNames []string
}

func (s *Server) getQueueAttributes(c *call, req *queueAttributesReq) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, e := s.queueByURL(req.QueueUrl)
	if e != nil {
		return nil, e
	}
	now := time.Now()
	var visible, inFlight, delayed int
	for _, m := range q.msgs {
		switch {
		case !m.visibleAt.After(now):
			visible++
		case m.received > 0:
			inFlight++
		default:
			delayed++
		}
	}
	all := map[string]string{
		"QueueArn":                              q.arn,
		"ApproximateNumberOfMessages":           strconv.Itoa(visible),
		"ApproximateNumberOfMessagesNotVisible": strconv.Itoa(inFlight),
		"ApproximateNumberOfMessagesDelayed":    strconv.Itoa(delayed),
		"CreatedTimestamp":                      strconv.FormatInt(q.created.Unix(), 10),
		"LastModifiedTimestamp":                 strconv.FormatInt(q.created.Unix(), 10),
		"VisibilityTimeout":                     strconv.Itoa(q.visibility),
		"DelaySeconds":                          strconv.Itoa(q.delay),
		"ReceiveMessageWaitTimeSeconds":         strconv.Itoa(q.wait),
		"MaximumMessageSize":                    strconv.Itoa(MaxMessageSize),
	}
	if rp, ok := q.attrs["RedrivePolicy"]; ok {
		all["RedrivePolicy"] = rp
	}
	out := map[string]string{}
	for _, n := range req.AttributeNames {
		if n == "All" {
			out = all
			break
		}
		v, ok := all[n]
		if !ok {
			return nil, errorf("InvalidAttributeName", "InvalidAttributeName", "Unknown Attribute %s.", n)
		}
		out[n] = v
	}
	return map[string]any{"Attributes": out}, nil
}

type queueURLReq struct{ QueueUrl *string }

func (s *Server) listDeadLetterSourceQueues(c *call, req *queueURLReq) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dlq, e := s.queueByURL(req.QueueUrl)
	if e != nil {
		return nil, e
	}
	urls := []string{}
	for _, q := range s.queues {
		if q.dlqArn == dlq.arn {
			urls = append(urls, c.url(q))
		}
	}
	return map[string]any{"queueUrls": urls}, nil
}

func (s *Server) purgeQueue(c *call, req *queueURLReq) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, e := s.queueByURL(req.QueueUrl)
	if e != nil {
		return nil, e
	}
	q.msgs = nil
	return struct{}{}, nil
}

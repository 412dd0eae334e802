package sqsfake

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

type sendFields struct {
	MessageBody       *string
	DelaySeconds      *int
	MessageAttributes map[string]AttributeValue
	MessageGroupId    string
}

type sendReq struct {
	QueueUrl *string
	sendFields
}

type sendResult struct {
	MessageId              string
	MD5OfMessageBody       string
	MD5OfMessageAttributes string `json:",omitempty"`
}

func (s *Server) sendMessage(c *call, req *sendReq) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, e := s.queueByURL(req.QueueUrl)
	if e != nil {
		return nil, e
	}
	m, e := s.newMessage(q, &req.sendFields)
	if e != nil {
		return nil, e
	}
	s.enqueue(q, m)
	return m.result(), nil
}

type batchEntry struct {
	Id string
	sendFields
}

type sendBatchReq struct {
	QueueUrl *string
	Entries  []batchEntry
}

type batchFailure struct {
	Id          string
	SenderFault bool
	Code        string
	Message     string
}

func (s *Server) sendMessageBatch(c *call, req *sendBatchReq) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, e := s.queueByURL(req.QueueUrl)
	if e != nil {
		return nil, e
	}
	ids := make([]string, len(req.Entries))
	total := 0
	for i, en := range req.Entries {
		ids[i] = en.Id
		total += size(&en.sendFields)
	}
	if e := checkBatch(ids); e != nil {
		return nil, e
	}
	if total > MaxMessageSize {
		return nil, errorf("BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong",
			"Batch requests cannot be longer than %d bytes. You have sent %d bytes.", MaxMessageSize, total)
	}
	type success struct {
		Id string
		sendResult
	}
	ok, failed := []success{}, []batchFailure{}
	for _, en := range req.Entries {
		if en.MessageBody != nil && s.entries[*en.MessageBody] > 0 {
			s.entries[*en.MessageBody]--
			failed = append(failed, batchFailure{Id: en.Id, Code: "InternalError", Message: "injected entry failure"})
			continue
		}
		m, e := s.newMessage(q, &en.sendFields)
		if e != nil {
			failed = append(failed, batchFailure{Id: en.Id, SenderFault: true, Code: e.query, Message: e.msg})
			continue
		}
		s.enqueue(q, m)
		ok = append(ok, success{en.Id, m.result()})
	}
	return map[string]any{"Successful": ok, "Failed": failed}, nil
}

// checkBatch applies SQS's rules for batch entry ids.
func checkBatch(ids []string) *apiError {
	switch {
	case len(ids) == 0:
		return errorf("EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", "There should be at least one entry in the request.")
	case len(ids) > maxBatch:
		return errorf("TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
			"Maximum number of entries per request are %d. You have sent %d.", maxBatch, len(ids))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" || len(id) > 80 || strings.IndexFunc(id, func(r rune) bool {
			return !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) >= 0 {
			return errorf("InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId", "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
		}
		if seen[id] {
			return errorf("BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "Id %s repeated.", id)
		}
		seen[id] = true
	}
	return nil
}

// size is what SQS counts against MaxMessageSize: the body and every attribute's name, type
// and value.
func size(f *sendFields) int {
	n := 0
	if f.MessageBody != nil {
		n = len(*f.MessageBody)
	}
	for k, v := range f.MessageAttributes {
		n += len(k) + len(v.DataType) + len(v.BinaryValue)
		if v.StringValue != nil {
			n += len(*v.StringValue)
		}
	}
	return n
}

// validText reports whether s holds only the characters SQS accepts (those legal in XML).
func validText(s string) bool {
	for _, r := range s {
		switch {
		case r == 0x9, r == 0xA, r == 0xD, r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return utf8.ValidString(s)
}

func validAttrName(n string) bool {
	l := strings.ToLower(n)
	if n == "" || len(n) > 256 || strings.HasPrefix(l, "aws.") || strings.HasPrefix(l, "amazon.") ||
		strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".") || strings.Contains(n, "..") {
		return false
	}
	return strings.IndexFunc(n, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0
}

// newMessage validates f as SQS does and builds the message. Callers hold s.mu.
func (s *Server) newMessage(q *queue, f *sendFields) (*message, *apiError) {
	if f.MessageBody == nil || *f.MessageBody == "" {
		return nil, missing("MessageBody")
	}
	body := *f.MessageBody
	if !validText(body) {
		return nil, errorf("InvalidMessageContents", "InvalidMessageContents", "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")
	}
	if n := size(f); n > MaxMessageSize {
		return nil, invalid("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", MaxMessageSize)
	}
	delay := q.delay
	if f.DelaySeconds != nil {
		delay = *f.DelaySeconds
	}
	if delay < 0 || delay > maxDelay {
		return nil, invalid("Value %d for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= %d.", delay, maxDelay)
	}
	if len(f.MessageAttributes) > maxAttributes {
		return nil, invalid("Number of message attributes [%d] exceeds the allowed maximum [%d].", len(f.MessageAttributes), maxAttributes)
	}
	for k, v := range f.MessageAttributes {
		base, _, _ := strings.Cut(v.DataType, ".")
		switch {
		case !validAttrName(k):
			return nil, invalid("Message attribute name '%s' is invalid.", k)
		case (base == "String" || base == "Number") && (v.StringValue == nil || *v.StringValue == "" || !validText(*v.StringValue)):
			return nil, invalid("Message (user) attribute '%s' must contain a non-empty value of type '%s'.", k, base)
		case base == "Binary" && len(v.BinaryValue) == 0:
			return nil, invalid("Message (user) attribute '%s' must contain a non-empty value of type 'Binary'.", k)
		case base != "String" && base != "Number" && base != "Binary":
			return nil, invalid("The type of message (user) attribute '%s' is invalid. You must use only the following supported type prefixes: Binary, Number, String.", k)
		}
	}
	if len(f.MessageGroupId) > 128 {
		return nil, invalid("MessageGroupId can be at most 128 characters long.")
	}
	now := time.Now()
	s.seq++
	return &message{
		seq: s.seq, id: newID(), body: body, attrs: f.MessageAttributes, group: f.MessageGroupId,
		sent: now, visibleAt: now.Add(time.Duration(delay) * time.Second), md5Body: md5Hex(body),
	}, nil
}

func (m *message) result() sendResult {
	return sendResult{MessageId: m.id, MD5OfMessageBody: m.md5Body, MD5OfMessageAttributes: MD5OfAttributes(m.attrs)}
}

// enqueue appends m to q and wakes receivers if it is visible now. Callers hold s.mu.
func (s *Server) enqueue(q *queue, m *message) {
	q.msgs = append(q.msgs, m)
	if !m.visibleAt.After(time.Now()) {
		q.wake()
	}
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// MD5OfAttributes is the checksum SQS returns as MD5OfMessageAttributes: over the attributes
// sorted by name, each as length-prefixed name and data type, a transport byte (1 string,
// 2 binary) and the length-prefixed value. "" when there are none.
func MD5OfAttributes(attrs map[string]AttributeValue) string {
	if len(attrs) == 0 {
		return ""
	}
	h := md5.New()
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[name]
		writeLen(h, []byte(name))
		writeLen(h, []byte(v.DataType))
		if v.StringValue != nil {
			h.Write([]byte{1})
			writeLen(h, []byte(*v.StringValue))
		} else {
			h.Write([]byte{2})
			writeLen(h, v.BinaryValue)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeLen(h hash.Hash, b []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	h.Write(n[:])
	h.Write(b)
}

type receiveReq struct {
	QueueUrl                    *string
	MaxNumberOfMessages         *int
	VisibilityTimeout           *int
	WaitTimeSeconds             *int
	AttributeNames              []string
	MessageSystemAttributeNames []string
	MessageAttributeNames       []string
}

type wireMessage struct {
	MessageId              string
	ReceiptHandle          string
	MD5OfBody              string
	Body                   string
	Attributes             map[string]string         `json:",omitempty"`
	MD5OfMessageAttributes string                    `json:",omitempty"`
	MessageAttributes      map[string]AttributeValue `json:",omitempty"`
}

func (s *Server) receiveMessage(c *call, req *receiveReq) (any, *apiError) {
	max, vis, wait := 1, -1, -1
	if req.MaxNumberOfMessages != nil {
		max = *req.MaxNumberOfMessages
	}
	if max < 1 || max > maxBatch {
		return nil, invalid("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and %d, if provided.", max, maxBatch)
	}
	if req.VisibilityTimeout != nil {
		if vis = *req.VisibilityTimeout; vis < 0 || vis > maxVisibility {
			return nil, invalid("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and %d, if provided.", vis, maxVisibility)
		}
	}
	if req.WaitTimeSeconds != nil {
		if wait = *req.WaitTimeSeconds; wait < 0 || wait > maxWait {
			return nil, invalid("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= %d, if provided.", wait, maxWait)
		}
	}
	var deadline time.Time
	for {
		s.mu.Lock()
		q, e := s.queueByURL(req.QueueUrl)
		if e != nil {
			s.mu.Unlock()
			return nil, e
		}
		if deadline.IsZero() {
			if wait < 0 {
				wait = q.wait
			}
			deadline = time.Now().Add(time.Duration(wait) * time.Second)
		}
		if vis < 0 {
			vis = q.visibility
		}
		out, next := s.take(q, max, vis, req)
		changed := q.changed
		s.mu.Unlock()
		left := time.Until(deadline)
		if len(out) > 0 || left <= 0 {
			return map[string]any{"Messages": out}, nil
		}
		if next > 0 && next < left {
			left = next
		}
		t := time.NewTimer(left)
		select {
		case <-changed:
		case <-t.C:
		case <-c.ctx.Done():
		case <-s.closed:
		}
		t.Stop()
		if c.ctx.Err() != nil {
			return map[string]any{"Messages": []wireMessage{}}, nil
		}
		select {
		case <-s.closed:
			return map[string]any{"Messages": []wireMessage{}}, nil
		default:
		}
	}
}

// take receives up to max visible messages of q, oldest first, moving those that have used up
// their receives to the DLQ on the way. When none is visible, next is how long until the first
// hidden one becomes visible (0 if none). Callers hold s.mu.
func (s *Server) take(q *queue, max, vis int, req *receiveReq) (out []wireMessage, next time.Duration) {
	now := time.Now()
	dlq := s.queueByArn(q.dlqArn)
	kept := q.msgs[:0]
	for _, m := range q.msgs {
		switch {
		case m.visibleAt.After(now):
			if d := m.visibleAt.Sub(now); next == 0 || d < next {
				next = d
			}
		case len(out) == max:
		case dlq != nil && q.maxReceive > 0 && m.received >= q.maxReceive:
			m.receipt, m.source, m.visibleAt = "", q.arn, now
			s.enqueue(dlq, m)
			continue
		default:
			m.received++
			if m.firstRecv.IsZero() {
				m.firstRecv = now
			}
			m.receipt = newReceipt(q.name, m.seq)
			m.visibleAt = now.Add(time.Duration(vis) * time.Second)
			out = append(out, m.wire(req))
		}
		kept = append(kept, m)
	}
	clear(q.msgs[len(kept):])
	q.msgs = kept
	if len(out) > 0 {
		next = 0
	}
	return out, next
}

func (m *message) wire(req *receiveReq) wireMessage {
	w := wireMessage{MessageId: m.id, ReceiptHandle: m.receipt, MD5OfBody: m.md5Body, Body: m.body}
	system := map[string]string{
		"ApproximateReceiveCount":          strconv.Itoa(m.received),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstRecv.UnixMilli(), 10),
		"SentTimestamp":                    strconv.FormatInt(m.sent.UnixMilli(), 10),
		"SenderId":                         "AIDAFAKESENDER",
	}
	if m.group != "" {
		system["MessageGroupId"] = m.group
	}
	if m.source != "" {
		system["DeadLetterQueueSourceArn"] = m.source
	}
	for _, n := range slices.Concat(req.AttributeNames, req.MessageSystemAttributeNames) {
		if n == "All" {
			w.Attributes = system
			break
		}
		if v, ok := system[n]; ok {
			if w.Attributes == nil {
				w.Attributes = map[string]string{}
			}
			w.Attributes[n] = v
		}
	}
	for k, v := range m.attrs {
		for _, n := range req.MessageAttributeNames {
			prefix, wild := strings.CutSuffix(n, ".*")
			if n == "All" || n == ".*" || n == k || wild && strings.HasPrefix(k, prefix+".") {
				if w.MessageAttributes == nil {
					w.MessageAttributes = map[string]AttributeValue{}
				}
				w.MessageAttributes[k] = v
				break
			}
		}
	}
	w.MD5OfMessageAttributes = MD5OfAttributes(w.MessageAttributes)
	return w
}

// Receipt handles name the queue, the message and the receive that issued them.
func newReceipt(queue string, seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(queue + "/" + strconv.FormatInt(seq, 10) + "/" + newID()))
}

// lookupReceipt finds the message h was issued for. It returns nil when the message is gone and
// an error when h is malformed, from another queue, or stale. Callers hold s.mu.
func lookupReceipt(q *queue, h string) (*message, *apiError) {
	bad := errorf("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", "The input receipt handle \"%s\" is not a valid receipt handle.", h)
	raw, err := base64.RawURLEncoding.DecodeString(h)
	parts := strings.Split(string(raw), "/")
	if err != nil || len(parts) != 3 || parts[0] != q.name {
		return nil, bad
	}
	seq, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return nil, bad
	}
	for _, m := range q.msgs {
		if m.seq == seq {
			if m.receipt != h {
				bad.msg = "The receipt handle has expired: the message was received again."
				return nil, bad
			}
			return m, nil
		}
	}
	return nil, nil
}

type receiptReq struct {
	QueueUrl          *string
	ReceiptHandle     string
	VisibilityTimeout *int
}

func (s *Server) deleteMessage(c *call, req *receiptReq) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, e := s.queueByURL(req.QueueUrl)
	if e != nil {
		return nil, e
	}
	return struct{}{}, s.delete(q, req.ReceiptHandle)
}

func (s *Server) delete(q *queue, h string) *apiError {
	m, e := lookupReceipt(q, h)
	if m != nil {
		q.msgs = slices.DeleteFunc(q.msgs, func(x *message) bool { return x == m })
	}
	return e // a message already gone deletes fine, as in SQS
}

func (s *Server) changeVisibility(c *call, req *receiptReq) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, e := s.queueByURL(req.QueueUrl)
	if e != nil {
		return nil, e
	}
	return struct{}{}, s.setVisibility(q, req)
}

func (s *Server) setVisibility(q *queue, req *receiptReq) *apiError {
	if req.VisibilityTimeout == nil {
		return missing("VisibilityTimeout")
	}
	d := *req.VisibilityTimeout
	if d < 0 || d > maxVisibility {
		return invalid("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and %d.", d, maxVisibility)
	}
	m, e := lookupReceipt(q, req.ReceiptHandle)
	switch {
	case e != nil:
		return e
	case m == nil:
		return invalid("Value %s for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.", req.ReceiptHandle)
	case !m.visibleAt.After(time.Now()):
		return errorf("MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", "Message is not in flight.")
	}
	m.visibleAt = time.Now().Add(time.Duration(d) * time.Second)
	if d == 0 {
		q.wake()
	}
	return nil
}

type receiptBatchReq struct {
	QueueUrl *string
	Entries  []struct {
		Id string
		receiptReq
	}
}

// eachEntry runs fn for every entry of a batch and reports per-entry results.
func (s *Server) eachEntry(req *receiptBatchReq, fn func(*queue, *receiptReq) *apiError) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, e := s.queueByURL(req.QueueUrl)
	if e != nil {
		return nil, e
	}
	ids := make([]string, len(req.Entries))
	for i, en := range req.Entries {
		ids[i] = en.Id
	}
	if e := checkBatch(ids); e != nil {
		return nil, e
	}
	ok, failed := []map[string]string{}, []batchFailure{}
	for _, en := range req.Entries {
		if e := fn(q, &en.receiptReq); e != nil {
			failed = append(failed, batchFailure{Id: en.Id, SenderFault: true, Code: e.query, Message: e.msg})
		} else {
			ok = append(ok, map[string]string{"Id": en.Id})
		}
	}
	return map[string]any{"Successful": ok, "Failed": failed}, nil
}

func (s *Server) deleteMessageBatch(c *call, req *receiptBatchReq) (any, *apiError) {
	return s.eachEntry(req, func(q *queue, r *receiptReq) *apiError { return s.delete(q, r.ReceiptHandle) })
}

func (s *Server) changeVisibilityBatch(c *call, req *receiptBatchReq) (any, *apiError) {
	return s.eachEntry(req, s.setVisibility)
}

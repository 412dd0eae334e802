package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"herald/internal/eventbus/eventbusfake"
	"herald/internal/stackbox/asl"
	"herald/internal/stackbox/iam"
)

// What the box does besides running the stack: it signs as principals that try a side door
// (probes and intruders, whose refused calls are the point, not defects of the template),
// injects an outage of a queue, and delivers the operator events EventBridge routes to the
// template's rule targets, with the topic's and its key's policies checked as AWS checks them.

// boxDoors is the state of all that.
type boxDoors struct {
	mu      sync.Mutex
	probes  map[string]bool // access key ids whose calls are probes
	outages map[string]bool // queue ARNs the state machines' SendMessage fails on
	// topics holds what EventBridge delivered to each SNS topic of the template, by topic ARN.
	topics map[string][]Delivery
	// targets counts deliveries to the other targets (functions), by rule name.
	targets map[string]int
}

// Delivery is an operator event an EventBridge rule delivered to a target.
type Delivery struct {
	Rule       string
	Source     string
	DetailType string
	Detail     string
}

func (d *boxDoors) init() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.probes == nil {
		d.probes, d.outages = map[string]bool{}, map[string]bool{}
		d.topics, d.targets = map[string][]Delivery{}, map[string]int{}
	}
}

// ProbeCredentials returns an access key id that signs as principal (a role of the stack) for
// a test of what that principal may not do: its calls are checked like any other, but a
// refusal is what the probe wants, not a defect of the template, and an allowed probe uses no
// grant.
func (b *Box) ProbeCredentials(principal string) string {
	b.doors.init()
	b.credMu.Lock()
	defer b.credMu.Unlock()
	k := fmt.Sprintf("AKIASTACKPROBE%06d", len(b.creds)+1)
	b.creds[k] = principal
	b.doors.mu.Lock()
	b.doors.probes[k] = true
	b.doors.mu.Unlock()
	return k
}

// AddIntruder lets the box sign as a principal outside the stack whose own policies grant it
// much — a role of the account with broad rights — and returns its access key id. Its refused
// calls are not defects of the template: they are what the isolation promises.
func (b *Box) AddIntruder(principal string, identity iam.Policy) string {
	b.recorder.mu.Lock()
	b.recorder.identity[principal] = []iam.Policy{identity}
	b.recorder.mu.Unlock()
	return b.credential(principal)
}

func (b *Box) isProbe(akid string) bool {
	b.doors.mu.Lock()
	defer b.doors.mu.Unlock()
	return b.doors.probes[akid]
}

// FailQueueSends makes every SendMessage the state machines make to queue (a short name, as
// Queue takes) fail as an SQS outage would, until RestoreQueueSends. Executions started
// meanwhile retry without their backoff's delays, so an outage outlasts their retries in
// seconds.
func (b *Box) FailQueueSends(queue string) {
	b.doors.init()
	b.doors.mu.Lock()
	defer b.doors.mu.Unlock()
	b.doors.outages[b.Queue(queue).ARN] = true
}

// RestoreQueueSends ends every injected outage.
func (b *Box) RestoreQueueSends() {
	b.doors.init()
	b.doors.mu.Lock()
	defer b.doors.mu.Unlock()
	clear(b.doors.outages)
}

func (b *Box) outage(queueURL string) bool {
	b.doors.mu.Lock()
	defer b.doors.mu.Unlock()
	return b.doors.outages[b.queueARN(queueURL)]
}

func (b *Box) outages() bool {
	b.doors.mu.Lock()
	defer b.doors.mu.Unlock()
	return len(b.doors.outages) > 0
}

// hurriedClock is real time whose sleeps last at most 50ms: retries during an injected outage.
type hurriedClock struct{}

func (hurriedClock) Now() time.Time { return time.Now() }

func (hurriedClock) Sleep(ctx context.Context, d time.Duration) error {
	return asl.RealClock{}.Sleep(ctx, min(d, 50*time.Millisecond))
}

// servicePublish checks that the AWS service principal may publish to topic on behalf of
// source, as SNS checks it: the topic's policy (with aws:SourceArn and aws:SourceAccount), then,
// for an encrypted topic, the key's policy for the data key SNS asks KMS for on the publisher's
// behalf — with the topic's ARN as encryption context and without the source keys, which the
// publishing service does not send to KMS.
func (b *Box) servicePublish(caller, service, source, topic string) error {
	c := b.recorder.check(caller, iam.Request{Principal: service, Action: "sns:Publish", Resource: topic,
		Context: map[string]string{"aws:SourceArn": source, "aws:SourceAccount": AccountID}})
	if !c.Allowed {
		return fmt.Errorf("topic policy: %s", c.Reason)
	}
	if key, ok := b.IAM.KeyOfTopic(topic); ok {
		for _, action := range []string{"kms:GenerateDataKey", "kms:Decrypt"} {
			c := b.recorder.check(caller, iam.Request{Principal: service, Action: action, Resource: key,
				Context: map[string]string{"kms:EncryptionContext:aws:sns:topicArn": topic, "kms:ViaService": "sns." + Region + ".amazonaws.com"}})
			if !c.Allowed {
				return fmt.Errorf("key policy: %s", c.Reason)
			}
		}
	}
	return nil
}

// TopicDeliveries returns what EventBridge rules delivered to the SNS topic topicARN.
func (b *Box) TopicDeliveries(topicARN string) []Delivery {
	b.doors.init()
	b.doors.mu.Lock()
	defer b.doors.mu.Unlock()
	return append([]Delivery(nil), b.doors.topics[topicARN]...)
}

// routeEvents serves PutEvents with the event bus fake, then routes each accepted entry to
// the template's rules on its bus, as EventBridge does after it answers.
func (b *Box) routeEvents(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		if _, err := body.ReadFrom(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = readCloser{bytes.NewReader(body.Bytes())}
		bw := &bufferedWriter{header: http.Header{}}
		next.ServeHTTP(bw, r)
		for k, v := range bw.header {
			w.Header()[k] = v
		}
		if bw.status == 0 {
			bw.status = http.StatusOK
		}
		w.WriteHeader(bw.status)
		_, _ = w.Write(bw.buf.Bytes())
		if bw.status != http.StatusOK || !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".PutEvents") {
			return
		}
		var in struct {
			Entries []struct{ EventBusName, Source, DetailType, Detail string }
		}
		var out struct {
			Entries []struct{ EventId, ErrorCode string }
		}
		if json.Unmarshal(body.Bytes(), &in) != nil || json.Unmarshal(bw.buf.Bytes(), &out) != nil {
			return
		}
		for i, e := range in.Entries {
			if i < len(out.Entries) && out.Entries[i].EventId != "" {
				b.route(eventbusfake.Entry{EventBusName: e.EventBusName, Source: e.Source, DetailType: e.DetailType, Detail: e.Detail})
			}
		}
	})
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// rule is an AWS::Events::Rule of the template.
type rule struct {
	name, arn, bus string
	sources, types []string
	targets        []map[string]any
}

func (b *Box) rules() []rule {
	var out []rule
	for _, id := range b.Template.LogicalIDs("AWS::Events::Rule") {
		p, err := b.props(id)
		if err != nil || str(p["State"]) == "DISABLED" {
			continue
		}
		// The rule's ARN as the template's policies name it (Fn::GetAtt Arn).
		r := rule{name: str(p["Name"]), arn: b.Resolver.Resources[id].Attrs["Arn"], bus: str(p["EventBusName"])}
		pattern, _ := p["EventPattern"].(map[string]any)
		for k, v := range pattern {
			vals, _ := v.([]any)
			var ss []string
			for _, x := range vals {
				ss = append(ss, str(x))
			}
			switch k {
			case "source":
				r.sources = ss
			case "detail-type":
				r.types = ss
			default:
				b.log.Warn("stackbox: rule pattern key not modelled; the rule matches nothing", "rule", r.name, "key", k)
				r.sources = nil
			}
		}
		for _, t := range p["Targets"].([]any) {
			if m, ok := t.(map[string]any); ok {
				r.targets = append(r.targets, m)
			}
		}
		out = append(out, r)
	}
	return out
}

// route delivers one accepted event to the targets of every rule it matches. A target that
// refuses it (a topic policy, a key policy, a function's permission) has the event put on the
// target's dead-letter queue, if the queue's policy lets the rule send there.
func (b *Box) route(e eventbusfake.Entry) {
	b.doors.init()
	bus := e.EventBusName
	if i := strings.LastIndex(bus, "/"); i >= 0 {
		bus = bus[i+1:]
	}
	for _, r := range b.rules() {
		if r.bus != bus || !slices.Contains(r.sources, e.Source) || !slices.Contains(r.types, e.DetailType) {
			continue
		}
		d := Delivery{Rule: r.name, Source: e.Source, DetailType: e.DetailType, Detail: e.Detail}
		for _, t := range r.targets {
			err := b.deliver(r, str(t["Arn"]), d)
			if err == nil {
				continue
			}
			b.log.Warn("stackbox: rule target refused the event", "rule", r.name, "target", str(t["Arn"]), "error", err)
			dl, _ := t["DeadLetterConfig"].(map[string]any)
			q, ok := b.QueueByARN(str(dl["Arn"]))
			if !ok {
				b.log.Error("stackbox: event dropped: the target has no dead-letter queue", "rule", r.name, "target", str(t["Arn"]))
				continue
			}
			raw, _ := json.Marshal(map[string]any{"source": e.Source, "detail-type": e.DetailType, "detail": json.RawMessage(e.Detail)})
			if err := b.serviceSend(b.ctx, "events.amazonaws.com", r.arn, q, string(raw)); err != nil {
				b.log.Error("stackbox: event dropped: its dead-letter queue refused it", "rule", r.name, "error", err)
			}
		}
	}
}

// deliver hands d to one target as events.amazonaws.com would: a topic of the template must let
// the rule publish, and the topic's key must let EventBridge encrypt for that topic (SNS asks
// KMS with the topic's ARN as encryption context; EventBridge sends no aws:SourceAccount or
// aws:SourceArn there); a function's permission must let the rule invoke it.
func (b *Box) deliver(r rule, target string, d Delivery) error {
	caller := "eventbridge rule " + r.name
	switch {
	case strings.HasPrefix(target, "arn:aws:sns:"):
		if err := b.servicePublish(caller, "events.amazonaws.com", r.arn, target); err != nil {
			return err
		}
		b.doors.mu.Lock()
		b.doors.topics[target] = append(b.doors.topics[target], d)
		b.doors.mu.Unlock()
		return nil
	case strings.HasPrefix(target, "arn:aws:lambda:"):
		// Slack is outside the box: the function is authorized, not run.
		c := b.recorder.check(caller, iam.Request{Principal: "events.amazonaws.com", Action: "lambda:InvokeFunction", Resource: target,
			Context: map[string]string{"aws:SourceArn": r.arn, "aws:SourceAccount": AccountID}})
		if !c.Allowed {
			return fmt.Errorf("function permission: %s", c.Reason)
		}
		b.doors.mu.Lock()
		b.doors.targets[r.name]++
		b.doors.mu.Unlock()
		return nil
	}
	return fmt.Errorf("target %s is not modelled by the box", target)
}

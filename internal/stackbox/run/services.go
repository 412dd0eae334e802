package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"gopkg.in/yaml.v3"

	"herald/internal/eventbus/eventbusfake"
	"herald/internal/s3/s3fake"
	"herald/internal/scheduler/schedulerfake"
	"herald/internal/sqs/sqsfake"
	"herald/internal/webpush"
)

// startServices starts the fakes, each behind its recording proxy, and sets the endpoints the
// functions get.
func (b *Box) startServices() error {
	b.doors.init()
	b.SQS = sqsfake.New()
	b.Events = eventbusfake.New()
	b.S3 = s3fake.New()
	b.Secrets = &Secrets{values: map[string]string{}}
	group := ""
	for _, id := range b.Template.LogicalIDs("AWS::Scheduler::ScheduleGroup") {
		group = str(b.Template.Resources[id].Properties["Name"])
	}
	b.Sched = schedulerfake.New(schedulerfake.Options{Groups: []string{group}})
	b.States = newStates(b)
	ddb, err := reverseProxy(b.opts.DynamoDB)
	if err != nil {
		return err
	}
	schedURL := b.Sched.URL
	services := []struct {
		env   string
		parse parser
		deny  func(http.ResponseWriter, string)
		next  http.Handler
	}{
		{"DYNAMODB", b.dynamoRequests, jsonDeny, ddb},
		{"SQS", b.sqsRequests, jsonDeny, accountRewrite(sqsfake.Account, b.SQS)},
		{"SCHEDULER", b.schedulerRequests, restDeny, forward(schedURL)},
		{"SFN", b.statesRequests, jsonDeny, b.States},
		{"EVENTBRIDGE", b.eventsRequests, jsonDeny, b.routeEvents(b.Events)},
		{"S3", b.s3Requests, xmlDeny, b.S3},
		{"SECRETS_MANAGER", b.secretsRequests, jsonDeny, b.Secrets},
		{"SESV2", b.sesRequests, restDeny, b.Sandbox.Handler()},
		{"LAMBDA", b.lambdaRequests, restDeny, &b.Mappings},
	}
	for _, s := range services {
		u, err := b.listen(b.proxy(strings.ToLower(s.env), s.parse, s.deny, s.next))
		if err != nil {
			return err
		}
		b.endpoints["AWS_ENDPOINT_URL_"+s.env] = u
	}
	return nil
}

// forward passes requests to a fake served on its own URL.
func forward(base string) http.Handler {
	h, _ := reverseProxy(base)
	return h
}

// Endpoint is the box's URL for an AWS service ("SQS", "DYNAMODB", …).
func (b *Box) Endpoint(service string) string { return b.endpoints["AWS_ENDPOINT_URL_"+service] }

// AWSConfig is an SDK configuration that signs as principal.
func (b *Box) AWSConfig(principal string) aws.Config {
	k, s := b.Credentials(principal)
	return aws.Config{Region: Region, Credentials: credentials.NewStaticCredentialsProvider(k, s, "")}
}

// SQSClient is an SQS client of the box signing as principal.
func (b *Box) SQSClient(principal string) *awssqs.Client {
	return awssqs.NewFromConfig(b.AWSConfig(principal), func(o *awssqs.Options) { o.BaseEndpoint = aws.String(b.Endpoint("SQS")) })
}

// sqsAdmin talks to the SQS fake directly (setup, not part of the IAM proof).
func (b *Box) sqsAdmin() (*awssqs.Client, error) {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.admin != nil {
		return b.admin, nil
	}
	u, err := b.listen(b.SQS)
	if err != nil {
		return nil, err
	}
	b.admin = awssqs.NewFromConfig(aws.Config{Region: Region, Credentials: credentials.NewStaticCredentialsProvider("admin", "admin", "")},
		func(o *awssqs.Options) { o.BaseEndpoint = aws.String(u) })
	return b.admin, nil
}

// createQueues creates every AWS::SQS::Queue, dead-letter queues first.
func (b *Box) createQueues(ctx context.Context) error {
	admin, err := b.sqsAdmin()
	if err != nil {
		return err
	}
	ids := b.Template.LogicalIDs("AWS::SQS::Queue")
	type pending struct {
		id    string
		props map[string]any
	}
	var later []pending
	for _, id := range ids {
		p, err := b.props(id)
		if err != nil {
			return err
		}
		if p["RedrivePolicy"] != nil {
			later = append(later, pending{id, p})
			continue
		}
		if err := b.createQueue(ctx, admin, id, p); err != nil {
			return err
		}
	}
	for _, q := range later {
		if err := b.createQueue(ctx, admin, q.id, q.props); err != nil {
			return err
		}
	}
	return nil
}

func (b *Box) createQueue(ctx context.Context, admin *awssqs.Client, id string, p map[string]any) error {
	a := b.Resolver.Resources[id]
	name := a.Attrs["QueueName"]
	attrs := map[string]string{}
	vis := num(p["VisibilityTimeout"], 30)
	attrs["VisibilityTimeout"] = fmt.Sprint(vis)
	if d := p["DelaySeconds"]; d != nil {
		attrs["DelaySeconds"] = str(d)
	}
	if rp, ok := p["RedrivePolicy"].(map[string]any); ok {
		dlq := strings.Replace(str(rp["deadLetterTargetArn"]), ":"+AccountID+":", ":"+sqsfake.Account+":", 1)
		attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, dlq, num(rp["maxReceiveCount"], 5))
	}
	if _, err := admin.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs}); err != nil {
		return fmt.Errorf("queue %s: %w", name, err)
	}
	b.Queues[name] = Queue{LogicalID: id, Name: name, URL: a.Ref, ARN: a.Attrs["Arn"], VisibilityTimeout: vis}
	return nil
}

// QueueByARN finds a queue of the template.
func (b *Box) QueueByARN(arn string) (Queue, bool) {
	q, ok := b.Queues[arn[strings.LastIndexByte(arn, ':')+1:]]
	return q, ok && q.ARN == arn
}

// createTables creates every AWS::DynamoDB::Table on DynamoDB Local as declared.
func (b *Box) createTables(ctx context.Context) error {
	db := dynamodb.New(dynamodb.Options{Region: Region, BaseEndpoint: aws.String(b.opts.DynamoDB),
		Credentials: credentials.NewStaticCredentialsProvider("stackbox", "stackbox", "")})
	for _, id := range b.Template.LogicalIDs("AWS::DynamoDB::Table") {
		p, err := b.props(id)
		if err != nil {
			return err
		}
		name := b.Resolver.Resources[id].Ref
		var in dynamodb.CreateTableInput
		delete(p, "Tags")
		raw, _ := json.Marshal(map[string]any{
			"TableName": name, "AttributeDefinitions": p["AttributeDefinitions"], "KeySchema": p["KeySchema"],
			"GlobalSecondaryIndexes": p["GlobalSecondaryIndexes"], "LocalSecondaryIndexes": p["LocalSecondaryIndexes"],
		})
		var shape struct {
			TableName              string
			AttributeDefinitions   []ddbtypes.AttributeDefinition
			KeySchema              []ddbtypes.KeySchemaElement
			GlobalSecondaryIndexes []struct {
				IndexName  string
				KeySchema  []ddbtypes.KeySchemaElement
				Projection struct {
					ProjectionType   string
					NonKeyAttributes []string
				}
			}
			LocalSecondaryIndexes []struct {
				IndexName  string
				KeySchema  []ddbtypes.KeySchemaElement
				Projection struct {
					ProjectionType   string
					NonKeyAttributes []string
				}
			}
		}
		if err := json.Unmarshal(raw, &shape); err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
		in.TableName, in.AttributeDefinitions, in.KeySchema = aws.String(name), shape.AttributeDefinitions, shape.KeySchema
		in.BillingMode = ddbtypes.BillingModePayPerRequest
		for _, g := range shape.GlobalSecondaryIndexes {
			in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, ddbtypes.GlobalSecondaryIndex{IndexName: aws.String(g.IndexName), KeySchema: g.KeySchema,
				Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionType(g.Projection.ProjectionType), NonKeyAttributes: g.Projection.NonKeyAttributes}})
		}
		for _, g := range shape.LocalSecondaryIndexes {
			in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, ddbtypes.LocalSecondaryIndex{IndexName: aws.String(g.IndexName), KeySchema: g.KeySchema,
				Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionType(g.Projection.ProjectionType), NonKeyAttributes: g.Projection.NonKeyAttributes}})
		}
		// DynamoDB Local outlives a box: a table left by an earlier run starts over.
		if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err == nil {
			b.log.Info("stackbox: deleted the table an earlier run left", "table", name)
		}
		if _, err := db.CreateTable(ctx, &in); err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
		if ttl, ok := p["TimeToLiveSpecification"].(map[string]any); ok && ttl["Enabled"] == true {
			if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(name),
				TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(str(ttl["AttributeName"])), Enabled: aws.Bool(true)}}); err != nil {
				return fmt.Errorf("table %s: TTL: %w", name, err)
			}
		}
		b.Tables = append(b.Tables, name)
	}
	return nil
}

// writeConfig writes the box's herald.yaml: the config layer's file, with the providers pointed
// at the sandbox (FCM without credentials, SES and Twilio at its URL) and APNs left out, and
// makes up a value for every secret it names.
func (b *Box) writeConfig() error {
	path := b.opts.ConfigFile
	if path == "" {
		var err error
		if path, err = configFromAssembly(b.Template, b.opts.Assembly); err != nil {
			return err
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	sb := b.Sandbox.URL()
	if p, ok := cfg["providers"].(map[string]any); ok {
		if f, ok := p["fcm"].(map[string]any); ok {
			if apps, ok := f["apps"].(map[string]any); ok {
				for _, a := range apps {
					if app, ok := a.(map[string]any); ok {
						app["endpoint"], app["credentials_secret"], app["credentials_file"] = sb+"/v1", "", ""
					}
				}
			}
		}
		delete(p, "apns")
		if s, ok := p["ses"].(map[string]any); ok && str(s["from"]) != "" {
			s["endpoint"] = b.Endpoint("SESV2")
		}
		if t, ok := p["twilio"].(map[string]any); ok && str(t["account_sid"]) != "" {
			t["base_url"] = sb
		}
		// A VAPID private key must be the other half of the public key in the file: a fresh
		// pair, the public half written over the file's.
		if w, ok := p["webpush"].(map[string]any); ok && str(w["vapid_private_key_secret"]) != "" {
			pub, priv, err := webpush.GenerateKeys()
			if err != nil {
				return err
			}
			w["vapid_public_key"] = pub
			b.Secrets.Put(str(w["vapid_private_key_secret"]), priv)
		}
	}
	// Every secret the file names gets a value a function can use.
	var secretNames func(v any, key string)
	secretNames = func(v any, key string) {
		switch c := v.(type) {
		case map[string]any:
			for k, w := range c {
				secretNames(w, k)
			}
		case []any:
			for _, w := range c {
				secretNames(w, key)
			}
		case string:
			if strings.HasSuffix(key, "_secret") && c != "" && b.Secrets.Value(c) == "" {
				b.Secrets.Put(c, b.secretValue(key, c))
			}
		}
	}
	secretNames(cfg, "")
	b.Config = cfg
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.dir, "herald.yaml"), out, 0o600)
}

// secretValue makes up a secret's value by what it holds.
func (b *Box) secretValue(key, name string) string {
	switch key {
	case "encryption_key_secret":
		return randomKey()
	case "api_key_secret":
		return "stackbox-" + strings.ReplaceAll(name, "/", "-")
	}
	// Letters and digits suit every token format (Twilio's auth token is 32 of them).
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:16])
}

// Secrets is a Secrets Manager holding made-up values, serving GetSecretValue and
// DescribeSecret in the service's JSON 1.1 protocol.
type Secrets struct {
	mu     sync.Mutex
	values map[string]string
}

// Put stores a secret.
func (s *Secrets) Put(name, value string) {
	s.mu.Lock()
	s.values[name] = value
	s.mu.Unlock()
}

// Value returns a secret's value.
func (s *Secrets) Value(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.values[name]
}

// ARN is the secret's ARN: its name and the six random characters Secrets Manager appends.
func (s *Secrets) ARN(id string) string {
	if strings.HasPrefix(id, "arn:") {
		return id
	}
	return fmt.Sprintf("arn:aws:secretsmanager:%s:%s:secret:%s-%s", Region, AccountID, id, "Ab12Cd")
}

func (s *Secrets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in struct{ SecretId string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	name := in.SecretId
	if _, rest, ok := strings.Cut(name, ":secret:"); ok && len(rest) > 7 {
		name = rest[:len(rest)-7] // an ARN: the name without the random suffix
	}
	s.mu.Lock()
	v, ok := s.values[name]
	s.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "ResourceNotFoundException", "message": "Secrets Manager can't find the specified secret."})
		return
	}
	out := map[string]any{"ARN": s.ARN(name), "Name": name}
	if target(r) == "GetSecretValue" {
		out["SecretString"], out["VersionId"], out["VersionStages"] = v, "00000000-0000-0000-0000-000000000001", []string{"AWSCURRENT"}
	}
	_ = json.NewEncoder(w).Encode(out)
}

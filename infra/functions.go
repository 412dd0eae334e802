package main

import (
	"fmt"
	"maps"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"herald/internal/ddb"
	"herald/internal/notify"
)

// DiscoverFunctions lists the directories under dir (functions/): each is one Lambda. A missing
// dir means none yet.
func DiscoverFunctions(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discover functions: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(e.Name(), "_") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// actions are the DynamoDB actions a function performs on one table, without "dynamodb:".
type actions []string

// wiring is what a function touches besides its own queues and log group: the one place that
// says who may do what, so least privilege is reviewed here and nowhere else.
type wiring struct {
	// tables are the exact DynamoDB actions the function's code performs, by table, or by
	// "<table>/index/<index>" for a Query of an index: what the code calls, followed from the
	// function's main through internal/awsenv into internal/ddb (TransactWriteItems is authorized
	// as the Put, Update and Delete it holds; no Herald code checks, describes or streams a
	// table, so CDK's grant helpers' ConditionCheckItem, DescribeTable and stream reads are not
	// granted). The stack in a box proves each grant used, or infra/iam-allowlist.txt says why
	// not. The connections table's entries apply only where the live inbox is deployed.
	tables map[string]actions
	sends  func(h *herald) []string // logical queues it sends to
	events bool                     // puts operator events on the environment's event bus
}

func lanes(stage string) []string {
	var out []string
	for _, l := range notify.Lanes {
		out = append(out, notify.LaneQueue(stage, l))
	}
	return out
}

var functionWiring = map[string]wiring{
	// POST /v1/notifications hands the request to the service's ingest queue; devices, contacts,
	// preferences and the inbox are read and written directly. DELETE /v1/users/{user} erases
	// the user (internal/erasure): it deletes their items, rewrites their delivery records and
	// suppressions, and asks cleanup to finish what it could not.
	"api": {
		tables: map[string]actions{
			"notifications": {"BatchGetItem", "GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"},
			"deliveries":    {"BatchGetItem", "UpdateItem"}, "deliveries/index/by_notification": {"Query"},
			"users":        {"BatchGetItem", "GetItem", "Query", "BatchWriteItem", "PutItem", "UpdateItem", "DeleteItem"},
			"inbox-items":  {"BatchGetItem", "Query", "BatchWriteItem", "UpdateItem", "DeleteItem"},
			"suppressions": {"UpdateItem"},
			"connections":  {"DeleteItem"}, "connections/index/by_user": {"Query"},
		},
		sends: func(h *herald) []string {
			var out []string
			for _, s := range h.cfg.Services {
				out = append(out, notify.IngestQueue(s.Name))
			}
			return append(out, notify.StageCleanup)
		},
	},
	// Validates, dedupes, stores, arms schedules for send_at, fans out to prepare — or, for a
	// small realtime notification, takes the express path (docs/design.md §3): resolves its
	// recipients (users, suppressions), writes its inbox items, sends through the providers under
	// the shared rate limiter (ratelimit, the providers' secrets and SES), and hands retries and
	// interrupted sends to the stage queues (deliveries, send, record, cleanup).
	"ingest": {
		// users: also a reserved campaign's fire sizes what is left of an uploaded list's audience.
		tables: map[string]actions{
			"notifications": {"BatchGetItem", "GetItem", "Query", "BatchWriteItem", "PutItem", "UpdateItem"},
			"deliveries":    {"PutItem"}, "inbox-items": {"PutItem"}, "ratelimit": {"UpdateItem"},
			"users": {"BatchGetItem", "Query"}, "suppressions": {"BatchGetItem"},
			"connections": {"DeleteItem"}, "connections/index/by_user": {"Query"},
		},
		sends: func(*herald) []string {
			return append(append(append(lanes(notify.StagePrepare), notify.LaneQueue(notify.StageSend, notify.LaneRealtime)),
				notify.LaneQueue(notify.StageRecord, notify.LaneRealtime)), notify.StageCleanup)
		},
		events: true, // large_send_started
	},
	// Resolves recipients, writes inbox items and deliveries, batches sends.
	"prepare": {
		tables: map[string]actions{
			"notifications": {"BatchGetItem", "GetItem", "Query", "PutItem", "UpdateItem"},
			"deliveries":    {"BatchGetItem", "PutItem"}, "inbox-items": {"PutItem"},
			"users": {"BatchGetItem", "Query"}, "suppressions": {"BatchGetItem"},
			"connections": {"DeleteItem"}, "connections/index/by_user": {"Query"},
		},
		sends:  func(*herald) []string { return append(lanes(notify.StageSend), lanes(notify.StageRecord)...) },
		events: true, // message_dead_lettered, as every SQS consumer
	},
	// Claims deliveries, waits on the shared rate limiter, sends, re-enqueues retries. An
	// AlimTalk delivery that falls back to SMS reads the user's preferences and the
	// suppressions first, and creates the SMS delivery (pipeline.fallBack).
	// Every stage that resolves or sends reads the erasures' tombstones (notify.Tombstones: a
	// Query of the notifications table).
	"send": {
		tables: map[string]actions{
			"notifications": {"BatchGetItem", "GetItem", "Query", "PutItem", "UpdateItem"},
			"deliveries":    {"BatchGetItem", "PutItem", "UpdateItem"}, "ratelimit": {"UpdateItem"},
			"users": {"BatchGetItem"}, "suppressions": {"BatchGetItem"},
		},
		sends: func(*herald) []string {
			return append(append(lanes(notify.StageSend), lanes(notify.StageRecord)...), notify.StageCleanup)
		},
		events: true,
	},
	"record": {tables: map[string]actions{"notifications": {"BatchGetItem", "GetItem", "UpdateItem"}}, events: true},
	// Removes dead tokens and suppresses dead addresses; finishes the erasures the api function
	// began (the same calls as its erasure), and sends itself the rest of a long one.
	"cleanup": {
		tables: map[string]actions{
			"notifications": {"GetItem", "Query", "PutItem", "UpdateItem"},
			"deliveries":    {"UpdateItem"}, "deliveries/index/by_notification": {"Query"},
			"users":        {"BatchGetItem", "GetItem", "Query", "BatchWriteItem", "DeleteItem"},
			"inbox-items":  {"Query", "BatchWriteItem"},
			"suppressions": {"PutItem", "UpdateItem"},
			"connections":  {"DeleteItem"}, "connections/index/by_user": {"Query"},
		},
		sends:  func(*herald) []string { return []string{notify.StageCleanup} },
		events: true,
	},
	// Turns SES bounces and complaints into suppressions.
	"bounce": {tables: map[string]actions{"suppressions": {"PutItem"}}, events: true},
	// The campaign state machine's steps (CheckWindow, FetchPage, SaveCursor).
	// Its last step asks record-bulk to settle the campaign's notification once the audience is
	// dispatched (Pipeline.EnqueueRecord; campaigns run on the bulk lane).
	"campaign": {
		tables: map[string]actions{
			"notifications": {"BatchGetItem", "GetItem", "PutItem", "UpdateItem"},
			"users":         {"BatchGetItem", "Query"},
			"connections":   {"Scan", "DeleteItem"}, // a broadcast's live events (wsapi.PublishBroadcast)
		},
		sends:  func(*herald) []string { return []string{notify.LaneQueue(notify.StageRecord, notify.LaneBulk)} },
		events: true,
	},
	// Appends uploaded lists to the users table (and keeps its import markers there); reads S3
	// objects under lists/ only (addAudience).
	audienceFunction: {tables: map[string]actions{"users": {"BatchGetItem", "GetItem", "Query", "BatchWriteItem", "PutItem", "UpdateItem"}}, events: true},
	// Posts operator events from the bus to Slack (addEventAlerts subscribes it): no table, no
	// queue, one secret (the webhook URL).
	alertsFunction: {},
	// The operator routes (/v1/admin/…): queue depths, dead letters, redrive, and re-arming
	// reserved sends from the notifications table (which lists SCHEDULED notifications and
	// campaigns). Its queue and scheduler rights, and its appends to the audit log, are granted
	// in addFunction.
	// The console's view of one notification reads its deliveries too; its operators cancel,
	// reschedule, pause and resume notifications and campaigns, which the api function does for
	// services, so it writes the notifications table as api does (campaign executions in
	// campaign.go); a campaign's progress reads what is left of its audience in users.
	// Its PutItem of audit entries and export jobs is granted on those keys only (AppendAuditLog,
	// exports.go). DescribeTable: guregu/dynamo describes the table for a filtered, limited
	// Query that ends without a LastEvaluatedKey (ListReservedCampaigns, a filtered ListAudit).
	adminFunction: {tables: map[string]actions{
		"notifications": {"BatchGetItem", "GetItem", "Query", "Scan", "DescribeTable", "UpdateItem"},
		"deliveries":    {"BatchGetItem"}, "deliveries/index/by_notification": {"Query"},
		"users": {"GetItem"},
	},
		// POST /v1/admin/exports queues the job for the export function.
		sends: func(h *herald) []string {
			if _, ok := h.queueByName[notify.QueueExport]; ok {
				return []string{notify.QueueExport}
			}
			return nil
		}},
	// Streams a notification's deliveries, a service's notifications or the audit log (in the
	// notifications table) into the exports bucket; its job writes, its Scan of the suppressions
	// table (suppressions exports) and its S3 rights under exports/ only are granted in
	// addExports.
	// An unmasked deliveries export recovers each address from the notification's recipients and
	// its users' devices and contacts (users, read; the contacts key, as every function). A user
	// export reads the user's devices, contact and preferences, the suppressions of their
	// addresses, and their inbox (its own items and the broadcasts that reach them).
	exportFunction: {tables: map[string]actions{
		"notifications": {"BatchGetItem", "GetItem", "Query", "Scan", "DescribeTable"},
		"deliveries":    {"BatchGetItem"}, "deliveries/index/by_notification": {"Query"},
		"users":        {"BatchGetItem", "Query"},
		"suppressions": {"BatchGetItem"},
		"inbox-items":  {"BatchGetItem", "Query"},
	}},
	// The live inbox WebSocket API's $connect/$disconnect/$default: records connections (the
	// connections table and ManageConnections, granted with the other publishers' in stream.go)
	// and answers resume messages from the inbox (broadcasts are in the notifications table,
	// their targeting read from users).
	streamFunction: {tables: map[string]actions{
		"inbox-items": {"BatchGetItem", "Query"}, "notifications": {"BatchGetItem", "Query"}, "users": {"BatchGetItem", "Query"},
		"connections": {"GetItem", "PutItem", "DeleteItem"},
	}},
}

// grantTables grants role exactly the DynamoDB actions of tables (a wiring's): one statement
// per table, naming the table or the index each action is on.
func (h *herald) grantTables(role awsiam.Role, tables map[string]actions) {
	byTable := map[string][]string{}
	for _, key := range sortedKeys(tables) {
		table, _, _ := strings.Cut(key, "/")
		byTable[table] = append(byTable[table], key)
	}
	for _, table := range sortedKeys(byTable) {
		if table == "connections" && h.wsAPI == nil {
			continue // no live inbox: nobody publishes
		}
		t, ok := h.tables[table]
		if !ok {
			panic("infra/functions.go: wiring names an unknown table " + table)
		}
		// One statement per set of actions, on the table or its indexes.
		for _, key := range byTable[table] {
			res := t.TableArn()
			sid := "Table" + pascal(table)
			if _, index, ok := strings.Cut(key, "/index/"); ok {
				res = jsii.String(*t.TableArn() + "/index/" + index)
				sid += "Index" + pascal(index)
			}
			var acts []*string
			for _, a := range tables[key] {
				acts = append(acts, jsii.String("dynamodb:"+a))
			}
			role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: jsii.String(sid), Actions: &acts, Resources: &[]*string{res},
			}))
		}
	}
}

// writes reports whether a includes a write.
func (a actions) writes() bool {
	for _, x := range a {
		if x == "PutItem" || x == "UpdateItem" || x == "DeleteItem" || x == "BatchWriteItem" {
			return true
		}
	}
	return false
}

// alertsFunction posts operator events to Slack (internal/awsenv.StartAlerts). It is deployed
// only when alerts.slack.webhook_url_secret is set: without a webhook it has nowhere to post.
const alertsFunction = "alerts"

// adminFunction serves /v1/admin/… (internal/awsenv.StartAdmin); the api function refuses those
// routes, so only this role may read, delete and move dead letters.
const adminFunction = "admin"

// addFunctions creates one function per discovered directory, each with its own role, log group,
// event source mappings and grants.
func (h *herald) addFunctions() error {
	stagingDir := filepath.Join(h.props.StagingDir, "herald")
	if err := os.MkdirAll(stagingDir, 0o755); err != nil {
		return fmt.Errorf("config layer: %w", err)
	}
	if err := os.WriteFile(filepath.Join(stagingDir, "herald.yaml"), h.props.Env.ConfigYAML, 0o644); err != nil {
		return fmt.Errorf("config layer: %w", err)
	}
	if len(h.props.Functions) > 0 {
		h.configLayer = awslambda.NewLayerVersion(h.stack, jsii.String("ConfigLayer"), &awslambda.LayerVersionProps{
			LayerVersionName:        jsii.String(h.name("config")),
			Description:             jsii.String("The effective herald.yaml at " + configPath + " (secret names only, never values)"),
			Code:                    awslambda.Code_FromAsset(jsii.String(h.props.StagingDir), nil),
			CompatibleArchitectures: &[]awslambda.Architecture{awslambda.Architecture_ARM_64()},
			CompatibleRuntimes:      &[]awslambda.Runtime{awslambda.Runtime_PROVIDED_AL2023()},
		})
	}
	for _, name := range h.props.Functions {
		if name == alertsFunction && h.cfg.Alerts.Slack.WebhookURLSecret == "" {
			continue // no Slack configured
		}
		if err := h.addFunction(name); err != nil {
			return err
		}
	}
	for _, q := range h.queues {
		if _, ok := h.functions[q.consumer]; !ok {
			awscdk.Annotations_Of(q.queue).AddWarningV2(jsii.String("herald:no-consumer"),
				jsii.String(fmt.Sprintf("queue %s has no consumer: functions/%s does not exist", q.logical, q.consumer)), nil)
		}
	}
	h.grantConsumerPauses()
	return nil
}

// envConsumerMappings is internal/awsenv.EnvConsumerMappings.
const envConsumerMappings = "HERALD_CONSUMER_MAPPINGS"

// envPublicURL is internal/awsenv.EnvPublicURL: the API's endpoint, for the links senders mint.
const envPublicURL = "HERALD_PUBLIC_URL"

// envRecipientIndex is internal/awsenv.EnvRecipientIndex: "1" where stack.recipient_index is set.
const envRecipientIndex = "HERALD_RECIPIENT_INDEX"

// grantConsumerPauses lets the admin function pause and resume each queue's consumers (POST
// /v1/admin/queues/{queue}/pause, /resume): it is told each queue's event source mapping
// (HERALD_CONSUMER_MAPPINGS) and may read and update exactly those mappings — to turn them off
// and on: an update naming a function may only name one of Herald's own (lambda:FunctionArn).
func (h *herald) grantConsumerPauses() {
	admin, ok := h.functions[adminFunction]
	if !ok || len(h.mappings) == 0 {
		return
	}
	byQueue := map[string]any{}
	var arns []*string
	for _, logical := range slices.Sorted(maps.Keys(h.mappings)) {
		m := h.mappings[logical]
		byQueue[logical] = m.EventSourceMappingId()
		arns = append(arns, awscdk.Arn_Format(&awscdk.ArnComponents{Service: jsii.String("lambda"), Resource: jsii.String("event-source-mapping"),
			ResourceName: m.EventSourceMappingId(), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME}, h.stack))
	}
	admin.AddEnvironment(jsii.String(envConsumerMappings), h.stack.ToJsonString(byQueue, nil), nil)
	h.roles[adminFunction].AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("PauseAndResumeConsumers"),
		Actions:   jsii.Strings("lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"),
		Resources: &arns,
		Conditions: &map[string]any{"ArnLikeIfExists": map[string]any{
			"lambda:FunctionArn": []string{fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", *awscdk.Aws_PARTITION(), *awscdk.Aws_REGION(), *awscdk.Aws_ACCOUNT_ID(), h.name("*"))},
		}},
	}))
}

func (h *herald) addFunction(name string) error {
	fs := h.settings.Function(name)
	id := "Fn" + pascal(name)
	w, known := functionWiring[name]
	if !known {
		awscdk.Annotations_Of(h.stack).AddWarningV2(jsii.String("herald:unknown-function"),
			jsii.String(fmt.Sprintf("functions/%s is deployed with its log group and config only (no tables, queues or secrets): infra/functions.go has no wiring for it", name)), nil)
	}

	role := awsiam.NewRole(h.stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		RoleName:    jsii.String(fit(h.name("fn-"+name), maxRoleName)),
		Description: jsii.String("Herald " + name + " function (least privilege, see infra/functions.go)"),
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
	})
	logs := h.newLogGroup(id+"Logs", "/aws/lambda/"+h.functionName(name))
	logs.GrantWrite(role)

	// The environment internal/awsenv.Load reads (names from its Env* constants): everything
	// else — secret names, limits, lanes — is in the config file.
	env := map[string]*string{
		"HERALD_ENV":              jsii.String(h.env),
		"HERALD_CONFIG_FILE":      jsii.String(configPath),
		"HERALD_TABLE_PREFIX":     jsii.String(h.name("")),
		"HERALD_QUEUE_URL_PREFIX": jsii.String(fmt.Sprintf("https://sqs.%s.%s/%s/%s", *h.stack.Region(), *h.stack.UrlSuffix(), *h.stack.Account(), h.name(""))),
	}
	tables := w.tables
	if h.settings.RecipientIndex {
		// Every store files a notification under its one user (ingest and the api function's
		// reserved sends create them); the admin function lists a user's (the console's
		// recipient view) through the index, and only there.
		env[envRecipientIndex] = jsii.String("1")
		// the recipient view, a user export, an erasure's rewrite of what was sent to the user
		if name == adminFunction || name == exportFunction || name == "api" || name == "cleanup" {
			tables = maps.Clone(tables)
			tables["notifications/index/by_user"] = actions{"Query"}
		}
	}
	h.grantTables(role, tables)

	// Queues: it consumes its own (and dead-letters what can never succeed straight into their
	// DLQs), and sends to the next stage's. Exactly what is called, rather than CDK's grant
	// helpers (which add GetQueueUrl and GetQueueAttributes everywhere): Lambda's event source
	// mapping receives, deletes and reads the queue's attributes as the function's role;
	// Settle moves a message's visibility for a retry's backoff; dead letters and the next
	// stage's messages are sends. Queue URLs come from HERALD_QUEUE_URL_PREFIX, never looked up.
	var consumed []*stageQueue
	var consumedArns, dlqArns, sendArns []*string
	for _, q := range h.queues {
		if q.consumer == name {
			consumed = append(consumed, q)
			consumedArns = append(consumedArns, q.queue.QueueArn())
			dlqArns = append(dlqArns, q.dlq.QueueArn())
		}
	}
	if w.sends != nil {
		for _, logical := range w.sends(h) {
			sendArns = append(sendArns, h.queueByName[logical].queue.QueueArn())
			h.senders[logical] = append(h.senders[logical], role)
		}
	}
	if len(consumedArns) > 0 {
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("ConsumeOwnQueues"),
			Actions:   jsii.Strings("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"),
			Resources: &consumedArns,
		}))
	}
	if sends := append(dlqArns, sendArns...); len(sends) > 0 {
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("SendToNextStagesAndDeadLetters"),
			Actions:   jsii.Strings("sqs:SendMessage"),
			Resources: &sends,
		}))
	}

	secrets := map[string]string{}
	if known {
		secrets = secretNames(h.cfg, name)
	}
	// GetSecretValue on each named secret (Secrets Manager appends six random characters to a
	// secret's ARN), and nothing else: internal/awsenv reads values, never metadata.
	granted := map[string]bool{}
	var secretArns []*string
	for _, key := range sortedKeys(secrets) {
		secret := secrets[key]
		if granted[secret] {
			continue
		}
		granted[secret] = true
		secretArns = append(secretArns, jsii.String(fmt.Sprintf("arn:%s:secretsmanager:%s:%s:secret:%s-??????",
			*h.stack.Partition(), *h.stack.Region(), *h.stack.Account(), secret)))
	}
	if len(secretArns) > 0 {
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("ReadOwnSecrets"),
			Actions:   jsii.Strings("secretsmanager:GetSecretValue"),
			Resources: &secretArns,
		}))
	}

	switch name {
	case "ingest":
		// Arms the schedule of a reserved send; sends express notifications as send does.
		h.grantReservedSends(role, func(k string, v *string) { env[k] = v })
		h.grantSES(role)
		env["HERALD_RATELIMIT_TABLE"] = h.tables["ratelimit"].TableName()
	case "send":
		h.grantSES(role)
		env["HERALD_RATELIMIT_TABLE"] = h.tables["ratelimit"].TableName()
	case "api":
		// Re-arms or disarms a reserved send's schedule (PATCH and DELETE
		// /v1/notifications/{id}) and arms a campaign's send_at. It sends to the ingest queues
		// only (wiring): the operator routes are the admin function's.
		h.grantReservedSends(role, func(k string, v *string) { env[k] = v })
	case adminFunction:
		// Operators' routes (/v1/admin/queues…): depth of every queue, a look at its dead
		// letters, redrive — a message move task from each DLQ back to its source, which SQS
		// runs with the caller's rights: receive and delete on the DLQ, send on the source — and
		// a purge of a DLQ (DELETE …/dead-letters?confirm=<queue>), on the DLQs only.
		// One statement each (queues are SSE-SQS: no KMS grants), so the role's policy stays small.
		var sources, dlqs []*string
		for _, q := range h.queues {
			sources = append(sources, q.queue.QueueArn())
			dlqs = append(dlqs, q.dlq.QueueArn())
			h.senders[q.logical] = append(h.senders[q.logical], role)
		}
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("InspectAndRedriveDeadLetters"),
			Actions: jsii.Strings("sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage",
				"sqs:GetQueueAttributes", "sqs:ListDeadLetterSourceQueues", "sqs:StartMessageMoveTask", "sqs:ListMessageMoveTasks",
				"sqs:PurgeQueue"),
			Resources: &dlqs,
		}))
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("QueueDepthsAndRedriveTargets"),
			Actions:   jsii.Strings("sqs:SendMessage", "sqs:GetQueueAttributes"),
			Resources: &sources,
		}))
		// POST /v1/admin/schedules/rearm arms every reserved send and campaign again after the
		// schedule group was replaced.
		h.grantReservedSends(role, func(k string, v *string) { env[k] = v })
		// The console's sign-in: the claims that make a token of the issuer an operator's
		// (internal/awsenv.EnvConsoleAdminGroup and EnvConsoleAdminScope).
		if jwt := h.settings.API.JWT; h.settings.API.Console {
			for k, v := range map[string]string{"HERALD_CONSOLE_ADMIN_GROUP": jwt.AdminGroup, "HERALD_CONSOLE_ADMIN_SCOPE": jwt.AdminScope} {
				if v != "" {
					env[k] = jsii.String(v)
				}
			}
		}
		// Every operator action appends to the audit log in the notifications table, which
		// this role otherwise only reads: PutItem (the audit append is a transaction of puts)
		// on the log's own keys, never an update or a delete, nor a put of another item.
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("AppendAuditLog"),
			Actions:   jsii.Strings("dynamodb:PutItem"),
			Resources: &[]*string{h.tables["notifications"].TableArn()},
			Conditions: &map[string]any{"ForAllValues:StringLike": map[string]any{
				"dynamodb:LeadingKeys": []string{ddb.AuditKeyPrefix + "*"},
			}},
		}))
	}

	if w.tables["notifications"].writes() || slices.Contains(auditWriters, name) {
		h.auditAppendOnly(name, role)
	}
	h.streamEnv(name, role, env)

	if w.events {
		h.eventBus.GrantPutEventsTo(role, jsii.String("PutOperatorEvents")) // events:PutEvents on this bus only
		env["HERALD_EVENT_BUS"] = h.eventBus.EventBusName()
	}

	props := &awslambda.FunctionProps{
		FunctionName:          jsii.String(h.functionName(name)),
		Description:           jsii.String("Herald " + name + " (" + h.env + ")"),
		Runtime:               awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:          awslambda.Architecture_ARM_64(),
		Handler:               jsii.String("bootstrap"),
		Code:                  awslambda.Code_FromAsset(jsii.String(filepath.Join(h.props.AssetDir, name)), nil),
		Role:                  role,
		Timeout:               seconds(fs.Timeout.D()),
		MemorySize:            jsii.Number(float64(fs.MemoryMB)),
		LogGroup:              logs,
		LoggingFormat:         awslambda.LoggingFormat_JSON,
		ApplicationLogLevelV2: awslambda.ApplicationLogLevel_INFO,
		Tracing:               awslambda.Tracing_ACTIVE,
		Layers:                &[]awslambda.ILayerVersion{h.configLayer},
		Environment:           &env,
	}
	// No function reserves concurrency unless its environment asks (stack.functions.<name>.
	// reserved_concurrency): a new account's quota of 10 leaves nothing to reserve, and Lambda
	// refuses the deploy (Load checks the sum against stack.lambda_concurrency_quota).
	if fs.ReservedConcurrency > 0 {
		props.ReservedConcurrentExecutions = jsii.Number(float64(fs.ReservedConcurrency))
	}
	fn := awslambda.NewFunction(h.stack, jsii.String(id), props)

	for _, q := range consumed {
		maxConc := q.maxConc
		if maxConc < 2 {
			// Lambda's MaximumConcurrency for SQS is 2–1000; the local runtime can run 1 worker.
			awscdk.Annotations_Of(q.queue).AddWarningV2(jsii.String("herald:max-concurrency"),
				jsii.String(fmt.Sprintf("%s: max_concurrency %d raised to 2, Lambda's minimum for SQS event sources", q.logical, q.maxConc)), nil)
			maxConc = 2
		}
		// A mapping of its own rather than SqsEventSource, which would grant the role CDK's
		// consume helper on top of ConsumeOwnQueues; it waits for the role's policy, or its
		// creation fails on a role that may not receive yet.
		props := &awslambda.EventSourceMappingOptions{
			EventSourceArn:          q.queue.QueueArn(),
			BatchSize:               jsii.Number(float64(q.batch)),
			MaxConcurrency:          jsii.Number(float64(maxConc)),
			ReportBatchItemFailures: jsii.Bool(true),
		}
		if q.window > 0 {
			props.MaxBatchingWindow = awscdk.Duration_Seconds(jsii.Number(q.window.Seconds()))
		}
		m := fn.AddEventSourceMapping(jsii.String("SqsEventSource"+pascal(q.logical)), props)
		m.Node().AddDependency(role)
		if h.mappings == nil {
			h.mappings = map[string]awslambda.EventSourceMapping{}
		}
		h.mappings[q.logical] = m
	}
	h.functions[name] = fn
	h.roles[name] = role
	h.functionOrder = append(h.functionOrder, name)
	return nil
}

// auditAppendOnly denies role every change to the audit log's items (their partition keys start
// AUDIT#) in the notifications table, which it otherwise may write: an explicit Deny, so no
// Allow — this role's or any added later — can overwrite, update or delete an audit entry. The
// functions that append to it (auditWriters: the API's routes audit what services and
// operators do) keep PutItem, which internal/ddb only issues for an audit entry as a put of a
// new key whose condition refuses an existing one. dynamodb:LeadingKeys holds every partition
// key a request touches, so ForAnyValue catches a batch with one audit key among others.
func (h *herald) auditAppendOnly(name string, role awsiam.Role) {
	actions := []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
	if slices.Contains(auditWriters, name) {
		actions = actions[1:]
	}
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("AuditLogIsAppendOnly"),
		Effect:    awsiam.Effect_DENY,
		Actions:   jsii.Strings(actions...),
		Resources: &[]*string{h.tables["notifications"].TableArn()},
		Conditions: &map[string]any{"ForAnyValue:StringLike": map[string]any{
			"dynamodb:LeadingKeys": []string{ddb.AuditKeyPrefix + "*"},
		}},
	}))
}

// auditWriters are the functions that append to the audit log: api and admin serve
// internal/api routes, which audit every change a service or an operator makes; cleanup
// writes the one entry of an erasure it finishes.
var auditWriters = []string{"api", adminFunction, "cleanup"}

// grantReservedSends lets role arm reserved sends: create/update/delete schedules in this
// environment's group only, and hand them the scheduler role; setEnv gets the variables
// internal/awsenv builds the scheduler from (ingest, api and admin).
func (h *herald) grantReservedSends(role awsiam.Role, setEnv func(key string, value *string)) {
	// One statement with exactly what internal/scheduler calls (the group's Grant* helpers would
	// add three, and the api role's policy is near its size limit).
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"),
		Resources: jsii.Strings(fmt.Sprintf("arn:%s:scheduler:%s:%s:schedule/herald-%s/*", *h.stack.Partition(), *h.stack.Region(), *h.stack.Account(), h.env)),
	}))
	h.schedulerRole.GrantPassRole(role)
	setEnv("HERALD_SCHEDULE_GROUP", jsii.String("herald-"+h.env))
	setEnv("HERALD_SCHEDULER_ROLE_ARN", h.schedulerRole.RoleArn())
	setEnv("HERALD_SCHEDULER_DLQ_ARN", h.schedulerDLQ.QueueArn())
	setEnv("HERALD_QUEUE_ARN_PREFIX", jsii.String(fmt.Sprintf("arn:%s:sqs:%s:%s:%s", *h.stack.Partition(), *h.stack.Region(), *h.stack.Account(), h.name(""))))
}

// grantSES lets role send as the configured From identity (the address and its domain, whichever
// is verified) through the configuration set, in the SES region.
func (h *herald) grantSES(role awsiam.Role) {
	ses := h.cfg.Providers.SES
	arn := func(resource, name string) *string {
		return h.stack.FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("ses"), Region: jsii.String(ses.Region),
			Resource: jsii.String(resource), ResourceName: jsii.String(name),
		})
	}
	resources := []*string{arn("configuration-set", ses.ConfigurationSet)}
	if a, err := mail.ParseAddress(ses.From); err == nil {
		resources = append(resources, arn("identity", a.Address))
		if at := strings.LastIndex(a.Address, "@"); at >= 0 {
			resources = append(resources, arn("identity", a.Address[at+1:]))
		}
	}
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("SendEmail"),
		Actions:   jsii.Strings("ses:SendEmail"), // SESv2 SendEmail of a Simple message (internal/ses): never raw
		Resources: &resources,
	}))
}

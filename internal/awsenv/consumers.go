package awsenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"herald/internal/awserr"
	"herald/internal/notify"
)

// EnvConsumerMappings names, for the admin function, the event source mapping (its UUID) that
// consumes each queue: {"ingest-orders": "<uuid>", …}, written by the stack.
const EnvConsumerMappings = "HERALD_CONSUMER_MAPPINGS"

// EnvPublicURL is the API's endpoint, which the stack gives the functions that send: the base of
// marketing email's one-click unsubscribe links unless marketing.unsubscribe_base_url names one.
const EnvPublicURL = "HERALD_PUBLIC_URL"

// EnvRecipientIndex is "1" where the deployment keeps the recipient index (stack.recipient_index):
// every function's store then files a notification sent to one user under that user, and the
// admin function lists a user's notifications (ddb.Store.KeepRecipientIndex).
const EnvRecipientIndex = "HERALD_RECIPIENT_INDEX"

// LambdaMappings is what Mappings needs of the Lambda client.
type LambdaMappings interface {
	GetEventSourceMapping(ctx context.Context, in *lambda.GetEventSourceMappingInput, optFns ...func(*lambda.Options)) (*lambda.GetEventSourceMappingOutput, error)
	UpdateEventSourceMapping(ctx context.Context, in *lambda.UpdateEventSourceMappingInput, optFns ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error)
}

// Mappings implements notify.Consumers in AWS: a queue's consumers are its event source
// mapping, paused by turning its Enabled flag off (Lambda stops polling; the messages wait on
// the queue) and resumed by turning it on. The admin role may do exactly that, on these
// mappings, and only while they point at Herald's own functions (lambda:FunctionArn).
type Mappings struct {
	Client  LambdaMappings
	ByQueue map[string]string // logical queue → mapping UUID
}

var _ notify.Consumers = (*Mappings)(nil)

// mappingCodes classifies Lambda's answers.
var mappingCodes = map[string]string{
	"ResourceNotFoundException":      notify.ENOTFOUND,
	"ResourceInUseException":         notify.ECONFLICT, // the mapping is changing already
	"ResourceConflictException":      notify.ECONFLICT,
	"TooManyRequestsException":       notify.ETHROTTLED,
	"ServiceException":               notify.EUNAVAILABLE,
	"AccessDeniedException":          notify.EFORBIDDEN,
	"InvalidParameterValueException": notify.EINVALID,
}

// NewMappings reads EnvConsumerMappings; nil when it is unset (a stack without it).
func NewMappings(cfg aws.Config) (*Mappings, error) {
	raw := os.Getenv(EnvConsumerMappings)
	if raw == "" {
		return nil, nil
	}
	m := &Mappings{Client: lambda.NewFromConfig(cfg), ByQueue: map[string]string{}}
	if err := json.Unmarshal([]byte(raw), &m.ByQueue); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvConsumerMappings, err)
	}
	return m, nil
}

func (m *Mappings) uuid(queue string) (string, error) {
	id, ok := m.ByQueue[queue]
	if !ok {
		return "", notify.Errorf(notify.ENOTFOUND, "no event source mapping consumes queue %q", queue)
	}
	return id, nil
}

// SetPaused implements notify.Consumers: UpdateEventSourceMapping with Enabled off or on.
func (m *Mappings) SetPaused(ctx context.Context, queue string, paused bool) error {
	id, err := m.uuid(queue)
	if err != nil {
		return err
	}
	_, err = m.Client.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: aws.String(id), Enabled: aws.Bool(!paused)})
	if err != nil {
		return awserr.Wrap(err, mappingCodes, "event source mapping of %s: set enabled %v", queue, !paused)
	}
	return nil
}

// Paused implements notify.Consumers: a mapping Disabled, or Disabling, is paused.
func (m *Mappings) Paused(ctx context.Context, queue string) (bool, error) {
	id, err := m.uuid(queue)
	if err != nil {
		return false, err
	}
	out, err := m.Client.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(id)})
	if err != nil {
		return false, awserr.Wrap(err, mappingCodes, "event source mapping of %s", queue)
	}
	state := aws.ToString(out.State)
	return state == "Disabled" || state == "Disabling", nil
}

package costbench

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"herald/internal/cost"
)

// The meter over the real handlers with a few sends and devices: every scenario delivered, and
// its accounting is real — DynamoDB write units at least the items the functions' WriteCounter
// saw written, SQS requests at least the messages produced over 10, invocations of every stage.
func TestRunSmall(t *testing.T) {
	ep := os.Getenv("HERALD_DYNAMODB_ENDPOINT")
	if ep == "" {
		t.Skip("set HERALD_DYNAMODB_ENDPOINT (make test starts DynamoDB Local) to run the DynamoDB tests")
	}
	const sends, devices = 12, 25
	var progress bytes.Buffer
	res, err := Run(context.Background(), Options{DynamoDB: ep, Sends: sends, Devices: devices, Progress: &progress, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var out bytes.Buffer
	res.Print(&out, cost.USEast1)
	t.Logf("\n%s", out.String())
	if len(res.Scenarios) != 8 {
		t.Fatalf("%d scenarios", len(res.Scenarios))
	}
	for _, s := range res.Scenarios {
		u := s.Usage
		if u.WriteUnits < float64(s.StoreWrites) || s.StoreWrites == 0 {
			t.Errorf("%s: %.1f write units for %d items written", s.Title, u.WriteUnits, s.StoreWrites)
		}
		if u.NoCapacity != 0 {
			t.Errorf("%s: %d DynamoDB calls returned no consumed capacity", s.Title, u.NoCapacity)
		}
		if u.ReadUnits <= 0 {
			t.Errorf("%s: no read units", s.Title)
		}
		var sqs int64
		for _, v := range u.SQSRequests {
			sqs += v
		}
		per := int64(10) // sends a billed SQS request carries at most
		switch s.Title {
		case TitleProducerBulk, TitleAPIBatch:
			per = 10 * perBatch
		case TitleFanOut:
			per = fanOutUsers
		}
		if sqs < int64(u.Recipients)/per || u.SQSRequests["ReceiveMessage"] == 0 || u.SQSRequests["DeleteMessageBatch"] == 0 {
			t.Errorf("%s: SQS %v", s.Title, u.SQSRequests)
		}
		// A single send takes the express path: ingest prepares, sends and records it, and
		// nothing reaches the stage queues; a fan-out and a campaign go through every stage.
		campaign := s.Title == TitleCampaign || s.Title == TitleFanOut
		stages := []string{"prepare", "send", "record"}
		if !campaign {
			stages = []string{"ingest"}
		}
		for _, fn := range stages {
			if u.Lambda[fn].Invocations == 0 || u.Lambda[fn].BilledMS < u.Lambda[fn].Invocations {
				t.Errorf("%s: %s %+v", s.Title, fn, u.Lambda[fn])
			}
		}
		if !campaign {
			for _, fn := range []string{"prepare", "send", "record"} {
				if u.Lambda[fn].Invocations != 0 {
					t.Errorf("%s: %s invoked %d times; a single send should take the express path", s.Title, fn, u.Lambda[fn].Invocations)
				}
			}
		}
		if u.LogBytes == 0 {
			t.Errorf("%s: nothing logged", s.Title)
		}
	}
	byTitle := map[string]cost.Usage{}
	for _, s := range res.Scenarios {
		byTitle[s.Title] = s.Usage
	}
	producer, push, api, campaign := byTitle[TitleProducer], byTitle[TitleProducerPush], byTitle[TitleAPI], byTitle[TitleCampaign]
	bulk, apiBatch := byTitle[TitleProducerBulk], byTitle[TitleAPIBatch]
	// Ten requests a message: a tenth of the SQS requests and ingest invocations, the same
	// writes; ten an API request: a tenth of the API Gateway requests and api invocations.
	if bulk.SQSRequests["SendMessageBatch"] >= producer.SQSRequests["SendMessageBatch"] || bulk.WriteUnits > producer.WriteUnits ||
		bulk.Lambda["ingest"].Invocations >= producer.Lambda["ingest"].Invocations {
		t.Errorf("10 a message: SQS %v, %.1f write units, ingest %+v; one a message: SQS %v, %.1f, %+v", bulk.SQSRequests, bulk.WriteUnits,
			bulk.Lambda["ingest"], producer.SQSRequests, producer.WriteUnits, producer.Lambda["ingest"])
	}
	if want := int64((sends + perBatch - 1) / perBatch); apiBatch.HTTPAPIRequests != want || apiBatch.Lambda["api"].Invocations != want {
		t.Errorf("API batch: %d API Gateway requests, %d api invocations, want %d", apiBatch.HTTPAPIRequests, apiBatch.Lambda["api"].Invocations, want)
	}
	// A send writes the notification with its claimed deliveries, the inbox item when it has the
	// inbox channel, and its share of its ingest invocation's verdicts: one item for all of them.
	for _, c := range []struct {
		s     Scenario
		items int64
	}{{res.Scenarios[0], 2}, {res.Scenarios[1], 1}} {
		if w := c.s.StoreWrites; w <= c.items*int64(sends) || w > (c.items+1)*int64(sends) {
			t.Errorf("%s: %d items written for %d sends; want more than %d a send and at most %d", c.s.Title, w, sends, c.items, c.items+1)
		}
	}
	// A fan-out stores each delivery once, with its outcome (Notification.BatchClaims): one
	// plain write a delivery, and a few items a request and a send batch.
	fanOut := res.Scenarios[5]
	if fanOut.Title != TitleFanOut || fanOut.StoreWrites < sends || fanOut.StoreWrites > sends+12 ||
		fanOut.Usage.WriteUnits > float64(sends)+36 {
		t.Errorf("%s: %d items written, %.1f write units for %d deliveries; want one a delivery and a few more",
			fanOut.Title, fanOut.StoreWrites, fanOut.Usage.WriteUnits, sends)
	}
	if push.WriteUnits >= producer.WriteUnits {
		t.Errorf("write units: %.1f without the inbox, %.1f with it", push.WriteUnits, producer.WriteUnits)
	}
	if producer.SQSRequests["SendMessageBatch"] < sends/10 || producer.HTTPAPIRequests != 0 || producer.Lambda["api"].Invocations != 0 {
		t.Errorf("producer: %+v", producer)
	}
	if producer.Lambda["ingest"].Invocations == 0 || producer.Lambda["ingest"].Invocations > sends {
		t.Errorf("producer: ingest %+v", producer.Lambda["ingest"])
	}
	if api.HTTPAPIRequests != sends || api.Lambda["api"].Invocations != sends {
		t.Errorf("api: %d API Gateway requests, %d api invocations, want %d", api.HTTPAPIRequests, api.Lambda["api"].Invocations, sends)
	}
	if api.AccessLogBytes < int64(sends)*200 || producer.AccessLogBytes != 0 {
		t.Errorf("API Gateway access log: %d bytes for %d requests through the API, %d through the producer", api.AccessLogBytes, sends, producer.AccessLogBytes)
	}
	if campaign.StateTransitions < 5 || campaign.Lambda["campaign"].Invocations < 3 || campaign.HTTPAPIRequests != 1 {
		t.Errorf("campaign: %d transitions, %+v, %d API requests", campaign.StateTransitions, campaign.Lambda["campaign"], campaign.HTTPAPIRequests)
	}
	if campaign.Events == 0 {
		t.Errorf("campaign: no operator event put (campaign_finished)")
	}
}

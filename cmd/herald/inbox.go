package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"herald/internal/ddb"
)

const inboxUsage = `Usage: herald inbox migrate [flags]

  herald inbox migrate   copy a deployment's inbox from the table "inbox" (keyed by item id, two
                         local indexes) into "inbox-items" (keyed by time, no index)
`

// runInbox is `herald inbox …`.
func runInbox(args []string, out io.Writer) error {
	return dispatch("inbox", inboxUsage, map[string]command{"migrate": runInboxMigrate}, args, out)
}

// runInboxMigrate copies the legacy inbox table of one environment into its inbox-items table
// with the default AWS credentials (ddb.CopyLegacyInbox): idempotent, safe to run again.
func runInboxMigrate(args []string, out io.Writer) error {
	fs := newFlagSet("inbox migrate", "--env NAME [flags]", `
Copies every inbox item and broadcast marker of the environment's legacy inbox table
(herald-<env>-inbox) into its inbox-items table, with the default AWS credentials (they need
dynamodb:Scan on the first and dynamodb:PutItem on the second). Run it once after deploying a
stack that has the inbox-items table. An item the new table has already is left as it is, so it
is safe to run again. The legacy table is not changed; delete it once the copy is done.`)
	env := fs.String("env", "", "the environment the stack was deployed as (make deploy ENV=…)")
	prefix := fs.String("table-prefix", "", "table name prefix instead of herald-<env>- (the functions' HERALD_TABLE_PREFIX)")
	endpoint := fs.String("dynamodb-endpoint", os.Getenv("HERALD_DYNAMODB_ENDPOINT"), "DynamoDB endpoint URL (default: the AWS one, or $HERALD_DYNAMODB_ENDPOINT)")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef(fs, "unexpected argument %q", pos[0])
	}
	p := *prefix
	if p == "" {
		if *env == "" {
			return usagef(fs, "--env (or --table-prefix) is required")
		}
		p = "herald-" + *env + "-"
	}
	ctx := context.Background()
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("AWS configuration: %w", err)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if *endpoint != "" {
			o.BaseEndpoint = aws.String(*endpoint)
		}
	})
	from, to := p+ddb.LegacyInboxTable, ddb.TablesWithPrefix(p).Inbox
	fmt.Fprintf(out, "copying %s into %s\n", from, to)
	res, err := ddb.CopyLegacyInbox(ctx, client, from, to)
	fmt.Fprintf(out, "%d items read, %d copied, %d there already\n", res.Scanned, res.Copied, res.Kept)
	return err
}

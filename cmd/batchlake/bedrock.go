package main

import (
	"cmp"
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/providers/bedrockbatch"
)

// bedrockFlags are --provider bedrock's settings. Each falls back to an
// environment variable; credentials come only from the AWS default chain.
type bedrockFlags struct {
	step                                     string
	region, endpoint, roleARN, input, output string
	timeoutHours                             int32
}

func (b *bedrockFlags) register(c *cobra.Command) {
	b.step = c.Name()
	f := c.Flags()
	f.StringVar(&b.region, "bedrock-region", "", "Bedrock: AWS region (env BATCHLAKE_BEDROCK_REGION; default: the AWS chain's, AWS_REGION)")
	f.StringVar(&b.endpoint, "bedrock-endpoint", "", "Bedrock: control-plane endpoint override, e.g. a VPC endpoint (env BATCHLAKE_BEDROCK_ENDPOINT)")
	f.StringVar(&b.roleARN, "bedrock-role-arn", "", "Bedrock: service role the job runs as, needed by submit (env BATCHLAKE_BEDROCK_ROLE_ARN)")
	f.StringVar(&b.input, "bedrock-input", "", "Bedrock: S3 prefix for shard files, s3://bucket/prefix/ with optional gocloud query options (env BATCHLAKE_BEDROCK_INPUT; default under an s3:// lake's bucket: _staging/bedrock/input/)")
	f.StringVar(&b.output, "bedrock-output", "", "Bedrock: S3 prefix for job output (env BATCHLAKE_BEDROCK_OUTPUT; default under an s3:// lake's bucket: _staging/bedrock/output/)")
	f.Int32Var(&b.timeoutHours, "bedrock-timeout-hours", 0, "Bedrock: the job's timeoutDurationInHours (default: Bedrock's)")
}

// client builds the Bedrock client for a lake; the job's model is read from
// its manifest (plan --model).
func (b *bedrockFlags) client(g *globals, l *lake.Lake) (*bedrockbatch.Client, error) {
	cfg := bedrockbatch.Config{
		Region:       cmp.Or(b.region, os.Getenv("BATCHLAKE_BEDROCK_REGION")),
		Endpoint:     cmp.Or(b.endpoint, os.Getenv("BATCHLAKE_BEDROCK_ENDPOINT")),
		RoleARN:      cmp.Or(b.roleARN, os.Getenv("BATCHLAKE_BEDROCK_ROLE_ARN")),
		Input:        cmp.Or(b.input, os.Getenv("BATCHLAKE_BEDROCK_INPUT")),
		Output:       cmp.Or(b.output, os.Getenv("BATCHLAKE_BEDROCK_OUTPUT")),
		TimeoutHours: b.timeoutHours,
		Logger:       g.log,
		Model:        lifecycle.LakeShards{Lake: l}.Model,
	}
	if in, out, ok := bedrockbatch.DefaultLocations(l.URL); ok {
		cfg.Input, cfg.Output = cmp.Or(cfg.Input, in), cmp.Or(cfg.Output, out)
	}
	if b.step == "submit" && cfg.RoleARN == "" {
		return nil, &errkind.UsageError{Msg: "--provider bedrock: submit needs the service role: set --bedrock-role-arn or BATCHLAKE_BEDROCK_ROLE_ARN"}
	}
	// The context only bounds loading the AWS configuration (SSO, IMDS).
	c, err := bedrockbatch.New(context.Background(), cfg)
	if err != nil {
		return nil, &errkind.UsageError{Msg: "--provider bedrock: " + err.Error()}
	}
	return c, nil
}

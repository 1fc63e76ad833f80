package bedrockbatch_test

import (
	"os"
	"testing"
)

// TestMain points the AWS SDK at nothing real (static test credentials, no
// profile, no instance metadata) once for the whole binary, so that tests
// can run in parallel (t.Setenv refuses parallel tests).
func TestMain(m *testing.M) {
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_REGION": "us-east-1"} {
		if err := os.Setenv(k, v); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

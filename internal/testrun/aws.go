package testrun

import "os"

// OfflineAWS is the environment that points the AWS SDK at nothing real:
// static test credentials, no profile or shared config, no instance
// metadata, one region. Tests that talk to loopback S3 or Bedrock fakes set
// it, so the SDK never reaches for the developer's own AWS setup.
func OfflineAWS() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_REGION": "us-east-1",
	}
}

// SetOfflineAWS sets OfflineAWS for the whole test binary. Call it from
// TestMain: t.Setenv would keep the tests that need it from running in
// parallel.
func SetOfflineAWS() {
	for k, v := range OfflineAWS() {
		if err := os.Setenv(k, v); err != nil {
			panic(err)
		}
	}
}

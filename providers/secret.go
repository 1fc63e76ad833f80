package providers

import "strings"

// Secret is an API key the adapters must never let out: errors and logs go
// through Redact and RedactError before anyone sees them.
type Secret string

// Redact replaces the secret in s. A very short secret would match ordinary
// text, and real keys are long, so one under 8 bytes is left alone.
func (k Secret) Redact(s string) string {
	if len(k) < 8 {
		return s
	}
	return strings.ReplaceAll(s, string(k), "[redacted]")
}

// RedactError returns err unchanged when its text does not hold the secret,
// and otherwise an error with the secret replaced that still unwraps to err
// (so errors.Is and errors.As see through it).
func (k Secret) RedactError(err error) error {
	if err == nil {
		return nil
	}
	if msg := err.Error(); k.Redact(msg) != msg {
		return &redactedError{msg: k.Redact(msg), err: err}
	}
	return err
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

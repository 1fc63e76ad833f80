package providers

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestSecretRedact(t *testing.T) {
	k := Secret("sk-test-0123456789")
	for _, c := range []struct{ in, want string }{
		{"no key here", "no key here"},
		{"Post http://x/?k=sk-test-0123456789: EOF", "Post http://x/?k=[redacted]: EOF"},
		{"sk-test-0123456789 sk-test-0123456789", "[redacted] [redacted]"},
	} {
		if got := k.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Secret("short").Redact("a short text"); got != "a short text" {
		t.Errorf("a short secret must not redact ordinary text: %q", got)
	}

	plain := fmt.Errorf("dial: %w", io.ErrUnexpectedEOF)
	if k.RedactError(plain) != plain {
		t.Error("an error without the key must come back unchanged")
	}
	leaky := fmt.Errorf("Get https://h/?key=sk-test-0123456789: %w", io.ErrUnexpectedEOF)
	got := k.RedactError(leaky)
	if strings.Contains(got.Error(), string(k)) || !strings.Contains(got.Error(), "[redacted]") {
		t.Errorf("RedactError: %q", got)
	}
	if !errors.Is(got, io.ErrUnexpectedEOF) {
		t.Error("a redacted error must still unwrap to its cause")
	}
	if k.RedactError(nil) != nil {
		t.Error("RedactError(nil) != nil")
	}
}

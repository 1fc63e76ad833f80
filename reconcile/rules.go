package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Rules decide which failures are worth another attempt.
type Rules struct {
	Statuses  []int
	Codes     []string
	Permanent []string
}

// DefaultRetryable is the documented default (docs/contract.md, docs/errors.md):
// HTTP 408, 429 and 5xx, and provider error codes of transient trouble.
var DefaultRetryable = []string{"408", "429", "5xx",
	"batch_expired", "batch_cancelled", "rate_limit_exceeded", "server_error", "timeout",
	"overloaded", "overloaded_error", "api_error", "rate_limit_error", "timeout_error",
	"expired", "canceled", "internal_error", "service_unavailable",
	// Gemini's per-line errors carry gRPC code names (ingest.ErrorTaxonomy).
	"CANCELLED", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED", "INTERNAL", "UNAVAILABLE"}

// DefaultPermanent are codes that are never retried, whatever their status
// (a 429 for an exhausted quota will not succeed on retry).
var DefaultPermanent = []string{"insufficient_quota", "billing_error"}

// ParseRules turns a --retryable list ("429,5xx,server_error") into rules;
// nil means the default list.
func ParseRules(retryable []string) (Rules, error) {
	if retryable == nil {
		retryable = DefaultRetryable
	}
	r := Rules{Permanent: slices.Clone(DefaultPermanent)}
	for _, tok := range retryable {
		tok = strings.TrimSpace(tok)
		switch {
		case tok == "":
		case len(tok) == 3 && strings.EqualFold(tok[1:], "xx") && tok[0] >= '1' && tok[0] <= '5':
			base := int(tok[0]-'0') * 100
			for s := base; s < base+100; s++ {
				r.Statuses = append(r.Statuses, s)
			}
		case isDigits(tok):
			n, err := strconv.Atoi(tok)
			if err != nil || n < 100 || n > 599 {
				return r, fmt.Errorf("--retryable: %q is not an HTTP status", tok)
			}
			r.Statuses = append(r.Statuses, n)
		default:
			r.Codes = append(r.Codes, tok)
			r.Permanent = slices.DeleteFunc(r.Permanent, func(p string) bool { return p == tok })
		}
	}
	if len(r.Statuses) == 0 && len(r.Codes) == 0 {
		// A list of commas and spaces, where the default was meant or
		// --max-attempts 1: taken as given, no failure would be retried.
		return r, fmt.Errorf("--retryable %q: names no HTTP status or error code; leave it out for the default list (--max-attempts 1 retries nothing)", strings.Join(retryable, ","))
	}
	slices.Sort(r.Statuses)
	r.Statuses = slices.Compact(r.Statuses)
	slices.Sort(r.Codes)
	r.Codes = slices.Compact(r.Codes)
	return r, nil
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// String is a canonical rendering, part of a reconcile run's identity.
func (r Rules) String() string {
	var st []string
	for i := 0; i < len(r.Statuses); i++ {
		s := r.Statuses[i]
		// A whole class (500..599) prints as 5xx.
		if s%100 == 0 && i+99 < len(r.Statuses) && r.Statuses[i+99] == s+99 {
			st = append(st, strconv.Itoa(s/100)+"xx")
			i += 99
			continue
		}
		st = append(st, strconv.Itoa(s))
	}
	return "status=" + strings.Join(st, ",") + ";codes=" + strings.Join(r.Codes, ",") + ";permanent=" + strings.Join(r.Permanent, ",")
}

func (r Rules) load(ctx context.Context, e *Engine) error {
	if err := e.ExecFile(ctx, "rules.sql", nil); err != nil {
		return err
	}
	statuses := make([]string, len(r.Statuses))
	for i, s := range r.Statuses {
		statuses[i] = strconv.Itoa(s)
	}
	codes := make([]string, len(r.Codes))
	for i, c := range r.Codes {
		codes[i] = quote(c)
	}
	permanent := make([]string, len(r.Permanent))
	for i, c := range r.Permanent {
		permanent[i] = quote(c)
	}
	for _, t := range []struct {
		table  string
		values []string
	}{{"retry_status", statuses}, {"retry_codes", codes}, {"permanent_codes", permanent}} {
		if len(t.values) == 0 {
			continue
		}
		if err := e.ExecFile(ctx, "rules_add.sql", map[string]any{"Table": t.table, "Values": t.values}); err != nil {
			return err
		}
	}
	return nil
}

package gen

import "bytes"

// The text pool: a fixed stretch of JSON-safe English-like prose from which
// message contents are cut at word boundaries, so rendering a line never
// calls the random generator once per word.
var vocabulary = []string{
	"the", "customer", "reports", "that", "order", "arrived", "late", "and", "the", "package", "was",
	"damaged", "during", "shipping", "they", "would", "like", "a", "refund", "or", "replacement",
	"account", "billing", "invoice", "subscription", "renewal", "charged", "twice", "this", "month",
	"support", "ticket", "escalated", "after", "three", "days", "without", "response", "from", "agent",
	"mobile", "app", "crashes", "when", "opening", "settings", "page", "on", "android", "version",
	"password", "reset", "email", "never", "arrived", "spam", "folder", "checked", "already",
	"please", "advise", "how", "to", "export", "data", "into", "spreadsheet", "format", "weekly",
	"dashboard", "shows", "wrong", "totals", "for", "region", "north", "since", "last", "update",
	"integration", "with", "calendar", "stopped", "syncing", "events", "are", "missing", "entirely",
	"feature", "request", "dark", "mode", "keyboard", "shortcuts", "bulk", "edit", "of", "records",
	"latency", "is", "high", "in", "afternoons", "api", "returns", "timeouts", "intermittently",
	"summary", "issue", "concerns", "delivery", "delay", "resolution", "offer", "credit", "next",
	"product", "area", "logistics", "payments", "identity", "reporting", "platform", "stability",
	"sentiment", "frustrated", "but", "polite", "wants", "clear", "timeline", "for", "fix",
}

var (
	pool       []byte  // words separated by single spaces, sentences end with ". "
	wordStarts []int32 // offsets in pool where a word begins
)

const poolBytes = 1 << 18

func init() {
	r := newRNG(0x5eed, streamExtra, 0)
	var b bytes.Buffer
	b.Grow(poolBytes + 64)
	inSentence := 0
	for b.Len() < poolBytes {
		wordStarts = append(wordStarts, int32(b.Len()))
		b.WriteString(vocabulary[r.intn(len(vocabulary))])
		inSentence++
		if inSentence > 6 && r.intn(8) == 0 {
			b.WriteString(". ")
			inSentence = 0
		} else {
			b.WriteByte(' ')
		}
	}
	pool = b.Bytes()
}

// appendText appends about n bytes of prose (cut at a word end, never more
// than n) chosen by r.
func appendText(dst []byte, r *rng, n int) []byte {
	if n <= 0 {
		return dst
	}
	if n > len(pool)/2 {
		n = len(pool) / 2
	}
	// Words starting in the first half of the pool always have n bytes after them.
	start := int(wordStarts[r.intn(len(wordStarts)/2)])
	seg := pool[start : start+n]
	if i := bytes.LastIndexByte(seg, ' '); i > 0 {
		seg = seg[:i]
	}
	seg = bytes.TrimRight(seg, ". ")
	return append(dst, seg...)
}

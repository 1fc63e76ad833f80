package reconcile

import (
	"context"
	"fmt"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// stagedFiles opens an engine on l (closed when the test ends) and stages
// the lake's files for it to read, returning their local paths.
func stagedFiles(t *testing.T, l *lake.Lake, files ...string) (*Engine, []string) {
	t.Helper()
	e, err := OpenEngine(l, EngineOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	paths, err := e.stageAll(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	return e, paths
}

// tableRows lists the given columns (text) of every row of a table file of
// the lake, in their order.
func tableRows(t *testing.T, l *lake.Lake, file, cols string) string {
	t.Helper()
	ctx := context.Background()
	e, paths := stagedFiles(t, l, file)
	rows, err := e.DB.QueryContext(ctx, "SELECT concat_ws(' ', "+cols+") FROM read_parquet("+quote(paths[0])+") ORDER BY ALL")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var row string
		if err := rows.Scan(&row); err != nil {
			t.Fatal(err)
		}
		got = append(got, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(got)
}

// TestMaybeSentIsADuplicateOnceAnswered: a real-time call that may have
// reached the provider without an answer (error code maybe_sent) is a
// duplicate submission when another call answered its record, and a
// retryable failure when none did.
func TestMaybeSentIsADuplicateOnceAnswered(t *testing.T) {
	ctx := context.Background()
	answer := func(id string) string {
		return fmt.Sprintf(`{"id":"b_%s","custom_id":%q,"response":{"status_code":200,"body":{"model":"gpt-4o-mini-2024-07-18","choices":[{"message":{"content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}},"error":null}`, id, id)
	}
	maybeSent := func(id string) string {
		return fmt.Sprintf(`{"id":"b_%s","custom_id":%q,"response":null,"error":{"code":"maybe_sent","message":"the call may have reached the provider"}}`, id, id)
	}
	var g genBatch
	for _, id := range []string{"answered", "unanswered", "plain"} {
		g.input = append(g.input, fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"%s"}]}}`, id, id))
	}
	g.output = []string{answer("answered"), answer("plain")}
	g.errors = []string{maybeSent("answered"), maybeSent("unanswered")}
	l, dir := testLake(t)
	m := planAndIngest(t, l, dir, g, 0)
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := "[answered duplicate_submission answered first_success plain first_success unanswered retryable_failure]"
	if got := tableRows(t, l, rep.CostsFile, "custom_id, category"); got != want {
		t.Errorf("cost categories %v, want %v", got, want)
	}
	want = "[answered succeeded  plain succeeded  unanswered failed_retryable maybe_sent]"
	if got := tableRows(t, l, rep.OutcomesFile, "custom_id, outcome, reason"); got != want {
		t.Errorf("outcomes %v, want %v", got, want)
	}
}

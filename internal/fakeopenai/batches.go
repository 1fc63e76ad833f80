package fakeopenai

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batchlake/batchlake/providers"
)

// Batch is a batch object as the API returns it.
type Batch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Model            string            `json:"model,omitempty"`
	Errors           *BatchErrors      `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    RequestCounts     `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
	// Usage is the batch's aggregate token usage, set when it finishes:
	// the sum over its output lines, as OpenAI's batch object reports it.
	Usage *BatchUsage `json:"usage,omitempty"`
}

// BatchUsage is a batch object's aggregate usage.
type BatchUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// usageOf sums the usage of a batch's output lines (chat completions and
// responses shapes), plus skew on the input tokens (Faults.UsageSkew).
func usageOf(output []byte, skew int64) *BatchUsage {
	u := &BatchUsage{}
	for _, line := range bytes.Split(output, []byte{'\n'}) {
		var l struct {
			Response *struct {
				Body struct {
					Usage struct {
						PromptTokens        int64 `json:"prompt_tokens"`
						CompletionTokens    int64 `json:"completion_tokens"`
						InputTokens         int64 `json:"input_tokens"`
						OutputTokens        int64 `json:"output_tokens"`
						PromptTokensDetails struct {
							CachedTokens int64 `json:"cached_tokens"`
						} `json:"prompt_tokens_details"`
						InputTokensDetails struct {
							CachedTokens int64 `json:"cached_tokens"`
						} `json:"input_tokens_details"`
					} `json:"usage"`
				} `json:"body"`
			} `json:"response"`
		}
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &l) != nil || l.Response == nil {
			continue
		}
		x := l.Response.Body.Usage
		u.InputTokens += x.PromptTokens + x.InputTokens
		u.InputTokensDetails.CachedTokens += x.PromptTokensDetails.CachedTokens + x.InputTokensDetails.CachedTokens
		u.OutputTokens += x.CompletionTokens + x.OutputTokens
	}
	u.InputTokens += skew
	u.TotalTokens = u.InputTokens + u.OutputTokens
	return u
}

// BatchErrors are a batch's batch-level errors (set when it failed validation).
type BatchErrors struct {
	Object string       `json:"object"`
	Data   []BatchError `json:"data"`
}

// BatchError is one batch-level error.
type BatchError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int64  `json:"line"`
}

// RequestCounts count a batch's requests.
type RequestCounts struct {
	Total     int64 `json:"total"`
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
}

// batch is a batch with the server's bookkeeping. Fields of the embedded
// Batch are replaced, never written through, so a copy of Batch can be
// encoded outside the lock.
type batch struct {
	Batch
	seq      int
	ids      []string // custom_ids in input order
	result   Result
	simErr   error
	polls    int
	finished int // requests done when a cancel arrived
	// outcome of each custom_id in the simulated result: true completed,
	// false failed, absent neither (no line); for the moving counts.
	outcome map[string]bool
	// listable is when the batch shows in listings (Options.ListDelay).
	listable time.Time
	// tokens estimates the batch's prompt tokens (input bytes / 4) for
	// Options.EnqueuedTokenLimit.
	tokens int64
	// failCode, when set, is the batch-level error code the batch fails
	// validation with (Faults.FailValidation); expire makes it expire
	// (Faults.Expire). Both are drawn from the faults when the batch is
	// made, as a real batch's fate is its own: so which batches fail does
	// not depend on the order a client polls them in.
	failCode string
	expire   bool
}

var batchEndpoints = map[string]bool{
	"/v1/responses": true, "/v1/chat/completions": true, "/v1/embeddings": true, "/v1/completions": true,
	"/v1/moderations": true, "/v1/images/generations": true, "/v1/images/edits": true, "/v1/videos": true,
}

func (b *batch) terminal() bool {
	switch b.Status {
	case "completed", "failed", "expired", "cancelled":
		return true
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// newBatch creates a batch over input file in; s.mu must be held. The
// simulated result is computed now, so that what a batch produces does not
// depend on when it is polled.
func (s *Server) newBatch(ctx context.Context, in *file, endpoint string, meta map[string]string, createdAt time.Time) (*batch, error) {
	id, seq := s.newIDOr("", "batch")
	attempt, _ := strconv.Atoi(meta[providers.MetaAttempt])
	rates := DefaultRates
	if s.opts.Rates != nil {
		rates = *s.opts.Rates
	}
	if attempt > 1 {
		rates = RetryRates
		if s.opts.RetryRates != nil {
			rates = *s.opts.RetryRates
		}
	}
	b := &batch{
		Batch: Batch{
			ID:               id,
			Object:           "batch",
			Endpoint:         endpoint,
			InputFileID:      in.ID,
			CompletionWindow: "24h",
			Status:           "validating",
			CreatedAt:        createdAt.Unix(),
			ExpiresAt:        ptr(createdAt.Add(24 * time.Hour).Unix()),
			Metadata:         maps.Clone(meta),
		},
		seq:      seq,
		listable: time.Now().Add(s.opts.ListDelay),
	}
	b.ids, b.Model = scanInput(in.data)
	b.tokens = int64(len(in.data)) / 4
	b.result, b.simErr = SimulateBatch(in.data, s.opts.Seed, rates, id)
	if s.opts.Answer != nil && b.simErr == nil {
		b.result.Output = withAnswers(b.result.Output, s.opts.Answer)
	}
	b.outcome = outcomes(b.result)
	switch {
	case b.simErr != nil || len(b.ids) == 0:
		// Fails validation anyway: the faults stay for the next batch.
	case s.faults.FailValidation > 0:
		s.faults.FailValidation--
		b.failCode = cmp.Or(s.faults.FailCode, "token_limit_exceeded")
	case s.faults.Expire > 0:
		s.faults.Expire--
		b.expire = true
	}
	return b, s.saveBatch(ctx, b)
}

// scanInput returns the custom_ids of an input file in order and its model.
// Lines that do not parse are skipped here; Simulate reports them.
func scanInput(data []byte) (ids []string, model string) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		var l struct {
			CustomID string `json:"custom_id"`
			Body     struct {
				Model string `json:"model"`
			} `json:"body"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.CustomID == "" {
			continue
		}
		ids = append(ids, l.CustomID)
		if model == "" {
			model = l.Body.Model
		}
	}
	return ids, model
}

// sortedBatches lists batches newest first, as GET /v1/batches does; s.mu must be held.
func (s *Server) sortedBatches(ctx context.Context) ([]*batch, error) {
	bs, err := s.allBatches(ctx)
	slices.SortFunc(bs, func(a, b *batch) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(b.seq, a.seq))
	})
	return bs, err
}

type createRequest struct {
	InputFileID      string            `json:"input_file_id"`
	Endpoint         string            `json:"endpoint"`
	CompletionWindow string            `json:"completion_window"`
	Metadata         map[string]string `json:"metadata"`
}

// validate returns an error message for a create OpenAI would refuse; s.mu must be held.
func (s *Server) validate(f *file, req createRequest) string {
	ok := f != nil
	switch {
	case req.InputFileID == "":
		return "Missing required parameter: 'input_file_id'."
	case !ok:
		return fmt.Sprintf("Invalid 'input_file_id': '%s'. File not found.", req.InputFileID)
	case f.Purpose != "batch":
		return fmt.Sprintf("Invalid 'input_file_id': '%s'. The file must be uploaded with purpose 'batch'.", req.InputFileID)
	case !batchEndpoints[req.Endpoint]:
		return fmt.Sprintf("Invalid value for 'endpoint': '%s'.", req.Endpoint)
	case req.CompletionWindow != "24h":
		return fmt.Sprintf("Invalid value for 'completion_window': '%s'. Supported values are: '24h'.", req.CompletionWindow)
	case len(req.Metadata) > 16:
		return "Invalid 'metadata': too many keys (at most 16)."
	}
	for k, v := range req.Metadata {
		if len(k) > 64 || len(v) > 512 {
			return fmt.Sprintf("Invalid 'metadata': key %q or its value is too long.", k)
		}
	}
	return ""
}

func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return
	}
	s.mu.Lock()
	status := cmp.Or(s.faults.CreateStatus, http.StatusInternalServerError)
	if s.faults.CreateRefused > 0 {
		s.faults.CreateRefused--
		s.mu.Unlock()
		setFault(w, "create refused")
		s.faultError(w, r, status)
		return
	}
	in, err := s.lookupFile(stored(r), req.InputFileID)
	if err != nil {
		s.mu.Unlock()
		storeError(w, err)
		return
	}
	if msg := s.validate(in, req); msg != "" {
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", msg)
		return
	}
	b, err := s.newBatch(stored(r), in, req.Endpoint, req.Metadata, s.opts.Now())
	if err != nil {
		s.mu.Unlock()
		storeError(w, err)
		return
	}
	out := b.Batch
	fault := ""
	switch {
	case s.faults.CreateLost > 0:
		s.faults.CreateLost--
		fault = "create lost"
	case s.faults.CreateSlow > 0:
		s.faults.CreateSlow--
		fault = "create slow"
	case s.faults.CreateErrorAfter > 0:
		s.faults.CreateErrorAfter--
		fault = "create error after"
	}
	slow := cmp.Or(s.faults.SlowResponse, 2*time.Second)
	s.mu.Unlock()

	setFault(w, fault)
	switch fault {
	case "create lost":
		// The batch exists; the client never hears of it.
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler) // not HTTP/1: abort the stream instead
		}
		_ = conn.Close()
		return
	case "create slow":
		t := time.NewTimer(slow)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return // the client gave up first
		}
	case "create error after":
		s.faultError(w, r, status)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listBatches(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid 'limit': must be between 1 and 100.")
			return
		}
		limit = n
	}
	s.mu.Lock()
	all, err := s.sortedBatches(stored(r))
	if err != nil {
		s.mu.Unlock()
		storeError(w, err)
		return
	}
	items := make([]Batch, 0, len(all))
	now := time.Now()
	for _, b := range all {
		if now.Before(b.listable) {
			continue // not in the listing yet (Options.ListDelay)
		}
		items = append(items, b.Batch)
	}
	s.mu.Unlock()
	l, err := page(items, func(b Batch) string { return b.ID }, q.Get("after"), limit)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid 'after': "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func (s *Server) getBatch(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	b, err := s.lookupBatch(stored(r), id)
	var out Batch
	if b != nil && !b.terminal() {
		if err = s.advance(stored(r), b); err == nil {
			err = s.saveBatch(stored(r), b)
		}
	}
	if b != nil {
		out = b.Batch
	}
	s.mu.Unlock()
	if err != nil {
		storeError(w, err)
		return
	}
	if b == nil {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("No batch found with id '%s'.", id))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) cancelBatch(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	b, err := s.lookupBatch(stored(r), id)
	if err != nil {
		s.mu.Unlock()
		storeError(w, err)
		return
	}
	if b == nil {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("No batch found with id '%s'.", id))
		return
	}
	now := s.opts.Now().Unix()
	switch b.Status {
	case "validating":
		b.finished = 0
	case "in_progress":
		b.finished = s.partial(len(b.ids))
	case "finalizing":
		b.finished = len(b.ids)
	case "cancelling":
	default:
		st := b.Status
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf("Cannot cancel a batch with status '%s'.", st))
		return
	}
	if b.Status != "cancelling" {
		b.Status = "cancelling"
		b.CancellingAt = ptr(now)
		b.polls = 0
		if err := s.saveBatch(stored(r), b); err != nil {
			s.mu.Unlock()
			storeError(w, err)
			return
		}
	}
	out := b.Batch
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// partial is how many of n requests finished before an expiry or cancel.
func (s *Server) partial(n int) int {
	f := s.opts.PartialFraction
	if f < 0 {
		return 0
	}
	return min(n, int(math.Floor(float64(n)*f)))
}

// outcomes maps the custom_ids of a simulated result to completed (true)
// or failed (false), as its counts count them.
func outcomes(r Result) map[string]bool {
	m := map[string]bool{}
	for _, ch := range []struct {
		data []byte
		ok   bool
	}{{r.Errors, false}, {r.Output, true}} {
		for _, l := range bytes.Split(ch.data, []byte("\n")) {
			var v struct {
				CustomID string `json:"custom_id"`
			}
			if json.Unmarshal(l, &v) == nil && v.CustomID != "" {
				m[v.CustomID] = ch.ok
			}
		}
	}
	return m
}

// progress is the request counts of a batch in progress whose first done
// requests (in input order) have finished: request_counts move while a
// batch runs (0/N at in_progress, N/N by finalizing), as OpenAI's do.
func (b *batch) progress(done int) RequestCounts {
	rc := RequestCounts{Total: int64(len(b.ids))}
	for _, id := range b.ids[:min(done, len(b.ids))] {
		if ok, seen := b.outcome[id]; seen && ok {
			rc.Completed++
		} else if seen {
			rc.Failed++
		}
	}
	return rc
}

// enqueuedTokens is what model's admitted batches (past validation, not yet
// completed) hold against the enqueued token limit; s.mu must be held.
func (s *Server) enqueuedTokens(ctx context.Context, model string) (int64, error) {
	bs, err := s.allBatches(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, o := range bs {
		if o.Model == model && (o.Status == "in_progress" || o.Status == "finalizing") {
			n += o.tokens
		}
	}
	return n, nil
}

// advance moves a batch on by one poll; s.mu must be held. The caller
// saves the batch.
func (s *Server) advance(ctx context.Context, b *batch) error {
	if b.terminal() {
		return nil
	}
	b.polls++
	if b.polls < s.opts.PollsPerStep {
		if b.Status == "in_progress" {
			b.RequestCounts = b.progress(len(b.ids) * b.polls / s.opts.PollsPerStep)
		}
		return nil
	}
	b.polls = 0
	now := s.opts.Now().Unix()
	var enqueued int64
	if b.Status == "validating" && s.opts.EnqueuedTokenLimit > 0 {
		n, err := s.enqueuedTokens(ctx, b.Model)
		if err != nil {
			return err
		}
		enqueued = n + b.tokens
	}
	switch b.Status {
	case "validating":
		switch {
		case b.simErr != nil:
			s.fail(b, "invalid_json_line", b.simErr.Error())
		case len(b.ids) == 0:
			s.fail(b, "empty_file", "The input file is empty.")
		case s.opts.EnqueuedTokenLimit > 0 && enqueued > s.opts.EnqueuedTokenLimit:
			s.fail(b, "token_limit_exceeded", fmt.Sprintf("Enqueued token limit reached for %s in organization org-fake. Limit: %d enqueued tokens. Please try again once some in_progress batches have been completed.",
				cmp.Or(b.Model, "the model"), s.opts.EnqueuedTokenLimit))
		case b.failCode != "":
			code := b.failCode
			msg := "The batch failed validation."
			if code == "token_limit_exceeded" {
				msg = fmt.Sprintf("Enqueued token limit reached for %s in organization org-fake. Limit: 2,000,000 enqueued tokens. Please try again once some in_progress batches have been completed.", cmp.Or(b.Model, "the model"))
			}
			s.fail(b, code, msg)
		default:
			b.Status = "in_progress"
			b.InProgressAt = ptr(now)
			b.RequestCounts = RequestCounts{Total: int64(len(b.ids))}
		}
	case "in_progress":
		if b.expire {
			b.ExpiredAt = ptr(now)
			return s.finishPartial(ctx, b, "expired", s.partial(len(b.ids)), "batch_expired",
				"This request could not be executed before the completion window expired.")
		}
		b.Status = "finalizing"
		b.FinalizingAt = ptr(now)
		// Every request has run: the counts are final while the files are made.
		b.RequestCounts = RequestCounts{Total: b.result.Total, Completed: b.result.Completed, Failed: b.result.Failed}
	case "finalizing":
		b.Status = "completed"
		b.CompletedAt = ptr(now)
		b.RequestCounts = RequestCounts{Total: b.result.Total, Completed: b.result.Completed, Failed: b.result.Failed}
		return s.storeResults(ctx, b, b.result.Output, b.result.Errors)
	case "cancelling":
		b.CancelledAt = ptr(now)
		return s.finishPartial(ctx, b, "cancelled", b.finished, "batch_cancelled",
			"This request was not executed because the batch was cancelled.")
	}
	return nil
}

func (s *Server) fail(b *batch, code, msg string) {
	b.Status = "failed"
	b.FailedAt = ptr(s.opts.Now().Unix())
	b.Errors = &BatchErrors{Object: "list", Data: []BatchError{{Code: code, Message: msg}}}
}

// storeResults writes a batch's output and error files; s.mu must be held.
// An empty channel gets no file (its id stays null), as OpenAI does.
func (s *Server) storeResults(ctx context.Context, b *batch, output, errs []byte) error {
	b.Usage = usageOf(output, s.faults.UsageSkew)
	for _, ch := range []struct {
		name string
		data []byte
		id   **string
	}{{"output", output, &b.OutputFileID}, {"error", errs, &b.ErrorFileID}} {
		if len(ch.data) == 0 {
			continue
		}
		// In a bucket, two processes may finish the same batch at once:
		// its result files are named after it, so both write the same
		// objects.
		id := ""
		if s.opts.Bucket != nil {
			id = "file-" + strings.TrimPrefix(b.ID, "batch_") + "_" + ch.name
		}
		f, err := s.storeFile(ctx, id, b.ID+"_"+ch.name+".jsonl", "batch_output", ch.data)
		if err != nil {
			return err
		}
		*ch.id = ptr(f.ID)
	}
	return nil
}

// finishPartial ends a batch whose first `finished` requests (in input
// order) ran: their simulated lines are kept, the others become error lines
// with code; lines for ids never sent (sim's unknown lines) are kept too.
func (s *Server) finishPartial(ctx context.Context, b *batch, status string, finished int, code, msg string) error {
	b.Status = status
	done := map[string]bool{}
	sent := map[string]bool{}
	for i, id := range b.ids {
		sent[id] = true
		if i < finished {
			done[id] = true
		}
	}
	keep := func(data []byte) (lines [][]byte, okIDs map[string]bool) {
		okIDs = map[string]bool{}
		for _, l := range bytes.SplitAfter(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) == 0 {
				continue
			}
			var v struct {
				CustomID string `json:"custom_id"`
			}
			_ = json.Unmarshal(l, &v)
			if done[v.CustomID] || !sent[v.CustomID] {
				lines = append(lines, l)
				if done[v.CustomID] {
					okIDs[v.CustomID] = true
				}
			}
		}
		return lines, okIDs
	}
	outLines, succeeded := keep(b.result.Output)
	errLines, failed := keep(b.result.Errors)
	for _, id := range b.ids[finished:] {
		h := fnv.New64a()
		_, _ = h.Write([]byte(b.ID + "\x00" + id))
		l, _ := json.Marshal(map[string]any{
			"id": fmt.Sprintf("batch_req_%016x", h.Sum64()), "custom_id": id, "response": nil,
			"error": map[string]any{"code": code, "message": msg},
		})
		errLines = append(errLines, append(l, '\n'))
		failed[id] = true
	}
	b.RequestCounts = RequestCounts{Total: int64(len(b.ids)), Completed: int64(len(succeeded)), Failed: int64(len(failed))}
	return s.storeResults(ctx, b, bytes.Join(outLines, nil), bytes.Join(errLines, nil))
}

// withAnswers sets the first choice's message content of each chat
// completion success line of an output file to answer(custom_id).
func withAnswers(output []byte, answer func(string) string) []byte {
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(output))
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		var l map[string]any
		if json.Unmarshal(line, &l) == nil {
			cid, _ := l["custom_id"].(string)
			resp, _ := l["response"].(map[string]any)
			body, _ := resp["body"].(map[string]any)
			choices, _ := body["choices"].([]any)
			if len(choices) > 0 {
				if c, ok := choices[0].(map[string]any); ok {
					if m, ok := c["message"].(map[string]any); ok {
						m["content"] = answer(cid)
						if b, err := json.Marshal(l); err == nil {
							line = b
						}
					}
				}
			}
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return output
	}
	return append(bytes.Join(out, []byte{'\n'}), '\n')
}

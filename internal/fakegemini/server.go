package fakegemini

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultAPIKey is the key accepted when Options.APIKey is empty.
const DefaultAPIKey = "AIzaFAKE0000000000000000000000"

// Outcomes a request can have.
const (
	OK        = "ok"
	Blocked   = "blocked"   // a response without candidates (promptFeedback SAFETY)
	Internal  = "internal"  // error code 13: retryable
	Invalid   = "invalid"   // error code 3: permanent
	Exhausted = "exhausted" // error code 8: retryable
)

// Options configure a Server.
type Options struct {
	APIKey string
	// PollsPerStep is how many GETs of a batch move it one state on (1 if 0).
	PollsPerStep int
	// Outcome gives a request's outcome by key (OK if nil).
	Outcome func(key string) string
	Now     func() time.Time
	// RefuseMIME are upload MIME types (X-Goog-Upload-Header-Content-Type)
	// this account refuses, as some Gemini accounts refuse
	// application/jsonl: the finalize is answered 200 with
	// X-Goog-Upload-Status final and the body {"error":{"code":400,
	// "message":"Unsupported MIME type: <type>","status":"INVALID_ARGUMENT"}}
	// — a 200, which is why the SDKs fail on the missing "file" key
	// (python-genai #1547, #1590) — and no file is stored.
	RefuseMIME []string
	Faults     Faults
	// RealTime are the failures to inject into generateContent.
	RealTime RealTimeFaults
	// Answer, if set, gives generateContent's answer text for a request
	// body (tests of an output contract need JSON answers); usage stays
	// the fake's.
	Answer func(body []byte) string
}

// Faults are counters of failures still to inject.
type Faults struct {
	CreateRefused    int // answer CreateStatus, create nothing
	CreateLost       int // create, then close the connection unanswered
	CreateErrorAfter int // create, then answer CreateStatus
	CreateStatus     int // 500 if 0; 429 answers RESOURCE_EXHAUSTED
	ListErrors       int // the next N batch list calls answer 503
	// UploadSlow makes the next N file uploads (the finalize with the
	// bytes) take UploadDelay to arrive; the file is stored only after it,
	// and a client that gives up first leaves none.
	UploadSlow  int
	UploadDelay time.Duration // 2 s if 0
	Expire      int           // the next N batches created expire instead of running
}

// Request is one request received.
type Request struct {
	Method, Path string
	Status       int
	Fault        string
}

type file struct {
	name, display string
	mime          string
	data          []byte
	created       time.Time
}

type inReq struct {
	key     string
	request json.RawMessage
}

type batch struct {
	name, display, model string
	created, updated     time.Time
	state                string
	polls                int
	reqs                 []inReq
	inline               bool
	inputFile            string
	outFile              string
	inlined              []any
	outcomes             []string
	// expire is drawn from Faults.Expire when the batch is made, as a
	// real batch's fate is its own, not the next one polled.
	expire bool
}

// Server is a fake Gemini batch API; safe for concurrent use.
type Server struct {
	opts     Options
	mu       sync.Mutex
	faults   Faults
	requests []Request
	files    map[string]*file
	uploads  map[string]*file
	batches  map[string]*batch
	seq      int
	base     string
	rtFaults RealTimeFaults
	rtCalls  []RealTimeCall
}

// New makes a server; mount Handler and call SetBaseURL.
func New(o Options) *Server {
	if o.APIKey == "" {
		o.APIKey = DefaultAPIKey
	}
	if o.PollsPerStep <= 0 {
		o.PollsPerStep = 1
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Server{opts: o, faults: o.Faults, rtFaults: o.RealTime, files: map[string]*file{}, uploads: map[string]*file{}, batches: map[string]*batch{}}
}

// SetBaseURL tells the server its own URL (for upload URLs).
func (s *Server) SetBaseURL(u string) {
	s.mu.Lock()
	s.base = strings.TrimSuffix(u, "/")
	s.mu.Unlock()
}

// UpdateFaults changes the faults still to inject.
func (s *Server) UpdateFaults(f func(*Faults)) { s.mu.Lock(); f(&s.faults); s.mu.Unlock() }

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count counts requests by method and path prefix.
func (s *Server) Count(method, prefix string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Method == method && strings.HasPrefix(r.Path, prefix) {
			n++
		}
	}
	return n
}

// Batches returns the names of all batches, oldest first.
func (s *Server) Batches() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sorted(false)
}

// Inject adds a batch somebody else made, with this display name.
func (s *Server) Inject(display string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.newBatch(display, "models/gemini-2.5-flash")
	b.reqs = []inReq{{key: "foreign-1", request: json.RawMessage(`{"contents":[{"parts":[{"text":"x"}]}]}`)}}
	return b.name
}

// FileMIMEs returns the declared MIME type of every stored file.
func (s *Server) FileMIMEs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, f := range s.files {
		out = append(out, f.mime)
	}
	sort.Strings(out)
	return out
}

// Handler serves the API.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rec := Request{Method: r.Method, Path: r.URL.Path}
	defer func() { s.mu.Lock(); s.requests = append(s.requests, rec); s.mu.Unlock() }()
	reply := func(status int, v any) {
		rec.Status = status
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	fail := func(status int, st, msg string) {
		reply(status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}})
	}
	key := r.Header.Get("X-Goog-Api-Key")
	uploadID := r.URL.Query().Get("upload_id")
	if key != s.opts.APIKey && uploadID == "" {
		fail(403, "PERMISSION_DENIED", "API key not valid: "+key)
		return
	}
	if r.URL.Path == "/upload/v1beta/files" && r.Method == http.MethodPost && uploadID != "" && !s.slowUpload(r, &rec) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := r.URL.Path
	switch {
	case p == "/upload/v1beta/files" && r.Method == http.MethodPost:
		s.upload(w, r, uploadID, &rec, reply, fail)
	case p == "/v1beta/files" && r.Method == http.MethodGet:
		var out []any
		for _, f := range s.files {
			out = append(out, map[string]any{"name": f.name, "displayName": f.display, "sizeBytes": strconv.Itoa(len(f.data)),
				"state": "ACTIVE", "createTime": f.created.Format(time.RFC3339Nano), "expirationTime": f.created.Add(48 * time.Hour).Format(time.RFC3339Nano)})
		}
		reply(200, map[string]any{"files": out})
	case strings.HasPrefix(p, "/v1beta/models/") && strings.HasSuffix(p, ":generateContent") && r.Method == http.MethodPost:
		s.generate(w, r, strings.TrimSuffix(strings.TrimPrefix(p, "/v1beta/"), ":generateContent"), &rec, reply, fail)
	case strings.HasPrefix(p, "/v1beta/models/") && strings.HasSuffix(p, ":batchGenerateContent") && r.Method == http.MethodPost:
		s.create(w, r, strings.TrimSuffix(strings.TrimPrefix(p, "/v1beta/"), ":batchGenerateContent"), &rec, reply, fail)
	case p == "/v1beta/batches" && r.Method == http.MethodGet:
		if s.faults.ListErrors > 0 {
			s.faults.ListErrors--
			rec.Fault = "list_error"
			fail(503, "UNAVAILABLE", "The service is currently unavailable.")
			return
		}
		s.list(r, reply)
	case strings.HasPrefix(p, "/v1beta/batches/") && strings.HasSuffix(p, ":cancel") && r.Method == http.MethodPost:
		b, ok := s.batches[strings.TrimSuffix(strings.TrimPrefix(p, "/v1beta/"), ":cancel")]
		if !ok {
			fail(404, "NOT_FOUND", "no such batch")
			return
		}
		if b.state == "BATCH_STATE_PENDING" || b.state == "BATCH_STATE_RUNNING" {
			b.state, b.updated = "BATCH_STATE_CANCELLED", s.opts.Now().UTC()
		}
		reply(200, map[string]any{})
	case strings.HasPrefix(p, "/v1beta/batches/") && r.Method == http.MethodGet:
		b, ok := s.batches[strings.TrimPrefix(p, "/v1beta/")]
		if !ok {
			fail(404, "NOT_FOUND", "no such batch")
			return
		}
		s.poll(b)
		reply(200, s.op(b))
	case strings.HasPrefix(p, "/download/v1beta/files/") && strings.HasSuffix(p, ":download") && r.Method == http.MethodGet:
		f, ok := s.files[strings.TrimSuffix(strings.TrimPrefix(p, "/download/v1beta/"), ":download")]
		if !ok {
			fail(404, "NOT_FOUND", "no such file")
			return
		}
		rec.Status = 200
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(f.data)
	default:
		fail(404, "NOT_FOUND", "no route "+r.Method+" "+p)
	}
}

// slowUpload applies the UploadSlow fault to a request (without holding the
// server's lock, so other requests go on meanwhile). It reports false when
// the client gave up before the bytes arrived.
func (s *Server) slowUpload(r *http.Request, rec *Request) bool {
	s.mu.Lock()
	slow := s.faults.UploadSlow > 0
	delay := s.faults.UploadDelay
	if slow {
		s.faults.UploadSlow--
	}
	s.mu.Unlock()
	if !slow {
		return true
	}
	if delay == 0 {
		delay = 2 * time.Second
	}
	rec.Fault = "upload_slow"
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, id string, rec *Request, reply func(int, any), fail func(int, string, string)) {
	if id == "" {
		if r.Header.Get("X-Goog-Upload-Protocol") != "resumable" || r.Header.Get("X-Goog-Upload-Command") != "start" {
			fail(400, "INVALID_ARGUMENT", "want a resumable start")
			return
		}
		var meta struct {
			File struct {
				DisplayName string `json:"display_name"`
			} `json:"file"`
		}
		json.NewDecoder(r.Body).Decode(&meta)
		s.seq++
		id = strconv.Itoa(s.seq)
		s.uploads[id] = &file{display: meta.File.DisplayName, mime: r.Header.Get("X-Goog-Upload-Header-Content-Type")}
		w.Header().Set("X-Goog-Upload-URL", s.base+"/upload/v1beta/files?upload_id="+id)
		w.Header().Set("X-Goog-Upload-Status", "active")
		reply(200, map[string]any{})
		return
	}
	f, ok := s.uploads[id]
	if !ok || r.Header.Get("X-Goog-Upload-Command") != "upload, finalize" {
		fail(400, "INVALID_ARGUMENT", "unknown upload or command")
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		fail(400, "INVALID_ARGUMENT", err.Error())
		return
	}
	delete(s.uploads, id)
	w.Header().Set("X-Goog-Upload-Status", "final")
	if slices.Contains(s.opts.RefuseMIME, f.mime) {
		rec.Fault = "mime_refused"
		reply(200, map[string]any{"error": map[string]any{"code": 400, "message": "Unsupported MIME type: " + f.mime, "status": "INVALID_ARGUMENT"}})
		return
	}
	s.seq++
	f.name, f.data, f.created = fmt.Sprintf("files/in%04d", s.seq), data, s.opts.Now().UTC()
	s.files[f.name] = f
	reply(200, map[string]any{"file": map[string]any{"name": f.name, "displayName": f.display, "sizeBytes": strconv.Itoa(len(data)), "state": "ACTIVE", "mimeType": f.mime}})
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, model string, rec *Request, reply func(int, any), fail func(int, string, string)) {
	st := s.faults.CreateStatus
	if st == 0 {
		st = 500
	}
	failStatus := func() {
		if st == 429 {
			fail(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).")
		} else {
			fail(st, "INTERNAL", "An internal error has occurred.")
		}
	}
	if s.faults.CreateRefused > 0 {
		s.faults.CreateRefused--
		rec.Fault = "create_refused"
		failStatus()
		return
	}
	var body struct {
		Batch struct {
			DisplayName string `json:"displayName"`
			InputConfig struct {
				FileName string `json:"fileName"`
				Requests *struct {
					Requests []struct {
						Request  json.RawMessage `json:"request"`
						Metadata struct {
							Key string `json:"key"`
						} `json:"metadata"`
					} `json:"requests"`
				} `json:"requests"`
			} `json:"inputConfig"`
		} `json:"batch"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		fail(400, "INVALID_ARGUMENT", "body: "+err.Error())
		return
	}
	var reqs []inReq
	ic := body.Batch.InputConfig
	switch {
	case ic.FileName != "":
		f, ok := s.files[ic.FileName]
		if !ok {
			fail(400, "INVALID_ARGUMENT", "no file "+ic.FileName)
			return
		}
		for _, line := range bytes.Split(bytes.TrimSpace(f.data), []byte("\n")) {
			var l struct {
				Key     string          `json:"key"`
				Request json.RawMessage `json:"request"`
			}
			if err := json.Unmarshal(line, &l); err != nil {
				fail(400, "INVALID_ARGUMENT", "input line: "+err.Error())
				return
			}
			reqs = append(reqs, inReq{l.Key, l.Request})
		}
	case ic.Requests != nil && len(ic.Requests.Requests) > 0:
		for _, q := range ic.Requests.Requests {
			reqs = append(reqs, inReq{q.Metadata.Key, q.Request})
		}
	default:
		fail(400, "INVALID_ARGUMENT", "inputConfig: want fileName or requests")
		return
	}
	b := s.newBatch(body.Batch.DisplayName, model)
	// A created batch's fate is drawn now (an injected foreign one's is not).
	if s.faults.Expire > 0 {
		s.faults.Expire--
		b.expire = true
	}
	b.reqs, b.inline, b.inputFile = reqs, ic.FileName == "", ic.FileName
	switch {
	case s.faults.CreateLost > 0:
		s.faults.CreateLost--
		rec.Fault = "create_lost"
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	case s.faults.CreateErrorAfter > 0:
		s.faults.CreateErrorAfter--
		rec.Fault = "create_error_after"
		failStatus()
		return
	}
	reply(200, s.op(b))
}

func (s *Server) newBatch(display, model string) *batch {
	s.seq++
	now := s.opts.Now().UTC()
	b := &batch{name: fmt.Sprintf("batches/b%06d", s.seq), display: display, model: model, created: now, updated: now, state: "BATCH_STATE_PENDING"}
	s.batches[b.name] = b
	return b
}

func (s *Server) poll(b *batch) {
	b.polls++
	if b.polls < s.opts.PollsPerStep {
		return
	}
	b.polls = 0
	switch b.state {
	case "BATCH_STATE_PENDING":
		if b.expire {
			b.state = "BATCH_STATE_EXPIRED"
			return
		}
		b.state = "BATCH_STATE_RUNNING"
	case "BATCH_STATE_RUNNING":
		s.finish(b)
	}
	b.updated = s.opts.Now().UTC()
}

func (s *Server) finish(b *batch) {
	b.state = "BATCH_STATE_SUCCEEDED"
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	for _, q := range b.reqs {
		o := OK
		if s.opts.Outcome != nil {
			o = s.opts.Outcome(q.key)
		}
		b.outcomes = append(b.outcomes, o)
		var resp, errv any
		switch o {
		case OK:
			resp = map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"parts": []any{map[string]any{"text": "answer to " + q.key}}, "role": "model"}, "finishReason": "STOP", "index": 0}},
				"usageMetadata": map[string]any{"promptTokenCount": 10 + len(q.key), "candidatesTokenCount": 5, "totalTokenCount": 15 + len(q.key)},
				"modelVersion":  strings.TrimPrefix(b.model, "models/"), "responseId": responseID(b.name, q.key)}
		case Blocked:
			resp = map[string]any{"promptFeedback": map[string]any{"blockReason": "SAFETY"}, "usageMetadata": map[string]any{"promptTokenCount": 7, "totalTokenCount": 7}, "modelVersion": strings.TrimPrefix(b.model, "models/")}
		case Internal:
			errv = map[string]any{"code": 13, "message": "An internal error has occurred."}
		case Invalid:
			errv = map[string]any{"code": 3, "message": "Request contains an invalid argument."}
		case Exhausted:
			errv = map[string]any{"code": 8, "message": "Resource has been exhausted."}
		}
		if b.inline {
			ir := map[string]any{"metadata": map[string]any{"key": q.key}}
			if resp != nil {
				ir["response"] = resp
			} else {
				ir["error"] = errv
			}
			b.inlined = append(b.inlined, ir)
			continue
		}
		l := map[string]any{"key": q.key}
		if resp != nil {
			l["response"] = resp
		} else {
			l["error"] = errv
		}
		enc.Encode(l)
	}
	if !b.inline {
		s.seq++
		f := &file{name: fmt.Sprintf("files/batch-out%04d", s.seq), display: "responses of " + b.name, data: out.Bytes(), created: s.opts.Now().UTC()}
		s.files[f.name] = f
		b.outFile = f.name
	}
}

func (s *Server) sorted(newestFirst bool) []string {
	names := make([]string, 0, len(s.batches))
	for n := range s.batches {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return (names[i] < names[j]) != newestFirst })
	return names
}

func (s *Server) list(r *http.Request, reply func(int, any)) {
	size := 50
	if v, err := strconv.Atoi(r.URL.Query().Get("pageSize")); err == nil && v > 0 {
		size = v
	}
	start, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Query().Get("pageToken"), "p"))
	names := s.sorted(true)
	start = min(start, len(names))
	end := min(start+size, len(names))
	var ops []any
	for _, n := range names[start:end] {
		ops = append(ops, s.op(s.batches[n]))
	}
	page := map[string]any{"operations": ops}
	if end < len(names) {
		page["nextPageToken"] = "p" + strconv.Itoa(end)
	}
	reply(200, page)
}

func (s *Server) op(b *batch) map[string]any {
	stats := map[string]any{"requestCount": strconv.Itoa(len(b.reqs))}
	var ok, failed int
	for _, o := range b.outcomes {
		if o == OK || o == Blocked {
			ok++
		} else {
			failed++
		}
	}
	pending := len(b.reqs) - ok - failed
	for k, v := range map[string]int{"successfulRequestCount": ok, "failedRequestCount": failed, "pendingRequestCount": pending} {
		if v != 0 {
			stats[k] = strconv.Itoa(v)
		}
	}
	md := map[string]any{
		"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
		"name":  b.name, "model": b.model, "displayName": b.display, "state": b.state, "batchStats": stats,
		"createTime": b.created.Format(time.RFC3339Nano), "updateTime": b.updated.Format(time.RFC3339Nano),
	}
	if b.inputFile != "" {
		md["inputConfig"] = map[string]any{"fileName": b.inputFile}
	}
	op := map[string]any{"name": b.name, "metadata": md}
	switch b.state {
	case "BATCH_STATE_SUCCEEDED":
		op["done"] = true
		var output map[string]any
		if b.inline {
			output = map[string]any{"inlinedResponses": map[string]any{"inlinedResponses": b.inlined}}
		} else {
			output = map[string]any{"responsesFile": b.outFile}
		}
		md["output"] = output
		resp := map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatchOutput"}
		for k, v := range output {
			resp[k] = v
		}
		op["response"] = resp
	case "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED", "BATCH_STATE_FAILED":
		op["done"] = true
	}
	return op
}

// responseID is a batch's answer's responseId: unique to the batch and the
// request, as Gemini's are to each response.
func responseID(batchName, key string) string {
	d := sha256.Sum256([]byte(batchName + "\x00" + key))
	return "resp-" + hex.EncodeToString(d[:8])
}

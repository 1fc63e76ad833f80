package fakebedrock

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// S3Input is inputDataConfig.s3InputDataConfig.
type S3Input struct {
	S3URI         string `json:"s3Uri"`
	S3InputFormat string `json:"s3InputFormat,omitempty"`
	S3BucketOwner string `json:"s3BucketOwner,omitempty"`
}

// S3Output is outputDataConfig.s3OutputDataConfig.
type S3Output struct {
	S3URI             string `json:"s3Uri"`
	S3EncryptionKeyID string `json:"s3EncryptionKeyId,omitempty"`
	S3BucketOwner     string `json:"s3BucketOwner,omitempty"`
}

// InputConfig and OutputConfig are the union shapes of the API.
type InputConfig struct {
	S3 *S3Input `json:"s3InputDataConfig,omitempty"`
}

type OutputConfig struct {
	S3 *S3Output `json:"s3OutputDataConfig,omitempty"`
}

// Job is a job as GetModelInvocationJob and ListModelInvocationJobs show it.
type Job struct {
	JobArn                 string       `json:"jobArn"`
	JobName                string       `json:"jobName"`
	ModelID                string       `json:"modelId"`
	ClientRequestToken     string       `json:"clientRequestToken,omitempty"`
	RoleArn                string       `json:"roleArn"`
	Status                 string       `json:"status"`
	Message                string       `json:"message,omitempty"`
	SubmitTime             string       `json:"submitTime"`
	LastModifiedTime       string       `json:"lastModifiedTime,omitempty"`
	EndTime                string       `json:"endTime,omitempty"`
	JobExpirationTime      string       `json:"jobExpirationTime,omitempty"`
	TimeoutDurationInHours int32        `json:"timeoutDurationInHours,omitempty"`
	InputDataConfig        InputConfig  `json:"inputDataConfig"`
	OutputDataConfig       OutputConfig `json:"outputDataConfig"`
	ModelInvocationType    string       `json:"modelInvocationType,omitempty"`
	TotalRecordCount       *int64       `json:"totalRecordCount,omitempty"`
	ProcessedRecordCount   *int64       `json:"processedRecordCount,omitempty"`
	SuccessRecordCount     *int64       `json:"successRecordCount,omitempty"`
	ErrorRecordCount       *int64       `json:"errorRecordCount,omitempty"`
}

type createRequest struct {
	ClientRequestToken     string       `json:"clientRequestToken"`
	JobName                string       `json:"jobName"`
	ModelID                string       `json:"modelId"`
	RoleArn                string       `json:"roleArn"`
	InputDataConfig        InputConfig  `json:"inputDataConfig"`
	OutputDataConfig       OutputConfig `json:"outputDataConfig"`
	ModelInvocationType    string       `json:"modelInvocationType"`
	TimeoutDurationInHours int32        `json:"timeoutDurationInHours"`
}

// job is a Job with the server's bookkeeping.
type job struct {
	Job
	id       string
	seq      int
	params   string // the create parameters, to tell a retry from a conflict
	submit   time.Time
	polls    int
	records  []record // in input order, set at validation
	finished int      // records processed when the job ended
	done     bool     // ended after running: finished is final
	skew     bool     // ManifestSkew applies to this job
	// fate is how the job ends, drawn from the faults when it is made
	// (failValidation, partial or expire; "" runs to Completed), as a
	// real job's fate is its own, not the next one polled.
	fate     string
	stopFrom string // the status a stop arrived in
}

var (
	tokenRe = regexp.MustCompile(`^[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}$`)
	nameRe  = regexp.MustCompile(`^[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}$`)
	roleRe  = regexp.MustCompile(`^arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+$`)
)

func (s *Server) stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// validate returns a ValidationException message, or "".
func validate(req createRequest) string {
	switch {
	case len(req.JobName) < 1 || len(req.JobName) > 63 || !nameRe.MatchString(req.JobName):
		return fmt.Sprintf("1 validation error detected: Value '%s' at 'jobName' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", req.JobName, nameRe)
	case req.ClientRequestToken != "" && (len(req.ClientRequestToken) > 256 || !tokenRe.MatchString(req.ClientRequestToken)):
		return fmt.Sprintf("1 validation error detected: Value '%s' at 'clientRequestToken' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", req.ClientRequestToken, tokenRe)
	case req.ModelID == "":
		return "1 validation error detected: Value null at 'modelId' failed to satisfy constraint: Member must not be null"
	case !roleRe.MatchString(req.RoleArn):
		return fmt.Sprintf("1 validation error detected: Value '%s' at 'roleArn' failed to satisfy constraint: Member must satisfy regular expression pattern", req.RoleArn)
	case req.InputDataConfig.S3 == nil || !strings.HasPrefix(req.InputDataConfig.S3.S3URI, "s3://"):
		return "1 validation error detected: inputDataConfig.s3InputDataConfig.s3Uri must be an s3:// URI"
	case req.OutputDataConfig.S3 == nil || !strings.HasPrefix(req.OutputDataConfig.S3.S3URI, "s3://"):
		return "1 validation error detected: outputDataConfig.s3OutputDataConfig.s3Uri must be an s3:// URI"
	case req.ModelInvocationType != "" && req.ModelInvocationType != "InvokeModel" && req.ModelInvocationType != "Converse":
		return fmt.Sprintf("1 validation error detected: Value '%s' at 'modelInvocationType' failed to satisfy constraint", req.ModelInvocationType)
	case req.TimeoutDurationInHours != 0 && (req.TimeoutDurationInHours < 24 || req.TimeoutDurationInHours > 168):
		return "1 validation error detected: timeoutDurationInHours must be between 24 and 168"
	}
	return ""
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "ValidationException", "The request body is not valid JSON.")
		return
	}
	if msg := validate(req); msg != "" {
		writeError(w, http.StatusBadRequest, "ValidationException", msg)
		return
	}
	params, _ := json.Marshal([]any{req.JobName, req.ModelID, req.RoleArn, req.InputDataConfig.S3.S3URI,
		req.OutputDataConfig.S3.S3URI, cmp.Or(req.ModelInvocationType, "InvokeModel"), req.TimeoutDurationInHours})
	s.mu.Lock()
	if s.faults.CreateRefused > 0 {
		s.faults.CreateRefused--
		st := s.faults.CreateStatus
		if st == 0 {
			st = http.StatusBadRequest
		}
		s.mu.Unlock()
		w.(*recorder).fault = "create refused"
		status, typ, msg := exceptionFor(st)
		writeError(w, status, typ, msg)
		return
	}
	// Idempotency: a token seen before answers its job, unless the
	// parameters differ.
	if arn, ok := s.tokens[req.ClientRequestToken]; ok && req.ClientRequestToken != "" {
		j := s.jobs[arn]
		same := j.params == string(params)
		s.mu.Unlock()
		if !same {
			writeError(w, http.StatusBadRequest, "ConflictException",
				"The request failed due to a conflict: the client request token was used with different parameters.")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"jobArn": arn})
		return
	}
	s.seq++
	now := s.opts.Now()
	id := fmt.Sprintf("fake%08d", s.seq)
	j := &job{
		Job: Job{
			JobArn:              fmt.Sprintf("arn:aws:bedrock:%s:%s:model-invocation-job/%s", s.opts.Region, s.opts.Account, id),
			JobName:             req.JobName,
			ModelID:             req.ModelID,
			ClientRequestToken:  req.ClientRequestToken,
			RoleArn:             req.RoleArn,
			Status:              "Submitted",
			SubmitTime:          s.stamp(now),
			LastModifiedTime:    s.stamp(now),
			InputDataConfig:     req.InputDataConfig,
			OutputDataConfig:    req.OutputDataConfig,
			ModelInvocationType: cmp.Or(req.ModelInvocationType, "InvokeModel"),
		},
		id: id, seq: s.seq, params: string(params), submit: now,
	}
	hours := cmp.Or(req.TimeoutDurationInHours, 24)
	j.TimeoutDurationInHours = hours
	j.JobExpirationTime = s.stamp(now.Add(time.Duration(hours) * time.Hour))
	switch {
	case s.faults.FailValidation > 0:
		s.faults.FailValidation--
		j.fate = fateFailValidation
	case s.faults.Expire > 0:
		s.faults.Expire--
		j.fate = fateExpire
	case s.faults.Partial > 0:
		s.faults.Partial--
		j.fate = fatePartial
	}
	if s.faults.ManifestSkew > 0 {
		s.faults.ManifestSkew--
		j.skew = true
	}
	s.jobs[j.JobArn] = j
	if req.ClientRequestToken != "" {
		s.tokens[req.ClientRequestToken] = j.JobArn
	}
	fault := ""
	switch {
	case s.faults.CreateLost > 0:
		s.faults.CreateLost--
		fault = "create lost"
	case s.faults.CreateErrorAfter > 0:
		s.faults.CreateErrorAfter--
		fault = "create error after"
	}
	st := s.faults.CreateStatus
	s.mu.Unlock()
	w.(*recorder).fault = fault
	switch fault {
	case "create lost":
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		_ = conn.Close()
		return
	case "create error after":
		status, typ, msg := exceptionFor(st)
		writeError(w, status, typ, msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"jobArn": j.JobArn})
}

// sorted lists jobs oldest first; s.mu must be held.
func (s *Server) sorted() []*job {
	js := make([]*job, 0, len(s.jobs))
	for _, j := range s.jobs {
		js = append(js, j)
	}
	slices.SortFunc(js, func(a, b *job) int { return cmp.Compare(a.seq, b.seq) })
	return js
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("maxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "ValidationException", "maxResults must be between 1 and 1000")
			return
		}
		limit = n
	}
	var after, before time.Time
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"submitTimeAfter", &after}, {"submitTimeBefore", &before}} {
		if v := q.Get(f.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				writeError(w, http.StatusBadRequest, "ValidationException", f.name+" is not a timestamp")
				return
			}
			*f.t = t
		}
	}
	start := 0
	if v := q.Get("nextToken"); v != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(v, "page-"))
		if err != nil || n < 0 || !strings.HasPrefix(v, "page-") {
			writeError(w, http.StatusBadRequest, "ValidationException", "Invalid nextToken")
			return
		}
		start = n
	}
	s.mu.Lock()
	if s.faults.ListFail > 0 {
		s.faults.ListFail--
		s.mu.Unlock()
		w.(*recorder).fault = "list failed"
		writeError(w, http.StatusInternalServerError, "InternalServerException", "An internal server error occurred.")
		return
	}
	var items []Job
	js := s.sorted()
	if q.Get("sortOrder") != "Ascending" {
		slices.Reverse(js)
	}
	for _, j := range js {
		if n := q.Get("nameContains"); n != "" && !strings.Contains(j.JobName, n) {
			continue
		}
		if st := q.Get("statusEquals"); st != "" && j.Status != st {
			continue
		}
		if !after.IsZero() && !j.submit.After(after) || !before.IsZero() && !j.submit.Before(before) {
			continue
		}
		items = append(items, j.Job)
	}
	s.mu.Unlock()
	start = min(start, len(items))
	end := min(start+limit, len(items))
	out := struct {
		Summaries []Job  `json:"invocationJobSummaries"`
		NextToken string `json:"nextToken,omitempty"`
	}{Summaries: append([]Job{}, items[start:end]...)}
	if end < len(items) {
		out.NextToken = "page-" + strconv.Itoa(end)
	}
	writeJSON(w, http.StatusOK, out)
}

// lookup finds a job by ARN or id; s.mu must be held.
func (s *Server) lookup(ident string) *job {
	if u, err := url.PathUnescape(ident); err == nil {
		ident = u
	}
	if j, ok := s.jobs[ident]; ok {
		return j
	}
	for _, j := range s.jobs {
		if j.id == ident {
			return j
		}
	}
	return nil
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	j := s.lookup(r.PathValue("id"))
	var out Job
	if j != nil {
		s.advance(r.Context(), j)
		out = j.Job
	}
	s.mu.Unlock()
	if j == nil {
		writeError(w, http.StatusNotFound, "ResourceNotFoundException", "The specified job does not exist.")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	ident, ok := strings.CutSuffix(r.PathValue("id"), "/stop")
	if !ok {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.lookup(ident)
	if j == nil {
		writeError(w, http.StatusNotFound, "ResourceNotFoundException", "The specified job does not exist.")
		return
	}
	switch j.Status {
	case "Submitted", "Validating", "Scheduled":
		j.finished = 0
	case "InProgress":
		j.finished = s.partial(len(j.records))
	case "Stopping":
	default:
		writeError(w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("Job in status %s cannot be stopped.", j.Status))
		return
	}
	if j.Status != "Stopping" {
		j.stopFrom = j.Status
		s.setStatus(j, "Stopping")
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) partial(n int) int {
	f := s.opts.PartialFraction
	if f < 0 {
		return 0
	}
	return min(n, int(math.Floor(float64(n)*f)))
}

func (s *Server) setStatus(j *job, st string) {
	j.Status = st
	j.LastModifiedTime = s.stamp(s.opts.Now())
	j.polls = 0
	switch st {
	case "Completed", "PartiallyCompleted", "Failed", "Stopped", "Expired":
		j.EndTime = j.LastModifiedTime
	}
}

// The ends Faults can give a job, drawn when it is made.
const (
	fateFailValidation = "fail_validation"
	fatePartial        = "partial"
	fateExpire         = "expire"
)

// advance moves a job on by one poll; s.mu must be held.
func (s *Server) advance(ctx context.Context, j *job) {
	switch j.Status {
	case "Completed", "PartiallyCompleted", "Failed", "Stopped", "Expired":
		return
	}
	j.polls++
	if j.polls < s.opts.PollsPerStep {
		return
	}
	switch j.Status {
	case "Submitted":
		s.setStatus(j, "Validating")
	case "Validating":
		if j.fate == fateFailValidation {
			s.fail(j, "Validation failed: the input data could not be validated. Check the input files' format and the service role's access to them.")
			return
		}
		if err := s.load(ctx, j); err != nil {
			s.fail(j, err.Error())
			return
		}
		s.setStatus(j, "Scheduled")
	case "Scheduled":
		s.setStatus(j, "InProgress")
	case "InProgress":
		switch j.fate {
		case fateExpire:
			s.finish(ctx, j, "Expired", s.partial(len(j.records)))
		case fatePartial:
			s.finish(ctx, j, "PartiallyCompleted", s.partial(len(j.records)))
		default:
			s.finish(ctx, j, "Completed", len(j.records))
		}
	case "Stopping":
		if j.stopFrom == "InProgress" {
			s.finish(ctx, j, "Stopped", j.finished)
		} else {
			// Stopped before it ran: no output, every record unprocessed.
			j.finished, j.done = 0, true
			s.setStatus(j, "Stopped")
		}
	}
}

// minRecords is the job minimum, 0 for none.
func (s *Server) minRecords() int {
	switch m := s.opts.MinRecords; {
	case m == 0:
		return 100
	case m < 0:
		return 0
	default:
		return m
	}
}

func (s *Server) fail(j *job, msg string) {
	j.Message = msg
	s.setStatus(j, "Failed")
}

// load reads and checks the job's input; s.mu must be held.
func (s *Server) load(ctx context.Context, j *job) error {
	data, err := s.read(ctx, j.InputDataConfig.S3.S3URI)
	if err != nil {
		return err
	}
	recs, err := parseInput(data)
	if err != nil {
		return fmt.Errorf("Input file %s: %v", path.Base(j.InputDataConfig.S3.S3URI), err)
	}
	if len(recs) == 0 {
		return fmt.Errorf("Input file %s has no records.", path.Base(j.InputDataConfig.S3.S3URI))
	}
	// Bedrock checks the record-count quotas while validating (the status
	// doc: "Your files fulfill the requirements for file size and number
	// of records"), so a job below the minimum is created, then Failed.
	if min := s.minRecords(); len(recs) < min {
		return fmt.Errorf("Validation failed: the job has %d records, fewer than the minimum number of records per batch inference job for %s (%d). Add records or request a quota adjustment.",
			len(recs), j.ModelID, min)
	}
	for i := range recs {
		if recs[i].id == "" {
			recs[i].id = fmt.Sprintf("%011X", hash(s.opts.Seed, "gen", j.id, strconv.Itoa(i))%1e13)
		}
		recs[i].outcome = draw(s.opts.Seed, *s.opts.Rates, recs[i])
	}
	j.records = recs
	n := int64(len(recs))
	j.TotalRecordCount = &n
	return nil
}

// finish ends a job that ran, with its first `finished` records processed,
// and writes its output; s.mu must be held. A job whose output cannot be
// written fails, as Bedrock's does when its role cannot write.
func (s *Server) finish(ctx context.Context, j *job, status string, finished int) {
	j.finished, j.done = finished, true
	var ok, bad int64
	for _, r := range j.records[:finished] {
		if r.outcome.code != 0 {
			bad++
		} else {
			ok++
		}
	}
	proc := ok + bad
	j.ProcessedRecordCount, j.SuccessRecordCount, j.ErrorRecordCount = &proc, &ok, &bad
	if err := s.writeOutput(ctx, j); err != nil {
		s.fail(j, "Could not write the output to S3: "+err.Error())
		return
	}
	s.setStatus(j, status)
}

// OutputKey is where Bedrock writes a job's output for an input file:
// <output uri>/<job id>/<input file name>.out.
func OutputKey(outputURI, jobID, inputURI string) string {
	return strings.TrimSuffix(outputURI, "/") + "/" + jobID + "/" + path.Base(inputURI) + ".out"
}

func (s *Server) writeOutput(ctx context.Context, j *job) error {
	var buf bytes.Buffer
	order := make([]int, j.finished)
	for i := range order {
		order[i] = i
	}
	// Output order is not guaranteed: shuffle deterministically.
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Compare(hash(s.opts.Seed, "order", j.records[a].id), hash(s.opts.Seed, "order", j.records[b].id))
	})
	var in, out int64
	var succ int64
	for _, i := range order {
		r := j.records[i]
		line, it, ot := r.resultLine(j.JobArn, j.ModelInvocationType, j.ModelID)
		buf.Write(line)
		buf.WriteByte('\n')
		in, out = in+it, out+ot
		if r.outcome.code == 0 {
			succ++
		}
	}
	target := OutputKey(j.OutputDataConfig.S3.S3URI, j.id, j.InputDataConfig.S3.S3URI)
	if err := s.write(ctx, target, buf.Bytes()); err != nil {
		return err
	}
	if j.skew {
		succ++
	}
	man, _ := json.Marshal(map[string]int64{
		"totalRecordCount": int64(len(j.records)), "processedRecordCount": int64(j.finished),
		"successRecordCount": succ, "errorRecordCount": int64(j.finished) - (succ - boolInt(j.skew)),
		"inputTokenCount": in, "outputTokenCount": out,
	})
	return s.write(ctx, target[:strings.LastIndexByte(target, '/')+1]+"manifest.json.out", man)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func splitURI(uri string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	bucket, key, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" || key == "" {
		return "", "", fmt.Errorf("%q is not an s3://bucket/key URI", uri)
	}
	return bucket, key, nil
}

func (s *Server) read(ctx context.Context, uri string) ([]byte, error) {
	if s.opts.OpenBucket == nil {
		return nil, fmt.Errorf("The role cannot read %s: the fake has no S3 (Options.OpenBucket).", uri)
	}
	bucket, key, err := splitURI(uri)
	if err != nil {
		return nil, err
	}
	b, err := s.opts.OpenBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("Input file %s could not be read: %v", uri, err)
	}
	return data, nil
}

func (s *Server) write(ctx context.Context, uri string, data []byte) error {
	if s.opts.OpenBucket == nil {
		return fmt.Errorf("no S3 (Options.OpenBucket)")
	}
	bucket, key, err := splitURI(uri)
	if err != nil {
		return err
	}
	b, err := s.opts.OpenBucket(ctx, bucket)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.WriteAll(ctx, key, data, nil)
}

// parseInput reads {recordId, modelInput} lines.
func parseInput(data []byte) ([]record, error) {
	var recs []record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var in struct {
			RecordID   *string         `json:"recordId"`
			ModelInput json.RawMessage `json:"modelInput"`
		}
		if err := json.Unmarshal(line, &in); err != nil {
			return nil, fmt.Errorf("line %d is not valid JSON", n)
		}
		if len(in.ModelInput) == 0 || in.ModelInput[0] != '{' {
			return nil, fmt.Errorf("line %d has no modelInput object", n)
		}
		r := record{input: append(json.RawMessage(nil), in.ModelInput...)}
		if in.RecordID != nil {
			r.id = *in.RecordID
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}

package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/ingest/translate"
	"github.com/batchlake/batchlake/lake"
)

// Fallback makes a retry child for another provider or model (retry
// --provider --model): the retry set's requests are translated from the
// parent's format (ingest/translate), keeping each record's id and
// lineage.
type Fallback struct {
	Provider string
	Model    string
	// Endpoint is OpenAI's endpoint for the translated requests: chat
	// completions (the default) or responses.
	Endpoint string
	// MaxTokens is the output limit given to a request that sets none,
	// where the target requires one (Claude); 0 refuses such a request.
	MaxTokens int64
	// SkipUntranslatable leaves a record whose request does not translate
	// out of the child (listed in the result, for manual handling) instead
	// of refusing the retry.
	SkipUntranslatable bool
}

// UntranslatableRecord is a record of the retry set whose request does not
// translate to the fallback's format.
type UntranslatableRecord struct {
	RecordID    string `json:"record_id"`
	BusinessKey string `json:"business_key"`
	CustomID    string `json:"custom_id"`
	Field       string `json:"field"`
	Why         string `json:"why"`
}

// target is the fallback's translation target, given the parent job.
func (f *Fallback) target(parent *lake.Manifest) (translate.Target, error) {
	t := translate.Target{Provider: f.Provider, Model: f.Model, Endpoint: f.Endpoint, MaxTokens: f.MaxTokens}
	if t.Provider == "" {
		t.Provider = parent.Provider
	}
	if t.Provider == ingest.SimProvider {
		t.Provider = translate.OpenAI // the simulator speaks OpenAI's format
	}
	if t.Model == "" {
		return t, &errkind.UsageError{Msg: "retry --provider: also pass --model, the model the child's requests go to"}
	}
	if err := t.Check(); err != nil {
		return t, &errkind.UsageError{Msg: "retry --provider/--model: " + err.Error()}
	}
	return t, nil
}

// childProvider is the provider the child job is planned for.
func (f *Fallback) childProvider(parent *lake.Manifest) string {
	if f.Provider == "" {
		return parent.Provider
	}
	return f.Provider
}

// translateShard writes the lines of a retry shard (in the parent's
// format) translated to t, leaving out the records in done. A line that
// does not translate is an errkind.InputError naming the record and the
// field, or, with SkipUntranslatable, appended to skipped.
func (f *Fallback) translateShard(w io.Writer, key string, shard []byte, from string, t translate.Target,
	lineage map[string]ingest.Lineage, done map[string]string, skipped *[]UntranslatableRecord) (kept int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(shard))
	sc.Buffer(make([]byte, 0, 1<<20), ingest.MaxLineBytes)
	for n := int64(1); sc.Scan(); n++ {
		id, req, err := translate.ParseLine(from, sc.Bytes())
		li := lineage[id]
		if _, ok := done[li.RecordID]; ok && id != "" {
			continue
		}
		var line []byte
		if err == nil {
			line, err = translate.RenderLine(t, id, req)
		}
		var u *translate.Untranslatable
		if errors.As(err, &u) {
			if !f.SkipUntranslatable {
				return kept, &errkind.InputError{File: "retry shard " + key, Line: n, Field: u.Field,
					Msg: fmt.Sprintf("record %s (business key %q) does not translate from %s to %s: %s; pass --skip-untranslatable to leave such records for manual handling",
						li.RecordID, li.BusinessKey, from, t.Provider, u.Why)}
			}
			*skipped = append(*skipped, UntranslatableRecord{RecordID: li.RecordID, BusinessKey: li.BusinessKey, CustomID: id, Field: u.Field, Why: u.Why})
			continue
		}
		if err != nil {
			return kept, fmt.Errorf("retry shard %s line %d: %w", key, n, err)
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return kept, err
		}
		kept++
	}
	return kept, sc.Err()
}

// storeUntranslatable writes the records left out of a translated child
// as a JSONL object in the lake and returns its key.
func storeUntranslatable(ctx context.Context, l *lake.Lake, recs []UntranslatableRecord) (string, error) {
	var b bytes.Buffer
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			return "", err
		}
		b.Write(append(line, '\n'))
	}
	d, err := l.PutObject(ctx, b.Bytes())
	if err != nil {
		return "", err
	}
	return lake.ObjectKey(d), nil
}

// planOptions turns the child's plan to the fallback's provider and model:
// the target format's own id field is the business key (the lineage keeps
// each record's), the target's per-job minimum applies, and the record ids
// come from the lineage.
func (f *Fallback) planOptions(po *ingest.PlanOptions, parent *lake.Manifest, provider, model string) {
	po.Provider, po.Model, po.KeyField = provider, model, ""
	if provider != parent.Provider {
		po.MinRecords = ingest.DefaultMinRecords(provider)
		if parent.BelowMin != ingest.BelowMinAllow {
			po.BelowMin = ingest.BelowMinHold
		}
	}
	po.Translated, po.ParentProvider, po.ParentModel = true, parent.Provider, parent.Model
}

// childSchema is the output contract a child is held to: the one asked
// for (a lake key), else the parent's manifest's, else the one its latest
// reconcile checked (--output-schema), which reconcile stores in the lake.
func childSchema(ctx context.Context, l *lake.Lake, parent *lake.Manifest, rep *Report, asked string) (string, error) {
	switch {
	case asked != "":
		return asked, nil
	case parent.OutputSchema != "":
		return parent.OutputSchema, nil
	case rep.OutputSchema == "":
		return "", nil
	}
	d, err := lake.ParseDigest(rep.OutputSchema)
	if err != nil {
		return "", fmt.Errorf("retry: report %s: output schema %q: %w", rep.Report, rep.OutputSchema, err)
	}
	if _, err := l.GetObject(ctx, d); errors.Is(err, lake.ErrNotFound) {
		return "", nil // reconciled before reconcile stored its schema
	} else if err != nil {
		return "", err
	}
	return lake.ObjectKey(d), nil
}

// contractFor settles the output contract a reconcile checks: the job's
// own (its manifest's, which a retry passes on to every child) unless
// --output-schema names one, which is then stored in the lake so that the
// job's retries inherit it.
func contractFor(ctx context.Context, l *lake.Lake, m *lake.Manifest, o *Options) error {
	if o.OutputSchema != nil {
		_, err := o.OutputSchema.Store(ctx, l)
		return err
	}
	if m.OutputSchema == "" {
		return nil
	}
	s, err := LoadStoredSchema(ctx, l, m.OutputSchema)
	if err != nil {
		return fmt.Errorf("reconcile %s: the job's output contract: %w", m.JobKey[:12], err)
	}
	o.OutputSchema = s
	return nil
}

// ContractRate is how many answers of one provider and model version the
// output contract checked, and how many satisfied it.
type ContractRate struct {
	Provider string  `json:"provider"`
	Model    string  `json:"model_version"`
	Answers  int64   `json:"answers"`
	Passed   int64   `json:"passed"`
	PassRate float64 `json:"pass_rate"`
}

func (c *ContractRate) rate() {
	if c.Answers > 0 {
		c.PassRate = math.Round(float64(c.Passed)/float64(c.Answers)*1e4) / 1e4
	}
}

// contractRates is the output contract's pass rate by provider and model,
// over the usable success lines of the staged job.
func contractRates(ctx context.Context, e *Engine) ([]ContractRate, error) {
	rows, err := e.QueryFile(ctx, "contract_rates.sql", nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []ContractRate{}
	for rows.Next() {
		var c ContractRate
		if err := rows.Scan(&c.Provider, &c.Model, &c.Answers, &c.Passed); err != nil {
			return nil, fmt.Errorf("sql contract_rates.sql: %w", err)
		}
		c.rate()
		out = append(out, c)
	}
	return out, rows.Err()
}

// FamilyContract adds up the output contract's pass rates of a family's
// reconcile reports, by provider and model version.
func FamilyContract(reps []*Report) []ContractRate {
	by := map[[2]string]*ContractRate{}
	var keys [][2]string
	for _, r := range reps {
		for _, c := range r.OutputContract {
			k := [2]string{c.Provider, c.Model}
			t, ok := by[k]
			if !ok {
				t = &ContractRate{Provider: c.Provider, Model: c.Model}
				by[k] = t
				keys = append(keys, k)
			}
			t.Answers += c.Answers
			t.Passed += c.Passed
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	out := make([]ContractRate, 0, len(keys))
	for _, k := range keys {
		c := by[k]
		c.rate()
		out = append(out, *c)
	}
	return out
}

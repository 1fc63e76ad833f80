package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	lakesql "github.com/batchlake/batchlake/sql"
)

// OutputSchema is a compiled JSON Schema that a success line's structured
// output (its output text, parsed as JSON) must satisfy to pass the quality
// gate (--output-schema). Its digest is part of a reconcile run's identity.
type OutputSchema struct {
	Name   string
	Digest lake.Digest
	schema *jsonschema.Schema
	data   []byte
}

// LoadOutputSchema compiles a JSON Schema document (any draft the library
// knows; $schema picks it, 2020-12 otherwise). A $ref may point only inside
// the document (#/$defs/…) or at a draft's meta-schema: nothing outside it is
// ever loaded, neither files (file:///proc/self/environ would be read and
// its text quoted in the error) nor URLs. The document is then all that the
// schema's digest, in the run's identity, stands for.
func LoadOutputSchema(name string, data []byte) (*OutputSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, &errkind.InputError{File: name, Msg: "not valid JSON: " + err.Error()}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noExternalRefs{})
	url := "batchlake:///" + lake.Sum(data).Hex() + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, &errkind.InputError{File: name, Msg: err.Error()}
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, &errkind.InputError{File: name, Msg: "not a usable JSON Schema: " + err.Error()}
	}
	return &OutputSchema{Name: name, Digest: lake.Sum(data), schema: sch, data: data}, nil
}

// Store writes the schema document to the lake (content-addressed, so
// storing it again writes nothing) and returns its key: a job's manifest
// names its output contract by it.
func (s *OutputSchema) Store(ctx context.Context, l *lake.Lake) (string, error) {
	d, err := l.PutObject(ctx, s.data)
	if err != nil {
		return "", fmt.Errorf("--output-schema %s: %w", s.Name, err)
	}
	return lake.ObjectKey(d), nil
}

// LoadStoredSchema reads and compiles the output contract a manifest names.
func LoadStoredSchema(ctx context.Context, l *lake.Lake, key string) (*OutputSchema, error) {
	d, ok := lake.ParseObjectKey(key)
	if !ok {
		return nil, fmt.Errorf("output schema %q: not an object key", key)
	}
	data, err := l.GetObject(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("output schema %s: %w", key, err)
	}
	return LoadOutputSchema(key, data)
}

// noExternalRefs refuses to load any document a $ref names.
type noExternalRefs struct{}

func (noExternalRefs) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref to %s: a schema's $ref may only point inside the document (put it under $defs)", url)
}

type schemaFailure struct {
	raw, channel string
	line         int64
	why          string
}

// check validates every usable success line on all cores and records the
// failures in schema_failures, which the quality gate reads.
func (s *OutputSchema) check(ctx context.Context, e *Engine) (int64, error) {
	if err := e.ExecFile(ctx, "schema.sql", nil); err != nil {
		return 0, err
	}
	if s == nil {
		return 0, nil
	}
	rows, err := e.QueryFile(ctx, "schema_lines.sql", nil)
	if err != nil {
		return 0, err
	}
	type item struct {
		raw, channel, text string
		line               int64
	}
	work := make(chan item, 1024)
	var (
		mu       sync.Mutex
		failures []schemaFailure
		wg       sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				if why := s.validate(it.text); why != "" {
					mu.Lock()
					failures = append(failures, schemaFailure{it.raw, it.channel, it.line, why})
					mu.Unlock()
				}
			}
		}()
	}
	for rows.Next() {
		var it item
		if err = rows.Scan(&it.raw, &it.channel, &it.line, &it.text); err != nil {
			break
		}
		work <- it
	}
	close(work)
	wg.Wait()
	if err == nil {
		err = rows.Err()
	}
	// Close before inserting: the session has one connection.
	rows.Close()
	if err != nil {
		return 0, fmt.Errorf("--output-schema: %w", err)
	}
	stmts, err := lakesql.Render("schema_failure_add.sql", nil)
	if err != nil {
		return 0, err
	}
	for _, f := range failures {
		if _, err := e.DB.ExecContext(ctx, stmts[0], f.raw, f.channel, f.line, f.why); err != nil {
			return 0, fmt.Errorf("--output-schema: %w", err)
		}
	}
	return int64(len(failures)), nil
}

// validate returns why text fails the schema, or "".
func (s *OutputSchema) validate(text string) string {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return "output is not JSON"
	}
	if err := s.schema.Validate(v); err != nil {
		return err.Error()
	}
	return ""
}

package lake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// Every JSON marker in the lake (manifest, ingest record, report, ledger event)
// is stored in an envelope that names its format version and carries the
// sha256 of its body bytes, so a marker is verified on read like any object.
type envelope struct {
	Format string          `json:"format"`
	SHA256 string          `json:"sha256"`
	Body   json.RawMessage `json:"body"`
}

// Marker formats. A reader rejects a format it does not know.
const (
	FormatManifest  = "batchlake.manifest/v1"
	FormatIngest    = "batchlake.ingest/v1"
	FormatReport    = "batchlake.report/v1"
	FormatEvent     = "batchlake.ledger-event/v1"
	FormatPartition = "batchlake.partition/v1"
	// FormatTables names the Parquet tables' format (TableVersion); it is
	// not an envelope: each table file's created_by carries the version.
	FormatTables = "batchlake.tables/v12"
)

// Formats lists every format this batchlake writes (and so reads): the
// markers' and the tables', for `batchlake --version`.
func Formats() []string {
	return []string{FormatManifest, FormatIngest, FormatReport, FormatEvent, FormatPartition, FormatTables, FormatCompaction}
}

// SealJSON renders v in an envelope of the given format.
func SealJSON(format string, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("seal %s: %w", format, err)
	}
	out, err := json.Marshal(envelope{Format: format, SHA256: Sum(body).Hex(), Body: body})
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// OpenJSON checks an envelope's format and digest and decodes its body into v.
func OpenJSON(key, format string, data []byte, v any) error {
	var e envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return fmt.Errorf("lake read %s: %v: %w", key, err, ErrCorrupt)
	}
	if e.Format != format {
		return fmt.Errorf("lake read %s: format %q, this batchlake reads %q", key, e.Format, format)
	}
	if Sum(e.Body).Hex() != e.SHA256 {
		return fmt.Errorf("lake read %s: body hashes to %s, envelope says %s: %w", key, Sum(e.Body).Hex(), e.SHA256, ErrCorrupt)
	}
	// A compaction marker is named by its body's digest: one renamed would
	// still verify, and a session would read it.
	if format == FormatCompaction {
		if d, ok := ParseCompactionKey(key); ok && d.Hex() != e.SHA256 {
			return fmt.Errorf("lake read %s: a compaction marker is named by its body's digest, %s: %w", key, e.SHA256, ErrCorrupt)
		}
	}
	// A report is named by its run, not its bytes: one moved to another
	// run's key still verifies, and would be read as that run's.
	if format == FormatReport {
		if named, ok := reportNamed(e.Body); ok && named != key {
			return fmt.Errorf("lake read %s: the body is the report %s: %w", key, named, ErrCorrupt)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(e.Body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("lake read %s: %w", key, err)
	}
	return nil
}

// PutJSON writes v sealed under key, write-once. created is false when the key
// already held the same bytes.
func (l *Lake) PutJSON(ctx context.Context, key, format string, v any) (created bool, err error) {
	b, err := SealJSON(format, v)
	if err != nil {
		return false, err
	}
	return l.PutOnce(ctx, key, b)
}

// GetJSON reads and verifies the marker at key into v. A remote lake with a
// marker cache (SetMarkerCache) takes it from the cache when a listing in
// this process gave its MD5 and the cached bytes hash to it, and keeps one
// it reads from the lake.
func (l *Lake) GetJSON(ctx context.Context, key, format string, v any) error {
	var b, sum []byte
	if l.mdisk != nil {
		b, sum = l.mdisk.get(key)
	}
	cached := b != nil
	if !cached {
		var err error
		if b, err = l.readAll(ctx, key); err != nil {
			return err
		}
	}
	if err := OpenJSON(key, format, b, v); err != nil {
		return err
	}
	if !cached && l.mdisk != nil {
		l.mdisk.put(key, sum, b)
	}
	return nil
}

func errUnknownVersion(key string, v int) error {
	return fmt.Errorf("lake read %s: version %d is not one this batchlake knows; upgrade batchlake", key, v)
}

// reportNamed returns the key a report body names as its own (its
// top-level member report), if it names one.
func reportNamed(body []byte) (string, bool) {
	var r struct {
		Report string `json:"report"`
	}
	if json.Unmarshal(body, &r) != nil || r.Report == "" {
		return "", false
	}
	return r.Report, true
}

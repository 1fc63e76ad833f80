package reconcile

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
	lakesql "github.com/batchlake/batchlake/sql"
)

// Price is one row of the price table, with exact per-token prices derived
// from the per-million prices and the batch multiplier.
//
// EffectiveFrom (optional column effective_from: a date, 2026-03-01, or an
// RFC 3339 time; zero when empty) is when the row starts to apply: a line is
// priced by the row of its model whose effective_from is the latest at or
// before the line's time, so a price change between attempts prices each
// attempt at its own price. The line's time is the ingest time of its raw
// file (the ingested_at of the ingest record): provider result lines carry no
// reliable per-line time, and the ingest time is fixed in the lake, so a
// reconcile run again prices the same. CacheWrite (optional column
// cache_write_usd_per_mtok) prices cache write tokens, which the attempts
// table counts inside input_tokens; empty means the input price, which is how
// they were priced before the column existed.
type Price struct {
	Provider, Model                                  string
	EffectiveFrom                                    time.Time
	Input, CachedInput, CacheWrite, Output, Multiply *big.Rat
}

// PriceTable is a parsed price table and the digest of its bytes.
type PriceTable struct {
	Rows   []Price
	Digest lake.Digest
	Name   string
}

var priceColumns = []string{"provider", "model", "input_usd_per_mtok", "cached_input_usd_per_mtok", "output_usd_per_mtok", "batch_multiplier"}

// LoadPrices parses a price CSV (docs/contract.md). data nil means the shipped table.
func LoadPrices(name string, data []byte) (*PriceTable, error) {
	if data == nil {
		name, data = "sql/prices.csv", lakesql.Prices()
	}
	t := &PriceTable{Digest: lake.Sum(data), Name: name}
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		return nil, &ingest.InputError{File: name, Line: 1, Msg: "no header: " + errString(err)}
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, c := range priceColumns {
		if _, ok := col[c]; !ok {
			return nil, &ingest.InputError{File: name, Line: 1, Field: c, Msg: "missing column"}
		}
	}
	seen := map[string]int{}
	for line := 2; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &ingest.InputError{File: name, Line: int64(line), Msg: err.Error()}
		}
		get := func(c string) string {
			if i, ok := col[c]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		p := Price{Provider: get("provider"), Model: get("model")}
		if p.Provider == "" || p.Model == "" {
			return nil, &ingest.InputError{File: name, Line: int64(line), Field: "provider/model", Msg: "empty"}
		}
		if v := get("effective_from"); v != "" {
			if p.EffectiveFrom, err = parseEffective(v); err != nil {
				return nil, &ingest.InputError{File: name, Line: int64(line), Field: "effective_from", Msg: fmt.Sprintf("want a date (2026-03-01) or an RFC 3339 time, got %q", v)}
			}
		}
		k := p.Provider + "\x00" + p.Model + "\x00" + p.EffectiveFrom.String()
		if first, dup := seen[k]; dup {
			return nil, &ingest.InputError{File: name, Line: int64(line), Field: "model", Msg: fmt.Sprintf("%s/%s effective from %q again, first on line %d", p.Provider, p.Model, get("effective_from"), first)}
		}
		seen[k] = line
		for _, f := range []struct {
			col string
			dst **big.Rat
		}{{"input_usd_per_mtok", &p.Input}, {"cached_input_usd_per_mtok", &p.CachedInput}, {"output_usd_per_mtok", &p.Output}, {"batch_multiplier", &p.Multiply}} {
			v, ok := new(big.Rat).SetString(get(f.col))
			if !ok || v.Sign() < 0 {
				return nil, &ingest.InputError{File: name, Line: int64(line), Field: f.col, Msg: fmt.Sprintf("want a non-negative decimal, got %q", get(f.col))}
			}
			*f.dst = v
		}
		p.CacheWrite = p.Input
		if v := get("cache_write_usd_per_mtok"); v != "" {
			w, ok := new(big.Rat).SetString(v)
			if !ok || w.Sign() < 0 {
				return nil, &ingest.InputError{File: name, Line: int64(line), Field: "cache_write_usd_per_mtok", Msg: fmt.Sprintf("want a non-negative decimal, got %q", v)}
			}
			p.CacheWrite = w
		}
		t.Rows = append(t.Rows, p)
	}
	return t, nil
}

// parseEffective reads an effective_from cell: a date (midnight UTC) or an
// RFC 3339 time.
func parseEffective(v string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t.UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t.UTC(), err
}

func errString(err error) string {
	if errors.Is(err, io.EOF) {
		return "empty file"
	}
	return err.Error()
}

var million = big.NewRat(1_000_000, 1)

// perToken renders usd_per_mtok × multiplier / 1e6 with 18 decimals. It is
// exact for prices with up to 12 decimals and multipliers with up to 6.
func perToken(perM, mult *big.Rat) string {
	v := new(big.Rat).Mul(perM, mult)
	v.Quo(v, million)
	return v.FloatString(18)
}

// load inserts the table into the session's prices temp table, and the
// time each raw file is priced at (its ingest time) into raw_times.
func (t *PriceTable) load(ctx context.Context, e *Engine, recs []lake.IngestRecord) error {
	if err := e.ExecFile(ctx, "prices.sql", nil); err != nil {
		return err
	}
	for _, p := range t.Rows {
		from := "NULL"
		if !p.EffectiveFrom.IsZero() {
			from = quote(p.EffectiveFrom.Format(timestampSQL))
		}
		if err := e.ExecFile(ctx, "price_add.sql", map[string]string{
			"Provider": quote(p.Provider), "Model": quote(p.Model), "From": from, "Input": quote(perToken(p.Input, p.Multiply)),
			"Cached": quote(perToken(p.CachedInput, p.Multiply)), "CacheWrite": quote(perToken(p.CacheWrite, p.Multiply)),
			"Output": quote(perToken(p.Output, p.Multiply)),
		}); err != nil {
			return fmt.Errorf("load prices %s: %w", t.Name, err)
		}
	}
	for _, r := range recs {
		if err := e.ExecFile(ctx, "price_time_add.sql", map[string]string{
			"Channel": quote(r.Channel), "Raw": quote(r.Raw.Hex()), "At": quote(r.IngestedAt.UTC().Format(timestampSQL)),
		}); err != nil {
			return fmt.Errorf("load ingest times: %w", err)
		}
	}
	return nil
}

// timestampSQL renders a time as a DuckDB TIMESTAMP literal (UTC, microseconds).
const timestampSQL = "2006-01-02 15:04:05.999999"

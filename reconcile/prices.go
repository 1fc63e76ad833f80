package reconcile

import (
	"bytes"
	"context"
	"database/sql/driver"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/batchlake/batchlake/errkind"
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
// reconcile run again prices the same.
//
// The optional columns price what providers bill apart (docs/costs.md).
// CacheWrite (cache_write_usd_per_mtok) prices cache write tokens, which the
// attempts table counts inside input_tokens; empty means the input price,
// which is how they were priced before the column existed. CacheWrite1h
// (cache_write_1h_usd_per_mtok) prices the writes with a one-hour lifetime
// (cache_write_1h_tokens, part of cache_write_tokens); empty means
// CacheWrite. CachedMultiply (cached_batch_multiplier) replaces Multiply for
// cached input tokens, which Gemini bills at the cached price without the
// batch discount; empty means Multiply.
type Price struct {
	Provider, Model                                  string
	EffectiveFrom                                    time.Time
	Input, CachedInput, CacheWrite, Output, Multiply *big.Rat
	CacheWrite1h, CachedMultiply                     *big.Rat
}

// Ceilings of a price table's cells: no model costs more than this per
// million tokens, and no multiplier is above this. With the ingest ceiling
// of ingest.MaxLineTokens per count they bound one line's cost far inside
// reconcile's DECIMAL(38, 18) sums (docs/costs.md).
var (
	maxPricePerMTok = big.NewRat(10_000, 1)
	maxMultiplier   = big.NewRat(10, 1)
)

// SnapshotSuffix is the pattern of what may follow a price row's model in a
// model id it prices: version suffixes only, one or more of a date
// (-2024-07-18, -20241022, @20241022), a 3- or 4-digit snapshot (-0125,
// -001) and a Bedrock revision (-v1:0). Anything else names another model
// (gpt-5.2-pro, claude-opus-4-6), at another price: a bare prefix would
// price it as this row's, silently wrong, where no row leaves it unpriced and
// reported. reconcile.sql matches lines by it (prices_model).
const SnapshotSuffix = `([-@]([0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{8}|[0-9]{3,4}|v[0-9]+(:[0-9]+)?))+`

var snapshotSuffix = regexp.MustCompile(`^` + SnapshotSuffix + `$`)

// pricesModel reports whether a price row's model prices the model id
// version: the same id, or the id followed by version suffixes only.
func pricesModel(version, model string) bool {
	rest, ok := strings.CutPrefix(version, model)
	return ok && (rest == "" || snapshotSuffix.MatchString(rest))
}

// PriceTable is a parsed price table and the digest of its bytes.
type PriceTable struct {
	Rows   []Price
	Digest lake.Digest
	Name   string
}

// priced is the table's rows as lines are priced by: a table without rows
// for the simulator (provider sim) prices its lines as OpenAI's, the
// provider whose models and file format it imitates, so a simulated job's
// costs read like the real job's would.
func (t *PriceTable) priced() []Price {
	for _, p := range t.Rows {
		if p.Provider == ingest.SimProvider {
			return t.Rows
		}
	}
	out := slices.Clone(t.Rows)
	for _, p := range t.Rows {
		if p.Provider == "openai" {
			p.Provider = ingest.SimProvider
			out = append(out, p)
		}
	}
	return out
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
	// Lines starting with # are comments: where the prices come from and
	// when they were taken.
	r.Comment = '#'
	header, err := r.Read()
	if err != nil {
		return nil, &errkind.InputError{File: name, Line: 1, Msg: "no header: " + errString(err)}
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, c := range priceColumns {
		if _, ok := col[c]; !ok {
			return nil, &errkind.InputError{File: name, Line: 1, Field: c, Msg: "missing column"}
		}
	}
	seen := map[string]int{}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &errkind.InputError{File: name, Msg: err.Error()}
		}
		line, _ := r.FieldPos(0) // the file's line, comments counted
		get := func(c string) string {
			if i, ok := col[c]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		p := Price{Provider: get("provider"), Model: get("model")}
		if p.Provider == "" || p.Model == "" {
			return nil, &errkind.InputError{File: name, Line: int64(line), Field: "provider/model", Msg: "empty"}
		}
		// Lines carry the provider's name as the lake writes it: a row of
		// another spelling (OpenAI) would match none of them and leave every
		// line unpriced.
		if !slices.Contains(ingest.Providers(), p.Provider) {
			return nil, &errkind.InputError{File: name, Line: int64(line), Field: "provider",
				Msg: fmt.Sprintf("unknown provider %q: want one of %s, as written", p.Provider, strings.Join(ingest.Providers(), ", "))}
		}
		if v := get("effective_from"); v != "" {
			if p.EffectiveFrom, err = parseEffective(v); err != nil {
				return nil, &errkind.InputError{File: name, Line: int64(line), Field: "effective_from", Msg: fmt.Sprintf("want a date (2026-03-01) or an RFC 3339 time, got %q", v)}
			}
		}
		k := p.Provider + "\x00" + p.Model + "\x00" + p.EffectiveFrom.String()
		if first, dup := seen[k]; dup {
			return nil, &errkind.InputError{File: name, Line: int64(line), Field: "model", Msg: fmt.Sprintf("%s/%s effective from %q again, first on line %d", p.Provider, p.Model, get("effective_from"), first)}
		}
		seen[k] = line
		// Each cell in column order; an optional cell left empty takes its
		// default, a cell before it in this list.
		for _, f := range []struct {
			col      string
			dst      **big.Rat
			max      *big.Rat
			fallback **big.Rat // nil: required
		}{
			{"input_usd_per_mtok", &p.Input, maxPricePerMTok, nil},
			{"cached_input_usd_per_mtok", &p.CachedInput, maxPricePerMTok, nil},
			{"output_usd_per_mtok", &p.Output, maxPricePerMTok, nil},
			{"batch_multiplier", &p.Multiply, maxMultiplier, nil},
			{"cache_write_usd_per_mtok", &p.CacheWrite, maxPricePerMTok, &p.Input},
			{"cache_write_1h_usd_per_mtok", &p.CacheWrite1h, maxPricePerMTok, &p.CacheWrite},
			{"cached_batch_multiplier", &p.CachedMultiply, maxMultiplier, &p.Multiply},
		} {
			cell := get(f.col)
			if cell == "" && f.fallback != nil {
				*f.dst = *f.fallback
				continue
			}
			v, ok := new(big.Rat).SetString(cell)
			if !ok || v.Sign() < 0 || v.Cmp(f.max) > 0 {
				return nil, &errkind.InputError{File: name, Line: int64(line), Field: f.col,
					Msg: fmt.Sprintf("want a decimal from 0 to %s, got %q", f.max.RatString(), cell)}
			}
			*f.dst = v
		}
		if err := p.exact(); err != nil {
			err.File, err.Line = name, int64(line)
			return nil, err
		}
		t.Rows = append(t.Rows, p)
	}
	return t, nil
}

// pricePlaces is how many decimal places a price, and a price times its
// multiplier, may have: a token's price (perToken: that, divided by 10^6)
// then has at most 18, which DECIMAL(38, 18) holds exactly.
var pricePlaces = new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(12), nil))

// exact refuses a row one of whose per-token prices, on-demand (sync) or
// under its multiplier, would be rounded: a price of more than 12 decimal
// places, or one whose product with its multiplier has more.
func (p *Price) exact() *errkind.InputError {
	for _, c := range []struct {
		col, multCol string
		price, mult  *big.Rat
	}{
		{"input_usd_per_mtok", "batch_multiplier", p.Input, p.Multiply},
		{"cached_input_usd_per_mtok", "cached_batch_multiplier", p.CachedInput, p.CachedMultiply},
		{"output_usd_per_mtok", "batch_multiplier", p.Output, p.Multiply},
		{"cache_write_usd_per_mtok", "batch_multiplier", p.CacheWrite, p.Multiply},
		{"cache_write_1h_usd_per_mtok", "batch_multiplier", p.CacheWrite1h, p.Multiply},
	} {
		const why = "a token's price is kept to 18, exactly"
		if !new(big.Rat).Mul(c.price, pricePlaces).IsInt() {
			return &errkind.InputError{Field: c.col, Msg: fmt.Sprintf(
				"%s has more than 12 decimal places (%s)", decimal(c.price), why)}
		}
		if v := new(big.Rat).Mul(c.price, c.mult); !new(big.Rat).Mul(v, pricePlaces).IsInt() {
			return &errkind.InputError{Field: c.col, Msg: fmt.Sprintf(
				"%s times %s %s is %s, more than 12 decimal places (%s)", decimal(c.price), c.multCol, decimal(c.mult), decimal(v), why)}
		}
	}
	return nil
}

// decimal renders a price table's value (a decimal of at most 30 places)
// without trailing zeros.
func decimal(v *big.Rat) string { return trimDecimal(v.FloatString(30)) }

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

// onDemand is the multiplier of the real-time API's price: none.
var onDemand = big.NewRat(1, 1)

// perToken renders usd_per_mtok × multiplier / 1e6 with 18 decimals, exactly:
// LoadPrices refuses a row where that product has more than 12.
func perToken(perM, mult *big.Rat) string {
	v := new(big.Rat).Mul(perM, mult)
	v.Quo(v, million)
	return v.FloatString(18)
}

// perTokenDecimal is perToken as a DECIMAL(38, 18) value: the same digits,
// unscaled.
func perTokenDecimal(perM, mult *big.Rat) (duckdb.Decimal, error) {
	s := strings.Replace(perToken(perM, mult), ".", "", 1)
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return duckdb.Decimal{}, fmt.Errorf("price %s × %s: not a decimal", perM.RatString(), mult.RatString())
	}
	return duckdb.Decimal{Width: 38, Scale: 18, Value: v}, nil
}

// load inserts the table into the session's prices temp table, the time
// each raw file is priced at (its ingest time) into raw_times, and the job's
// provider and model into job_model (a Bedrock line is priced by the job's
// model id too: model_prices in reconcile.sql).
func (t *PriceTable) load(ctx context.Context, e *Engine, recs []lake.IngestRecord, m *lake.Manifest) error {
	if err := e.ExecFile(ctx, "prices.sql", nil); err != nil {
		return err
	}
	if err := t.appendTo(ctx, e); err != nil {
		return fmt.Errorf("load prices %s: %w", t.Name, err)
	}
	var rows []map[string]string
	for _, r := range recs {
		mode := r.Mode
		if mode == "" {
			mode = "batch"
		}
		rows = append(rows, map[string]string{"Channel": quote(r.Channel), "Raw": quote(r.Raw.Hex()), "At": quote(r.IngestedAt.UTC().Format(timestampSQL)), "Mode": quote(mode)})
	}
	if len(rows) > 0 {
		if err := e.ExecFile(ctx, "price_time_add.sql", map[string]any{"Rows": rows}); err != nil {
			return fmt.Errorf("load ingest times: %w", err)
		}
	}
	if err := e.ExecFile(ctx, "job_model_add.sql", map[string]string{"Provider": quote(m.Provider), "Model": quote(m.Model)}); err != nil {
		return fmt.Errorf("load the job's model: %w", err)
	}
	return nil
}

// appendTo fills the session's prices table (prices.sql) through DuckDB's
// appender: parsing and planning a statement of a thousand literals took
// longer than the rest of a small job's price work.
func (t *PriceTable) appendTo(ctx context.Context, e *Engine) error {
	rows := t.priced()
	if len(rows) == 0 {
		return nil
	}
	return e.rawConn(ctx, func(c driver.Conn) error {
		a, err := duckdb.NewAppender(c, "temp", "main", "prices")
		if err != nil {
			return err
		}
		for _, p := range rows {
			var from driver.Value // NULL: since always
			if !p.EffectiveFrom.IsZero() {
				from = p.EffectiveFrom.UTC().Truncate(time.Microsecond)
			}
			vals := []driver.Value{p.Provider, p.Model, from}
			// The column order of prices.sql: with the batch multiplier,
			// then on demand (the sync tail) without it.
			for _, c := range [...]struct{ perM, mult *big.Rat }{
				{p.Input, p.Multiply}, {p.CachedInput, p.CachedMultiply}, {p.CacheWrite, p.Multiply}, {p.CacheWrite1h, p.Multiply}, {p.Output, p.Multiply},
				{p.Input, onDemand}, {p.CachedInput, onDemand}, {p.CacheWrite, onDemand}, {p.CacheWrite1h, onDemand}, {p.Output, onDemand},
			} {
				d, err := perTokenDecimal(c.perM, c.mult)
				if err != nil {
					a.Close()
					return err
				}
				vals = append(vals, d)
			}
			if err := a.AppendRow(vals...); err != nil {
				a.Close()
				return fmt.Errorf("%s %s: %w", p.Provider, p.Model, err)
			}
		}
		return a.Close()
	})
}

// timestampSQL renders a time as a DuckDB TIMESTAMP literal (UTC, microseconds).
const timestampSQL = "2006-01-02 15:04:05.999999"

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

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
	lakesql "github.com/batchlake/batchlake/sql"
)

// Price is one row of the price table, with exact per-token prices derived
// from the per-million prices and the batch multiplier.
type Price struct {
	Provider, Model                      string
	Input, CachedInput, Output, Multiply *big.Rat
}

// PriceTable is a parsed price table and the digest of its bytes.
type PriceTable struct {
	Rows   []Price
	Digest lake.Digest
	Name   string
}

var priceColumns = []string{"provider", "model", "input_usd_per_mtok", "cached_input_usd_per_mtok", "output_usd_per_mtok", "batch_multiplier"}

// LoadPrices parses a price CSV (CONTRACT §5). data nil means the shipped table.
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
			if i := col[c]; i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		p := Price{Provider: get("provider"), Model: get("model")}
		if p.Provider == "" || p.Model == "" {
			return nil, &ingest.InputError{File: name, Line: int64(line), Field: "provider/model", Msg: "empty"}
		}
		k := p.Provider + "\x00" + p.Model
		if first, dup := seen[k]; dup {
			return nil, &ingest.InputError{File: name, Line: int64(line), Field: "model", Msg: fmt.Sprintf("%s/%s again, first on line %d", p.Provider, p.Model, first)}
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
		t.Rows = append(t.Rows, p)
	}
	return t, nil
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

// load inserts the table into the session's prices temp table.
func (t *PriceTable) load(ctx context.Context, e *Engine) error {
	if err := e.ExecFile(ctx, "prices.sql", nil); err != nil {
		return err
	}
	for _, p := range t.Rows {
		if err := e.ExecFile(ctx, "price_add.sql", map[string]string{
			"Provider": quote(p.Provider), "Model": quote(p.Model), "Input": quote(perToken(p.Input, p.Multiply)),
			"Cached": quote(perToken(p.CachedInput, p.Multiply)), "Output": quote(perToken(p.Output, p.Multiply)),
		}); err != nil {
			return fmt.Errorf("load prices %s: %w", t.Name, err)
		}
	}
	return nil
}

package lake

import (
	"bytes"
	"encoding/binary"
	"math/big"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

func TestParseMoney(t *testing.T) {
	unit := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(MoneyScale), nil))
	for _, c := range []struct {
		name, in, want string
	}{
		{"zero", "0", "0"},
		{"a line's cost", "0.000475", "0.000475"},
		{"every decimal place", "0.000000000000000001", "0.000000000000000001"},
		{"trailing zeros beyond the scale", "1.5000000000000000000000", "1.5"},
		{"whole dollars", "12", "12"},
		{"no whole part", ".25", "0.25"},
		{"largest", "99999999999999999999.999999999999999999", "99999999999999999999.999999999999999999"},
		{"above 2^64 unscaled", "123456789012.345678901234567891", "123456789012.345678901234567891"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := ParseMoney(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.String(); got != c.want {
				t.Errorf("String() = %q, want %q", got, c.want)
			}
			// The bytes are the unscaled value, big-endian.
			want, _ := new(big.Rat).SetString(c.want)
			want.Mul(want, unit)
			if got := new(big.Int).SetBytes(m[:]); got.Cmp(want.Num()) != 0 {
				t.Errorf("unscaled %s, want %s", got, want.Num())
			}
		})
	}
	for _, c := range []struct{ name, in, msg string }{
		{"empty", "", "not a decimal"},
		{"a dot", ".", "not a decimal"},
		{"negative", "-0.5", "negative"},
		{"19 decimals", "0.0000000000000000001", "more than 18 decimals"},
		{"21 integer digits", "100000000000000000000", "more than 38 digits"},
		{"exponent", "1e-7", "not a decimal"},
		{"letters", "0.1x", "not a decimal"},
		{"two dots", "1.2.3", "not a decimal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParseMoney(c.in); err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("ParseMoney(%q) = %v, want an error saying %q", c.in, err, c.msg)
			}
		})
	}
}

// TestMoneyFromUnscaled: an unscaled 128-bit value (DuckDB's HUGEINT,
// Arrow's decimal128) and a big.Int (database/sql) give the Money that
// ParseMoney gives the same amount, and both refuse what it refuses.
func TestMoneyFromUnscaled(t *testing.T) {
	unit := new(big.Int).Exp(big.NewInt(10), big.NewInt(MoneyScale), nil)
	for _, amount := range []string{"0", "0.000475", "0.000000000000000001", "12", "18446744073.709551616",
		"123456789012.345678901234567891", "99999999999999999999.999999999999999999"} {
		want, err := ParseMoney(amount)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := new(big.Rat).SetString(amount)
		v := new(big.Int).Mul(r.Num(), new(big.Int).Div(unit, r.Denom()))
		got, err := MoneyFromBig(v)
		if err != nil || got != want {
			t.Errorf("MoneyFromBig(%s) = %s, %v; want %s", v, got, err, want)
		}
		lo := new(big.Int).And(v, new(big.Int).SetUint64(^uint64(0))).Uint64()
		hi := new(big.Int).Rsh(v, 64).Int64()
		if got, err := MoneyFromUnscaled(hi, lo); err != nil || got != want {
			t.Errorf("MoneyFromUnscaled(%#x, %#x) = %s, %v; want %s", hi, lo, got, err, want)
		}
	}
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(MoneyPrecision), nil) // 38 digits and more are refused
	for _, c := range []struct {
		name string
		v    *big.Int
		msg  string
	}{
		{"negative", big.NewInt(-1), "negative"},
		{"10^38", limit, "more than 38 digits"},
		{"10^38 + 1", new(big.Int).Add(limit, big.NewInt(1)), "more than 38 digits"},
		{"2^127", new(big.Int).Lsh(big.NewInt(1), 127), "more than 38 digits"},
	} {
		if m, err := MoneyFromBig(c.v); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: MoneyFromBig = %s, %v; want an error saying %q", c.name, m, err, c.msg)
		}
		if c.v.BitLen() > 127 {
			continue // not a 128-bit two's complement value
		}
		var b [16]byte
		new(big.Int).And(c.v, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))).FillBytes(b[:])
		hi, lo := int64(binary.BigEndian.Uint64(b[:8])), binary.BigEndian.Uint64(b[8:])
		if m, err := MoneyFromUnscaled(hi, lo); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: MoneyFromUnscaled(%#x, %#x) = %s, %v; want an error saying %q", c.name, hi, lo, m, err, c.msg)
		}
	}
	// The largest amount the column holds is accepted by both.
	top := new(big.Int).Sub(limit, big.NewInt(1))
	if _, err := MoneyFromBig(top); err != nil {
		t.Errorf("10^38 - 1: %v", err)
	}
}

// TestMoneyAdd: sums are exact, carry from the low 64 bits into the high,
// and a sum of 38 digits is refused.
func TestMoneyAdd(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"0", "0", "0"},
		{"0.000475", "0.000000000000000001", "0.000475000000000001"},
		{"18.446744073709551615", "0.000000000000000001", "18.446744073709551616"}, // carry into the high half
		{"123456789012.345678901234567891", "876543210987.654321098765432109", "1000000000000"},
		{"99999999999999999999.999999999999999998", "0.000000000000000001", "99999999999999999999.999999999999999999"},
		{"99999999999999999999.999999999999999999", "0.000000000000000001", ""},
	} {
		a, err := ParseMoney(c.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseMoney(c.b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.Add(b)
		switch {
		case c.want == "" && (err == nil || !strings.Contains(err.Error(), "more than 38 digits")):
			t.Errorf("%s + %s = %s, %v; want an error saying more than 38 digits", c.a, c.b, got, err)
		case c.want != "" && (err != nil || got.String() != c.want):
			t.Errorf("%s + %s = %s, %v; want %s", c.a, c.b, got, err, c.want)
		}
	}
}

// TestMoneyColumnIsDecimal checks the cost_usd columns' Parquet type: a
// DECIMAL(38, 18) in 16 fixed bytes, not text.
func TestMoneyColumnIsDecimal(t *testing.T) {
	for name, schema := range map[string]*parquet.Schema{
		"outcomes": parquet.SchemaOf(OutcomeRow{}),
		"costs":    parquet.SchemaOf(CostRow{}),
	} {
		t.Run(name, func(t *testing.T) {
			f, ok := schema.Lookup("cost_usd")
			if !ok {
				t.Fatal("no cost_usd column")
			}
			typ := f.Node.Type()
			lt := typ.LogicalType()
			d, ok := lt.Value.(*format.DecimalType)
			if !ok || d.Scale != MoneyScale || d.Precision != MoneyPrecision {
				t.Fatalf("cost_usd logical type %v, want DECIMAL(38,18)", lt)
			}
			if typ.Kind() != parquet.FixedLenByteArray || typ.Length() != 16 {
				t.Fatalf("cost_usd physical type %v length %d, want FIXED_LEN_BYTE_ARRAY(16)", typ.Kind(), typ.Length())
			}
		})
	}
	// Written and read back through the library, the bytes are kept.
	m, err := ParseMoney("0.000000037500000001")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := parquet.Write(&buf, []CostRow{{JobKey: "j", CostUSD: m}}); err != nil {
		t.Fatal(err)
	}
	rows, err := parquet.Read[CostRow](bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].CostUSD != m {
		t.Fatalf("read back %v, want %s", rows, m)
	}
}

func mustMoney(t testing.TB, s string) Money {
	t.Helper()
	m, err := ParseMoney(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTableFormatNamed: --version's table format and the files' created_by
// name the same version.
func TestTableFormatNamed(t *testing.T) {
	if want := "batchlake.tables/v" + createdByVer; FormatTables != want {
		t.Errorf("FormatTables %q, created_by version %q: want %q", FormatTables, createdByVer, want)
	}
}

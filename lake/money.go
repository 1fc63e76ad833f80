package lake

import (
	"encoding/binary"
	"fmt"
	"math/big"
	"math/bits"
	"strings"
)

// Money is an exact amount of USD as stored in the tables' cost_usd columns:
// a Parquet DECIMAL(38, 18) in a 16-byte FIXED_LEN_BYTE_ARRAY (the unscaled
// value, big-endian two's complement), which DuckDB, Spark, Trino, Athena
// and pandas read as a number, so sum(cost_usd) over the files needs no cast.
//
// Why 18 places: a line's cost is tokens × a per-token price, and per-token
// prices are the price table's USD per million tokens × a multiplier / 1e6,
// rendered with 18 decimals (exact for prices of up to 12 decimals and
// multipliers of up to 6, reconcile/prices.go). Token counts are integers,
// so every line's cost, and every sum of them, has at most 18 decimals. Why
// 38 digits: the widest decimal those engines all read (Spark's and Athena's
// limit), leaving 20 integer digits; with the price ceilings (10,000 USD per
// million tokens, multiplier 10) and ingest's 1e9 tokens per count a line
// costs under 1e9 USD. It is the DECIMAL(38, 18) reconcile computes in, so
// the files hold exactly what reconcile summed.
type Money [16]byte

// Scale and precision of Money (the cost_usd columns).
const (
	MoneyScale     = 18
	MoneyPrecision = 38
)

var moneyUnit = new(big.Int).Exp(big.NewInt(10), big.NewInt(MoneyScale), nil)

// ParseMoney turns an exact decimal string ("0.000475", "12") into Money.
// It refuses what the column cannot hold exactly: more than 18 decimals, 38
// digits or more, and negative amounts (no cost is negative: prices and
// token counts are checked non-negative, and the column's min/max statistics
// compare bytes unsigned). Reconcile reads amounts from DuckDB unscaled
// (MoneyFromUnscaled); this is for amounts written as text, as reports and
// DuckDB's own rendering show them.
func ParseMoney(s string) (Money, error) {
	var m Money
	if strings.HasPrefix(s, "-") {
		return m, fmt.Errorf("money %q: negative", s)
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" {
		return m, fmt.Errorf("money %q: not a decimal number", s)
	}
	if len(frac) > MoneyScale {
		// Trailing zeros beyond the scale change nothing.
		if strings.TrimRight(frac[MoneyScale:], "0") != "" {
			return m, fmt.Errorf("money %q: more than %d decimals", s, MoneyScale)
		}
		frac = frac[:MoneyScale]
	}
	if len(strings.TrimLeft(whole, "0")) > MoneyPrecision-MoneyScale {
		return m, fmt.Errorf("money %q: more than %d digits", s, MoneyPrecision)
	}
	var hi, lo uint64
	add := func(d byte) bool {
		if d < '0' || d > '9' {
			return false
		}
		// (hi, lo) = (hi, lo)*10 + d; 38 digits stay below 2^127.
		h, l := bits.Mul64(lo, 10)
		hi = hi*10 + h
		var c uint64
		lo, c = bits.Add64(l, uint64(d-'0'), 0)
		hi += c
		return true
	}
	for i := 0; i < len(whole); i++ {
		if !add(whole[i]) {
			return m, fmt.Errorf("money %q: not a decimal number", s)
		}
	}
	for i := 0; i < MoneyScale; i++ {
		d := byte('0')
		if i < len(frac) {
			d = frac[i]
		}
		if !add(d) {
			return m, fmt.Errorf("money %q: not a decimal number", s)
		}
	}
	binary.BigEndian.PutUint64(m[:8], hi)
	binary.BigEndian.PutUint64(m[8:], lo)
	return m, nil
}

// 10^38, the least unscaled value the column cannot hold, as the high and
// low halves of a 128-bit integer.
const moneyLimitHi, moneyLimitLo = 0x4b3b4ca85a86c47a, 0x098a224000000000

// MoneyFromUnscaled is the amount whose unscaled DECIMAL(38, 18) value is
// the 128-bit two's complement integer hi·2^64 + lo, as DuckDB's HUGEINT and
// Arrow's decimal128 hold it. It refuses what ParseMoney refuses: negative
// amounts and 38 digits or more.
func MoneyFromUnscaled(hi int64, lo uint64) (Money, error) {
	var m Money
	if hi < 0 {
		return m, fmt.Errorf("money: negative unscaled value (high bits %#x)", uint64(hi))
	}
	if uint64(hi) > moneyLimitHi || uint64(hi) == moneyLimitHi && lo >= moneyLimitLo {
		return m, fmt.Errorf("money: unscaled value %s has more than %d digits", new(big.Int).Or(new(big.Int).Lsh(big.NewInt(hi), 64), new(big.Int).SetUint64(lo)), MoneyPrecision)
	}
	binary.BigEndian.PutUint64(m[:8], uint64(hi))
	binary.BigEndian.PutUint64(m[8:], lo)
	return m, nil
}

// MoneyFromBig is MoneyFromUnscaled of an unscaled value held as a big.Int
// (DuckDB's database/sql driver scans DECIMAL columns so).
func MoneyFromBig(v *big.Int) (Money, error) {
	if v.Sign() < 0 {
		return Money{}, fmt.Errorf("money: negative unscaled value %s", v)
	}
	if v.BitLen() > 127 {
		return Money{}, fmt.Errorf("money: unscaled value %s has more than %d digits", v, MoneyPrecision)
	}
	var b [16]byte
	v.FillBytes(b[:])
	return MoneyFromUnscaled(int64(binary.BigEndian.Uint64(b[:8])), binary.BigEndian.Uint64(b[8:]))
}

// String renders the amount exactly, without trailing zeros ("0.000475", "2").
func (m Money) String() string {
	v := new(big.Int).SetBytes(m[:])
	s := new(big.Rat).SetFrac(v, moneyUnit).FloatString(MoneyScale)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Add is m + o, refused as MoneyFromUnscaled refuses it when the sum has 38
// digits or more.
func (m Money) Add(o Money) (Money, error) {
	lo, carry := bits.Add64(binary.BigEndian.Uint64(m[8:]), binary.BigEndian.Uint64(o[8:]), 0)
	hi, _ := bits.Add64(binary.BigEndian.Uint64(m[:8]), binary.BigEndian.Uint64(o[:8]), carry)
	return MoneyFromUnscaled(int64(hi), lo)
}

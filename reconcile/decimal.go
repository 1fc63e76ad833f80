package reconcile

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
)

// Decimal sums exact decimal strings: money is never a float.
type Decimal struct{ v *big.Rat }

// NewDecimal returns a zero sum.
func NewDecimal() *Decimal { return &Decimal{v: new(big.Rat)} }

// Add adds a decimal string such as "0.000012".
func (d *Decimal) Add(s string) error {
	x, ok := new(big.Rat).SetString(s)
	if !ok {
		return fmt.Errorf("not a decimal: %q", s)
	}
	d.v.Add(d.v, x)
	return nil
}

// String renders the sum with up to 18 decimals, without trailing zeros.
func (d *Decimal) String() string { return trimDecimal(d.v.FloatString(18)) }

// trimDecimal drops trailing zeros of a decimal string ("1.500" -> "1.5", "2.000" -> "2").
func trimDecimal(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// FormatDecimal renders a DuckDB DECIMAL exactly, without trailing zeros.
func FormatDecimal(x duckdb.Decimal) string {
	r := new(big.Rat).SetFrac(x.Value, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(x.Scale)), nil))
	return trimDecimal(r.FloatString(int(x.Scale)))
}

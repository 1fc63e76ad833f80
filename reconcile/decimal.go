package reconcile

import (
	"bytes"
	"fmt"
	"math/big"
	"strings"
)

// decimal sums exact decimal strings.
type decimal struct{ v *big.Rat }

func newDecimal() *decimal { return &decimal{v: new(big.Rat)} }

func (d *decimal) add(s string) error {
	x, ok := new(big.Rat).SetString(s)
	if !ok {
		return fmt.Errorf("not a decimal: %q", s)
	}
	d.v.Add(d.v, x)
	return nil
}

func (d *decimal) String() string { return trimDecimal(d.v.FloatString(18)) }

// trimDecimal drops trailing zeros of a decimal string ("1.500" -> "1.5", "2.000" -> "2").
func trimDecimal(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

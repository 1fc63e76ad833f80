package main

import (
	"math/big"
	"strings"
)

// sum adds exact decimal strings (costs are never floats).
type sum struct{ v *big.Rat }

func newSum() *sum { return &sum{v: new(big.Rat)} }

func (s *sum) add(d string) {
	if x, ok := new(big.Rat).SetString(d); ok {
		s.v.Add(s.v, x)
	}
}

func (s *sum) String() string {
	out := s.v.FloatString(18)
	out = strings.TrimRight(out, "0")
	return strings.TrimSuffix(out, ".")
}

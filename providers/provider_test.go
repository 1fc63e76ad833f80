package providers

import "testing"

// A create answered with a definite refusal may be sent again; any other
// answer may have created the batch, so submit must look it up instead.
func TestRefusal(t *testing.T) {
	for _, c := range []struct {
		status int
		want   bool
	}{
		{0, false}, // no answer: lost response, timeout
		{200, false},
		{400, true},
		{401, true},
		{403, true},
		{404, true},
		{408, false},
		{409, false},
		{422, true},
		{429, false},
		{500, false},
		{502, false},
		{503, false},
	} {
		if got := Refusal(c.status); got != c.want {
			t.Errorf("Refusal(%d) = %v, want %v", c.status, got, c.want)
		}
	}
}

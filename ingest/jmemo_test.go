package ingest

import (
	"bytes"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// TestMemoSameAsScan: once a line is scanned with a memo, every object and
// array in it scans (through the memo, from the line or from any slice of it)
// to the same end and flags as without one; a copy of the line, another
// buffer, never takes the memo's answers.
func TestMemoSameAsScan(t *testing.T) {
	var lines [][]byte
	for _, s := range append(append([]string{}, inputSeeds...), resultSeeds...) {
		lines = append(lines, []byte(s))
	}
	in, out, errs := generated(t, 300)
	lines = append(append(append(lines, in...), out...), errs...)
	hits := 0
	for _, line := range lines {
		i := skipSpace(line, 0)
		jm := newMemo(line)
		end, fl := scanValue(jm, line, i, 0)
		if want, wfl := scanValue(nil, line, i, 0); end != want || fl != wfl {
			t.Fatalf("%q: with a memo %d %b, without %d %b", line, end, fl, want, wfl)
		}
		if end < 0 {
			jm.release()
			continue
		}
		for k := 0; k < jm.n; k++ {
			off, end := int(jm.start[k]), int(jm.end[k])
			for _, c := range []struct {
				b  []byte
				at int
			}{{line, off}, {line[off:], 0}, {line[off:end], 0}} {
				b, at := c.b, c.at
				got, gfl := scanValue(jm, b, at, 0)
				want, wfl := scanValue(nil, b, at, 0)
				if got != want || gfl != wfl {
					t.Fatalf("%q at %d: with the memo %d %b, without %d %b", b, at, got, gfl, want, wfl)
				}
				hits++
			}
		}
		// A copy is another buffer: the memo must not answer for it.
		cp := bytes.Clone(line)
		if jm.holds(cp) || jm.offset(cp, i) >= 0 {
			t.Fatalf("the memo of a line answers for its copy")
		}
		jm.release()
	}
	if hits == 0 {
		t.Fatal("no containers remembered")
	}
}

// The strings a result line's row holds are carved from its memo's block
// (jmemo.str), which the memo keeps for the lines after it: every row kept
// must still say what it said when parsed, after blocks have filled and
// other lines (on other goroutines too) have been carved from them.
func TestCarvedStringsOutliveTheirLine(t *testing.T) {
	_, out, _ := generated(t, 3000)
	const workers = 4
	rows := make([]lake.AttemptRow, len(out))
	errs := make([]error, len(out)) // the generator plants a few bad lines
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(out); i += workers {
				rows[i], errs[i] = (openaiFormat{}).ParseResult(out[i], ChannelOutput)
			}
		}()
	}
	wg.Wait()
	for i, l := range out {
		want, err := generalParseResult(l)
		if fmt.Sprint(err) != fmt.Sprint(errs[i]) {
			t.Fatalf("line %d: error %v, want %v", i, errs[i], err)
		}
		if !reflect.DeepEqual(rows[i], want) {
			t.Fatalf("line %d, once 3000 lines were parsed:\n got %+v\nwant %+v", i, rows[i], want)
		}
	}
}

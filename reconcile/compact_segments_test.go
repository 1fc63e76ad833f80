package reconcile

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// planSegments keeps the segments whose jobs are unchanged, writes again
// those holding a changed job, and carries the newest kept ones into the
// new segment while each holds no more jobs than it has gathered.
func TestPlanSegments(t *testing.T) {
	// compaction builds a marker of segments of the given sizes; job "sNjM"
	// is the Mth job of segment N, its markers "m".
	compaction := func(sizes ...int) *lake.Compaction {
		c := &lake.Compaction{Version: lake.CompactionVersion}
		for i, n := range sizes {
			c.Segments = append(c.Segments, lake.CompactionSegment{Tables: map[string]string{"costs": fmt.Sprintf("seg%d", i)}})
			for j := range n {
				c.Jobs = append(c.Jobs, lake.CompactedJob{JobKey: fmt.Sprintf("s%dj%d", i, j), Markers: "m", Segment: i})
			}
		}
		return c
	}
	marks := func(c *lake.Compaction, changed ...string) map[string]string {
		m := map[string]string{}
		for _, j := range c.Jobs {
			m[j.JobKey] = "m"
		}
		for _, j := range changed {
			m[j] = "m2"
		}
		return m
	}
	tests := []struct {
		name    string
		sizes   []int
		changed []string
		live    int // new and changed jobs read live
		// the segments kept and merged (by their costs object), and the
		// unchanged jobs the new segment takes from the merged ones
		kept, merged []string
		mergedJobs   int
	}{
		{"nothing new", []int{8, 4}, nil, 0, []string{"seg0", "seg1"}, nil, 0},
		{"a day's jobs beside larger segments", []int{8, 4}, nil, 2, []string{"seg0", "seg1"}, nil, 0},
		{"a segment no larger than the new one", []int{8, 2}, nil, 2, []string{"seg0"}, []string{"seg1"}, 2},
		{"carries on while each fits", []int{16, 4, 2, 1}, nil, 1, []string{"seg0"}, []string{"seg3", "seg2", "seg1"}, 7},
		{"a carry through every segment", []int{8, 4, 2, 1}, nil, 1, nil, []string{"seg3", "seg2", "seg1", "seg0"}, 15},
		{"stops at the first larger one", []int{2, 8, 1}, nil, 1, []string{"seg0", "seg1"}, []string{"seg2"}, 1},
		{"a changed job writes its segment again", []int{8, 4}, []string{"s0j3"}, 1, nil, []string{"seg0", "seg1"}, 11},
		{"a changed job in the newest segment", []int{8, 4}, []string{"s1j0"}, 1, []string{"seg0"}, []string{"seg1"}, 3},
		{"version 1: one segment", nil, nil, 3, []string{"v1"}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c *lake.Compaction
			if tc.sizes == nil {
				c = &lake.Compaction{Version: 1, Tables: map[string]string{"costs": "v1"}}
				for j := range 5 {
					c.Jobs = append(c.Jobs, lake.CompactedJob{JobKey: fmt.Sprintf("v1j%d", j), Markers: "m"})
				}
			} else {
				c = compaction(tc.sizes...)
			}
			p := planSegments(c, newCompactionUse(c, marks(c, tc.changed...), Scope{}), tc.live)
			names := func(ss []segment) []string {
				var out []string
				for _, s := range ss {
					out = append(out, s.tables["costs"])
				}
				return out
			}
			if got := names(p.kept); !reflect.DeepEqual(got, tc.kept) {
				t.Errorf("kept %v, want %v", got, tc.kept)
			}
			if got := names(p.merged); !reflect.DeepEqual(got, tc.merged) {
				t.Errorf("merged %v, want %v", got, tc.merged)
			}
			if p.mergedJobs != tc.mergedJobs {
				t.Errorf("merged jobs %d, want %d", p.mergedJobs, tc.mergedJobs)
			}
			for _, s := range p.merged {
				for _, j := range s.jobs {
					for _, ch := range tc.changed {
						if j.JobKey == ch {
							t.Errorf("changed job %s taken from its old segment", ch)
						}
					}
				}
			}
		})
	}
}

package sql

import (
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		name, script string
		want         []string
	}{
		{"one statement", "SELECT 1;\n", []string{"SELECT 1;"}},
		{"two statements", "SELECT 1;\nSELECT 2;\n", []string{"SELECT 1;", "SELECT 2;"}},
		{"no final semicolon", "SELECT 1;\nSELECT 2", []string{"SELECT 1;", "SELECT 2"}},
		{"a trailing comment dropped", "-- a note\n\nSELECT 1;\n-- the end\n", []string{"-- a note\n\nSELECT 1;"}},
		{"a statement across lines", "SELECT a,\n       b\nFROM t;\n", []string{"SELECT a,\n       b\nFROM t;"}},
		{"a comment line ending in ';' inside a statement", "SELECT a\n-- first this;\nFROM t;\n", []string{"SELECT a\n-- first this;\nFROM t;"}},
		{"a comment line ending in ';' before a statement", "-- one statement for them all;\n-- values follow\nINSERT INTO x VALUES (1);\n",
			[]string{"-- one statement for them all;\n-- values follow\nINSERT INTO x VALUES (1);"}},
		{"indented comment", "SELECT a\n    -- why;\nFROM t;\n", []string{"SELECT a\n    -- why;\nFROM t;"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Split(c.script); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Split(%q) = %q, want %q", c.script, got, c.want)
			}
		})
	}
}

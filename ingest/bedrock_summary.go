package ingest

import (
	"bufio"
	"context"
	"fmt"
	"os"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// SummaryCheck is a Bedrock job summary (manifest.json.out) cross-checked
// against the result lines.
type SummaryCheck struct {
	File        string               `json:"file"`
	SHA256      string               `json:"sha256"`
	Differences []ManifestDifference `json:"differences"`
}

// CheckBedrockSummary archives a manifest.json.out (named name, bytes data)
// content-addressed in l and compares its counts with what the lines of
// the result files at paths add up to. expected is the number of records
// the job or shard submitted (0: not compared). Lines that do not parse are
// not counted: ingest quarantines them.
func CheckBedrockSummary(ctx context.Context, l *lake.Lake, name string, data []byte, paths []string, expected int64) (*SummaryCheck, error) {
	sm, err := ParseBedrockManifest(data)
	if err != nil {
		return nil, &errkind.InputError{File: name, Msg: err.Error()}
	}
	d, err := l.PutObject(ctx, data)
	if err != nil {
		return nil, err
	}
	f := bedrockFormat{}
	tally := BedrockTally{Expected: expected}
	for _, p := range paths {
		if err := tallyFile(f, p, &tally); err != nil {
			return nil, err
		}
	}
	return &SummaryCheck{File: name, SHA256: d.Hex(), Differences: append([]ManifestDifference{}, sm.Check(tally)...)}, nil
}

func tallyFile(f bedrockFormat, path string, t *BedrockTally) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), MaxLineBytes)
	for sc.Scan() {
		if row, err := f.ParseResult(sc.Bytes(), ChannelOutput); err == nil {
			t.Add(row)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("bedrock summary: read %s: %w", path, err)
	}
	return nil
}

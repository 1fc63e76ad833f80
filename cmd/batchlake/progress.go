package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/batchlake/batchlake/ingest"
)

// progressLogEvery is how often progress is logged when stderr is not a terminal.
const progressLogEvery = 10 * time.Second

// progress reports a long step over a file of total bytes: a bar on stderr
// when it is a terminal (or --progress always), a log line every 10 s
// otherwise (or nothing with --progress never). done() ends it.
func (g *globals) progressFor(step, name string, total int64, stderr io.Writer) (ingest.Progress, func()) {
	if g.progress == "never" || total <= 0 {
		return nil, func() {}
	}
	tty := false
	if f, ok := stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	if g.progress == "always" || tty {
		bar := progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription(step+" "+name),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		return func(done int64) { bar.Set64(done) }, func() { bar.Finish() }
	}
	var mu sync.Mutex
	start, last := time.Now(), time.Now()
	return func(done int64) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < progressLogEvery {
			return
		}
		last = time.Now()
		el := time.Since(start).Seconds()
		rate := float64(done) / el
		eta := time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
		g.log.Info(step+" progress", "file", name, "percent", fmt.Sprintf("%.0f", 100*float64(done)/float64(total)),
			"mb_per_s", fmt.Sprintf("%.1f", rate/1e6), "eta", eta.String())
	}, func() {}
}

func fileSize(path string) int64 {
	if st, err := os.Stat(path); err == nil {
		return st.Size()
	}
	return 0
}

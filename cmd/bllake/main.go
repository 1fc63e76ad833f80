// Command bllake grows a lake of many small simulated jobs for the many-jobs
// benchmark (bench/lake.sh): jobs numbered -from (inclusive) to -to
// (exclusive), each made in-process the way `batchlake run --provider sim`
// makes one (bench/lakegen).
//
//	bllake -lake bench-lake -from 0 -to 10000 -workers 2
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/batchlake/batchlake/bench/lakegen"
	"github.com/batchlake/batchlake/lake"
	_ "github.com/batchlake/batchlake/lake/cloud" // s3://, gs:// and azblob:// lakes
)

func main() {
	var (
		lakeURL  = flag.String("lake", "bench-lake", "the lake to grow (a folder or a blob URL)")
		from     = flag.Int("from", 0, "first job number (inclusive)")
		to       = flag.Int("to", 1, "last job number (exclusive)")
		records  = flag.Int("records", 5, "records per job")
		tenants  = flag.Int("tenants", 10, "tenants the jobs are spread over")
		seed     = flag.Uint64("seed", 1, "simulator seed")
		workers  = flag.Int("workers", 2, "jobs made at once")
		tmpDir   = flag.String("tmp-dir", "", "temporary files (default: the system's)")
		progress = flag.Bool("progress", true, "report progress on stderr")
		sameVers = flag.Bool("same-versions", false, "plan every job with one prompt version and no source version (a daily pipeline's jobs, told apart by their business keys)")
		cpuProf  = flag.String("cpuprofile", "", "write a CPU profile to this file")
	)
	flag.Parse()
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bllake:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bllake:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *lakeURL, *from, *to, *workers, *progress, lakegen.Options{Records: *records, Tenants: *tenants, Seed: *seed, TmpDir: *tmpDir, SameVersions: *sameVers}); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bllake:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, lakeURL string, from, to, workers int, progress bool, o lakegen.Options) error {
	if from < 0 || to < from || workers < 1 {
		return fmt.Errorf("want 0 <= -from <= -to and -workers >= 1")
	}
	l, err := lake.Open(ctx, lakeURL)
	if err != nil {
		return err
	}
	defer l.Close()
	g, err := lakegen.New(l, o)
	if err != nil {
		return err
	}
	defer g.Close()
	start := time.Now()
	var (
		next, done, jobs atomic.Int64
		wg               sync.WaitGroup
		mu               sync.Mutex
		first            error
	)
	next.Store(int64(from))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				keys, err := g.Job(ctx, i)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
				jobs.Add(int64(len(keys)))
				if n := done.Add(1); progress && n%100 == 0 {
					fmt.Fprintf(os.Stderr, "bllake: %d/%d jobs, %.1f s\n", n, to-from, time.Since(start).Seconds())
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	out, _ := json.Marshal(map[string]any{"from": from, "to": to, "inputs": done.Load(), "jobs": jobs.Load(), "seconds": time.Since(start).Seconds()})
	fmt.Println(string(out))
	return nil
}

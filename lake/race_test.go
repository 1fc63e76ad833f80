package lake

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Ledger races: many writers contend for the same transition; exactly one may
// win each time, whatever the backend.

// longRaces reports whether the long race runs were asked for (BATCHLAKE_LONG=1).
func longRaces() bool { return os.Getenv("BATCHLAKE_LONG") == "1" }

// raceStep is one contended transition of a round.
type raceStep struct {
	to    State
	lease time.Duration
	// twins makes every contender the same actor on the same frozen clock, so
	// that contenders produce events that differ in nothing but who wrote them:
	// the worst case for an append that treats "same bytes" as its own.
	twins bool
}

var raceSteps = []raceStep{
	{Created, 0, true},
	{Validated, 0, true},
	{Submitting, time.Hour, false},
}

// contend releases one Transition per ledger at once and returns the number of
// winners. Losers must fail with ErrConflict, or (having read the winner's
// event) ErrIllegalTransition or ErrLeased; anything else is returned as err.
func contend(ctx context.Context, ledgers []*Ledger, job Digest, shard string, s raceStep) (wins int, winner Event, err error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		start = make(chan struct{})
		errs  []error
	)
	for _, g := range ledgers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			e, err := g.Transition(ctx, job, shard, s.to, s.lease, "", nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
				winner = e
			case errors.Is(err, ErrConflict), errors.Is(err, ErrIllegalTransition), errors.Is(err, ErrLeased):
			default:
				errs = append(errs, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	return wins, winner, errors.Join(errs...)
}

// raceLedgers returns the contenders of one step: n ledgers named prefix<i>,
// or n twins, all on the same frozen clock.
func raceLedgers(l *Lake, n int, prefix string, twins bool) []*Ledger {
	now := func() time.Time { return t0 }
	out := make([]*Ledger, n)
	for i := range out {
		actor := prefix + strconv.Itoa(i)
		if twins {
			actor = "twin"
		}
		out[i] = testLedger(l, actor, now)
	}
	return out
}

func TestLedgerRace(t *testing.T) {
	t.Parallel() // its S3 backend mostly waits on loopback requests
	const contenders = 8
	rounds := map[string]int{"mem": 100, "file": 100, "s3": 100}
	switch {
	case longRaces():
		for k := range rounds {
			rounds[k] *= 10
		}
	case testing.Short():
		// -short: a long race by nature (every round is 8 writers on every
		// step); 20 rounds still contend each step on each backend, the
		// full run's 100 are the repeated trial.
		for k := range rounds {
			rounds[k] = 20
		}
	}
	forEachBackend(t, func(t *testing.T, l *Lake) {
		ctx := context.Background()
		job := Sum([]byte("race"))
		name := t.Name()[strings.LastIndexByte(t.Name(), '/')+1:]
		transitions := 0
		for r := range rounds[name] {
			shard := fmt.Sprintf("r%05d", r)
			for _, s := range raceSteps {
				wins, winner, err := contend(ctx, raceLedgers(l, contenders, "g", s.twins), job, shard, s)
				if err != nil {
					t.Fatalf("round %d, -> %s: unexpected error: %v", r, s.to, err)
				}
				if wins != 1 {
					t.Fatalf("round %d, -> %s: %d writers won, want exactly 1", r, s.to, wins)
				}
				evs, err := NewLedger(l, "reader").Events(ctx, job, shard)
				if err != nil {
					t.Fatal(err)
				}
				last := evs[len(evs)-1]
				if last.State != s.to || last.Actor != winner.Actor || last.Nonce != winner.Nonce {
					t.Fatalf("round %d: stored event %+v is not the winner's %+v", r, last, winner)
				}
				transitions++
			}
		}
		t.Logf("%d contended transitions, %d writers each", transitions, contenders)
	})
}

// The two-process race: the test binary re-executes itself as helpers that
// contend on one local-folder lake, where the atomic create is link(2).

const (
	helperEnv       = "BATCHLAKE_LAKE_TEST_HELPER"
	helperDirEnv    = "BATCHLAKE_LAKE_TEST_DIR"
	helperIDEnv     = "BATCHLAKE_LAKE_TEST_ID"
	helperRoundsEnv = "BATCHLAKE_LAKE_TEST_ROUNDS"
)

// runHelperProcess is a helper's main: it waits for the "go" file, runs the
// rounds and prints one line "<shard> <state> <wins>" per step.
func runHelperProcess() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	if os.Getenv(helperEnv) != "ledger-race" {
		return fail(fmt.Errorf("unknown helper mode %q", os.Getenv(helperEnv)))
	}
	dir, id := os.Getenv(helperDirEnv), os.Getenv(helperIDEnv)
	rounds, err := strconv.Atoi(os.Getenv(helperRoundsEnv))
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	l, err := Open(ctx, filepath.Join(dir, "lake"))
	if err != nil {
		return fail(err)
	}
	defer l.Close()
	if err := os.WriteFile(filepath.Join(dir, "ready-"+id), nil, 0o644); err != nil {
		return fail(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fail(errors.New("no go signal"))
		}
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	job := Sum([]byte("two processes"))
	for r := range rounds {
		shard := fmt.Sprintf("r%05d", r)
		for _, s := range raceSteps {
			wins, _, err := contend(ctx, raceLedgers(l, 2, "p"+id+"g", s.twins), job, shard, s)
			if err != nil {
				return fail(fmt.Errorf("round %d -> %s: %w", r, s.to, err))
			}
			fmt.Fprintf(out, "%s %s %d\n", shard, s.to, wins)
		}
	}
	return 0
}

func TestLedgerRaceTwoProcesses(t *testing.T) {
	const procs = 2
	rounds := 150
	if longRaces() {
		rounds = 2000
	}
	dir := t.TempDir()
	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	ps := make([]*proc, procs)
	for i := range ps {
		p := &proc{cmd: exec.Command(os.Args[0], "-test.run=^$")}
		p.cmd.Env = append(os.Environ(), helperEnv+"=ledger-race", helperDirEnv+"="+dir,
			helperIDEnv+"="+strconv.Itoa(i), helperRoundsEnv+"="+strconv.Itoa(rounds))
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	// Release both helpers at once, when both are ready.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		ready := 0
		for i := range ps {
			if _, err := os.Stat(filepath.Join(dir, "ready-"+strconv.Itoa(i))); err == nil {
				ready++
			}
		}
		if ready == procs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("helpers never became ready")
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wins := map[string]int{}
	// Wait for every helper before judging any, so none still writes while
	// the test fails and cleans up.
	waitErrs := make([]error, procs)
	for i, p := range ps {
		waitErrs[i] = p.cmd.Wait()
	}
	for i, p := range ps {
		if waitErrs[i] != nil {
			t.Fatalf("helper %d: %v\n%s", i, waitErrs[i], p.stderr.String())
		}
		sc := bufio.NewScanner(&p.stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 {
				t.Fatalf("helper %d printed %q", i, sc.Text())
			}
			n, _ := strconv.Atoi(f[2])
			wins[f[0]+" "+f[1]] += n
		}
	}
	if len(wins) != rounds*len(raceSteps) {
		t.Fatalf("helpers reported %d steps, want %d", len(wins), rounds*len(raceSteps))
	}
	for step, n := range wins {
		if n != 1 {
			t.Errorf("%s: %d writers won across processes, want exactly 1", step, n)
		}
	}
	l := openLake(t, filepath.Join(dir, "lake"))
	ctx := context.Background()
	job := Sum([]byte("two processes"))
	byProc := map[string]int{}
	for r := range rounds {
		shard := fmt.Sprintf("r%05d", r)
		evs, err := NewLedger(l, "reader").Events(ctx, job, shard)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != len(raceSteps) {
			t.Fatalf("%s: %d events, want %d", shard, len(evs), len(raceSteps))
		}
		byProc[evs[2].Actor[:2]]++
	}
	t.Logf("%d rounds; SUBMITTING won per process: %v", rounds, byProc)
}

// Command batchlake makes LLM batch inference trustworthy at data-lake scale:
// it plans batches into an immutable lake, submits each shard exactly once,
// ingests provider files and reconciles every record with DuckDB.
//
// Every command prints one JSON object on stdout; logs and progress go to
// stderr; the exit code says what an orchestrator should do next (see exitCode).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/internal/startup"
	"github.com/batchlake/batchlake/lake"
	_ "github.com/batchlake/batchlake/lake/cloud" // s3://, gs:// and azblob:// lakes
	"github.com/batchlake/batchlake/reconcile"
)

// Exit codes, documented in README.md and docs/contract.md.
const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitPartial  = 10
	exitReview   = 11
	exitTempFail = 75
)

// DuckDB's memory limits unless --memory-limit says otherwise: fixed limits
// rather than DuckDB's default (80% of RAM), beyond which it spills to
// --tmp-dir. DuckDB's allocations outside its buffer manager come on top
// (docs/performance.md has the measured peaks). Reconcile sorts the costs
// in steps when their sort does not fit, and takes the lower limit, which keeps a
// 10M-record reconcile near 1 GiB; the queries of sql, report, manual and
// cost have operators that cannot spill, and at 10M records need the higher.
const (
	reconcileMemoryLimit = "384MB"
	queryMemoryLimit     = "512MB"
)

// memoryLimit is --memory-limit (or BATCHLAKE_MEMORY_LIMIT), else def.
func (g *globals) memoryLimit(def string) string {
	if g.memLimit != "" {
		return g.memLimit
	}
	return def
}

// exitErr carries a non-zero exit code with a result that is still printed.
type exitErr struct{ code int }

func (e exitErr) Error() string { return fmt.Sprintf("exit %d", e.code) }

type globals struct {
	lakeURL   string
	logFormat string
	progress  string
	tmpDir    string
	threads   int
	memLimit  string
	cacheDir  string
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	log       *slog.Logger
}

func main() {
	started()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// started turns the Go collector back on, off while the packages
// initialised (internal/startup): the first thing a process does.
func started() { startup.Done() }

func run(args []string, stdout, stderr io.Writer) int {
	return runIO(args, os.Stdin, stdout, stderr)
}

// runIO is run with standard input given (sql reads its query from it).
func runIO(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(ctx, g, stderr)
	root.SetArgs(args)
	stopProfiles := startProfiles(stderr)
	err := root.Execute()
	stopProfiles()
	code := exitCode(err)
	var ee exitErr
	switch {
	case err == nil || errors.As(err, &ee):
		// Done, or the command printed its result (an exitErr): the one JSON
		// object on stdout.
	case code == exitTempFail:
		fmt.Fprintf(stderr, "batchlake: %v\n", err)
		printJSON(stdout, map[string]any{"error": err.Error(), "exit_code": code, "pending": true})
	case code != exitPartial && code != exitReview:
		fmt.Fprintf(stderr, "batchlake: %v\n", err)
		if code == exitUsage || code == exitError {
			res := map[string]any{"error": err.Error(), "exit_code": code}
			var amb *lake.AmbiguousJobError
			if errors.As(err, &amb) {
				res["candidates"] = amb.Candidates
			}
			printJSON(stdout, res)
		}
	}
	return code
}

// exitCode is the one place errors become exit codes (with reportCode, its
// table for a reconcile report).
func exitCode(err error) int {
	var ee exitErr
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, lake.ErrLeased), errors.Is(err, lake.ErrConflict):
		// Another worker holds the step or won the same transition a moment
		// ago (a concurrent reconcile or submit): not an error, try again later.
		return exitTempFail
	case errors.Is(err, errkind.ErrNotYet):
		// The step must wait for something else to finish first (reconcile
		// of a job whose batches are still running).
		return exitTempFail
	case errors.Is(err, errkind.ErrBadInput):
		return exitUsage
	case errors.Is(err, lake.ErrNoLake), errors.Is(err, lake.ErrJobNotFound), errors.Is(err, lake.ErrBadJobKey), errors.As(err, new(*lake.AmbiguousJobError)):
		// A lake or job that is not there: the user named the wrong one.
		return exitUsage
	case isCobraUsage(err):
		return exitUsage
	default:
		return exitError
	}
}

// reportCode is the exit code of a reconcile report, from the facts it
// states: lines a person must look at (unknown ids, duplicates) beat a
// partial job.
func reportCode(rep *reconcile.Report) int {
	switch {
	case rep.Unknown > 0 || rep.Duplicate > 0:
		return exitReview
	case rep.State == lake.Completed:
		return exitOK
	default:
		return exitPartial
	}
}

// isCobraUsage recognises cobra's own flag and argument errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "required flag", "invalid argument", "accepts ", "flag needs an argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (g *globals) open(ctx context.Context) (*lake.Lake, error) {
	l, err := lake.Open(ctx, g.lakeURL)
	if err != nil {
		return nil, err
	}
	l.SetMarkerCache(filepath.Join(reconcile.CacheDir(g.cacheDir), "markers"))
	return l, nil
}

func jobDigest(s string) (lake.Digest, error) {
	if s == "" {
		return lake.Digest{}, &errkind.UsageError{Msg: "missing required flag --job"}
	}
	d, err := lake.ParseDigest(s)
	if err != nil {
		return d, &errkind.UsageError{Msg: "--job: " + err.Error()}
	}
	return d, nil
}

// newRoot builds the command tree; deploy tests walk it to check that every
// command and flag the Argo and Airflow files use exists.
func newRoot(ctx context.Context, g *globals, stderr io.Writer) *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:   "batchlake",
		Short: "Trustworthy LLM batch inference on a data lake",
		Long: `batchlake plans LLM batch jobs into an immutable lake, submits each shard
exactly once, collects and reconciles every record in DuckDB.

Every command prints one JSON object on stdout and logs to stderr; the exit
code says what to do next (0 done, 1 error, 2 bad usage or input, 10 partial,
11 review, 75 try later). docs/contract.md in the repository has the details.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				printJSON(g.stdout, currentVersion())
				return nil
			}
			return cmd.Help()
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var h slog.Handler
			switch g.logFormat {
			case "json":
				h = slog.NewJSONHandler(stderr, nil)
			case "text", "":
				h = slog.NewTextHandler(stderr, nil)
			default:
				return &errkind.UsageError{Msg: "--log-format: want text or json"}
			}
			g.log = slog.New(h)
			// The packages' own warnings (reconcile's fallbacks) in the same format.
			slog.SetDefault(g.log)
			switch g.progress {
			case "auto", "always", "never":
			default:
				return &errkind.UsageError{Msg: "--progress: want never, always or auto"}
			}
			if err := applyEnvFlags(cmd); err != nil {
				return err
			}
			if g.threads < 0 {
				return &errkind.UsageError{Msg: fmt.Sprintf("--threads %d: want a count of threads (0: the default)", g.threads)}
			}
			// Checked before any step, which would otherwise fail (exit 1,
			// "run it again") where it first writes a file there: for the
			// cache of a remote lake, a run once its batch was sent and done.
			if err := checkFolder("--tmp-dir", g.tmpDir, false); err != nil {
				return err
			}
			if err := checkFolder("--cache-dir", g.cacheDir, true); err != nil {
				return err
			}
			if err := checkLakeURL(cmd, g.lakeURL); err != nil {
				return err
			}
			return g.checkLakeAndJob(ctx, cmd)
		},
	}
	root.SetOut(stderr)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(suggestFlag)
	root.Flags().BoolVar(&showVersion, "version", false, "print the binary's version and the lake formats it writes, as JSON")
	pf := root.PersistentFlags()
	pf.StringVar(&g.lakeURL, "lake", envOr("BATCHLAKE_LAKE", "./lake"), "lake URL: a folder, file:///…, mem://, s3://…, gs://…, azblob://… (env BATCHLAKE_LAKE)")
	pf.StringVar(&g.logFormat, "log-format", "text", "log format on stderr: text or json")
	pf.StringVar(&g.progress, "progress", "auto", "progress bars on stderr: never, always or auto (when stderr is a terminal)")
	pf.StringVar(&g.tmpDir, "tmp-dir", "", "directory for temporary files (default: the system's); on a local lake's file system the files it stores are linked, not copied")
	pf.IntVar(&g.threads, "threads", 0, "DuckDB threads (default: all cores; reconcile of a job under 50,000 records: one)")
	pf.StringVar(&g.memLimit, "memory-limit", os.Getenv("BATCHLAKE_MEMORY_LIMIT"), "DuckDB memory limit (env BATCHLAKE_MEMORY_LIMIT; default "+reconcileMemoryLimit+" for reconcile, "+queryMemoryLimit+" for the other commands); DuckDB spills to --tmp-dir beyond it")
	pf.StringVar(&g.cacheDir, "cache-dir", "", "local cache of a remote lake's table files and markers (default: the user cache dir)")
	root.AddCommand(planCmd(ctx, g), ingestCmd(ctx, g), reconcileCmd(ctx, g), retryCmd(ctx, g), sqlCmd(ctx, g),
		submitCmd(ctx, g), statusCmd(ctx, g), collectCmd(ctx, g), cancelCmd(ctx, g), runCmd(ctx, g), verifyCmd(ctx, g), catalogCmd(ctx, g), costCmd(ctx, g), manualCmd(ctx, g), reportCmd(ctx, g),
		jobsCmd(ctx, g), compactCmd(ctx, g))
	return root
}

// lakeCreators are the commands that may make a new lake; every other command
// needs one that exists, so a mistyped --lake is an error, not an empty answer.
var lakeCreators = map[string]bool{"plan": true, "run": true}

// checkFolder refuses a folder flag's path that is a file or under one, or,
// unless made (the command makes it when it first uses it), one that is not
// there. An empty path is the flag's default.
func checkFolder(flag, path string, made bool) error {
	if path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && !fi.IsDir():
		err = fmt.Errorf("%s is a file", fi.Name())
	case made && errors.Is(err, fs.ErrNotExist):
		err = nil
	}
	if err == nil {
		return nil
	}
	want := "want a folder that is there"
	if made {
		want = "want a folder, made if it is not there"
	}
	return &errkind.UsageError{Msg: fmt.Sprintf("%s %s: %s (%v)", flag, path, want, err)}
}

// checkLakeURL refuses an empty lake URL, from a DAG's unset parameter,
// which would be ./lake: in a pod's throwaway folder a run's paid results
// would go with the pod. A command that reads no lake passes.
func checkLakeURL(cmd *cobra.Command, url string) error {
	if readsNoLake(cmd) {
		return nil
	}
	if v, set := os.LookupEnv("BATCHLAKE_LAKE"); set && v == "" && !cmd.Flags().Changed("lake") {
		return &errkind.UsageError{Msg: "BATCHLAKE_LAKE is set but empty: give the lake's URL (a folder, s3://…), or unset it for ./lake"}
	}
	if url == "" {
		return &errkind.UsageError{Msg: "--lake is empty: give the lake's URL (a folder, s3://…), or leave the flag out for ./lake"}
	}
	return nil
}

// readsNoLake says whether cmd is one that reads no lake: the root command
// (--version), help and completion.
func readsNoLake(cmd *cobra.Command) bool {
	return !cmd.HasParent() || cmd.Name() == "help" || cmd.Name() == "completion" || cmd.Parent().Name() == "completion"
}

// checkLakeAndJob runs before every command: unless the command may create a
// lake, the lake must exist; and a --job flag, if the command has one, is
// resolved here (a unique prefix of a job key becomes the whole key), so that
// every command accepts prefixes and words "not found" the same way.
func (g *globals) checkLakeAndJob(ctx context.Context, cmd *cobra.Command) error {
	if readsNoLake(cmd) || lakeCreators[cmd.Name()] {
		return nil
	}
	l, err := lake.OpenExisting(ctx, g.lakeURL)
	if err != nil {
		return err
	}
	defer l.Close()
	f := cmd.Flags().Lookup("job")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	d, err := l.ResolveJob(ctx, f.Value.String())
	if err != nil {
		return fmt.Errorf("--job: %w", err)
	}
	return f.Value.Set(d.Hex())
}

// openJob parses --job and opens the lake; the caller closes the lake.
func (g *globals) openJob(ctx context.Context, job string) (*lake.Lake, lake.Digest, error) {
	d, err := jobDigest(job)
	if err != nil {
		return nil, d, err
	}
	l, err := g.open(ctx)
	return l, d, err
}

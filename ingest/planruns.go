package ingest

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/batchlake/batchlake/lake"
)

// planRuns holds a plan's records sorted by cmp: in memory while they fit in
// one run, as sorted run files merged on the fly beyond that, so a plan's
// memory stays flat however many records the input has (an external sort).
// Records with lineage (retry jobs) always stay in memory: their lineage map
// is in memory already.
//
// A record may carry its input line (planRec.data): plan does that for the
// records that arrive out of key order, so that writing the shards reads
// them back in order from the runs instead of one pread each, at random,
// from the input. Carried lines count against maxBytes per run.
type planRuns struct {
	cmp      func(a, b *planRec) int
	max      int // records per run
	maxBytes int // bytes of carried lines per run
	// bound and boundBytes are newPlanRuns' max and maxBytes: all the
	// records and carried bytes held at once.
	bound, boundBytes int
	hint              int // records expected in all, to size the first run's buffer
	dir               string
	buf               []planRec
	lines             lineArena // the carried lines of buf
	runs              []runRef  // the runs written, in memory or in files
	memBytes          int64     // of the runs in memory (an estimate for one being written)
	memBudget         int64     // the bound on memBytes (memRunBudget)
	n                 int64
	w                 *bufio.Writer // writes every run file in turn
	// A full run is sorted and written by a goroutine of its own while the
	// next one fills the other buffer (spare and spareLines, empty):
	// written in line, each run stopped the goroutine that adds records,
	// and with it the parse (1M: 2.54-2.86 s against 2.71-2.91).
	spare      []planRec
	spareLines lineArena
	spilling   chan spilled // the run being written, nil when none is
}

// runRef is a sorted run: encoded records in memory (mem), or in a file
// (path) once the runs in memory reach memRunBudget.
type runRef struct {
	path string
	mem  *memRun
	size int64
	recs int   // records in it
	est  int64 // of a run in memory, what memBytes counted while it was written
}

// memRunBudget bounds the bytes of the runs a plan keeps in memory. A run
// written into the kernel's page cache and read back cost about 2 ns a byte
// of system time here; held in memory, encoded (about 90 bytes a record, no
// pointers for the collector to scan), it costs its fresh pages. A 1M plan's
// runs fit; a larger one's first runs stay in memory, the rest go to files.
const memRunBudget = 128 << 20

// memRun is a run held in memory, in blocks of up to 1 MiB.
type memRun struct{ blocks [][]byte }

func (m *memRun) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if k := len(m.blocks); k == 0 || len(m.blocks[k-1]) == cap(m.blocks[k-1]) {
			m.blocks = append(m.blocks, make([]byte, 0, 1<<20))
		}
		b := &m.blocks[len(m.blocks)-1]
		c := min(len(p), cap(*b)-len(*b))
		*b = append(*b, p[:c]...)
		p = p[c:]
	}
	return n, nil
}

// reader reads the run from its start: a run is read once per pass over
// the records (plan makes two).
func (m *memRun) reader() io.Reader {
	rs := make([]io.Reader, len(m.blocks))
	for i, b := range m.blocks {
		rs[i] = bytes.NewReader(b)
	}
	return io.MultiReader(rs...)
}

// spilled is a run written in the background: its buffers, emptied, and
// its size.
type spilled struct {
	buf   []planRec
	lines lineArena
	size  int64
	err   error
}

// defaultRunRecords bounds the records a plan holds in memory at once
// (PlanOptions.RunRecords): about 50 MB of records.
const defaultRunRecords = 1 << 18

// defaultRunBytes bounds the carried input lines a plan holds in memory at
// once (PlanOptions.RunBytes).
const defaultRunBytes = 32 << 20

// newPlanRuns holds records for a sort by cmp, at most max records and
// maxBytes of carried lines in memory; hint is how many records are
// expected (an estimate is fine, 0 for unknown).
//
// Two runs are held at most, one filling while the other is written, so
// each takes half of max and maxBytes.
func newPlanRuns(cmp func(a, b *planRec) int, max, maxBytes, hint int, dir string) *planRuns {
	s := &planRuns{cmp: cmp, max: max, maxBytes: (maxBytes + 1) / 2, hint: hint, dir: dir, bound: max, boundBytes: maxBytes, memBudget: memRunBudget}
	if max < math.MaxInt { // retry jobs: one run, in memory
		s.max = (max + 1) / 2
	}
	return s
}

func byKeyLine(a, b *planRec) int {
	if c := strings.Compare(a.key, b.key); c != 0 {
		return c
	}
	return int(a.line - b.line)
}

func byCustomIDLine(a, b *planRec) int {
	if c := strings.Compare(a.customID, b.customID); c != 0 {
		return c
	}
	return int(a.line - b.line)
}

// add takes r; a non-nil line is r's input line, copied and carried with it.
// A record with lineage never carries its line.
func (s *planRuns) add(r planRec, line []byte) error {
	if s.buf == nil {
		// Sized once: growing a run's buffer by appends copied it several
		// times over (a tenth of a 1M plan's cpu, mostly the copies' page
		// faults and collections).
		// Never more than a plain run up front, though: a retry job's runs
		// are unbounded, and an estimate from the file's head can be far off.
		s.buf = prefault(make([]planRec, 0, min(s.max, defaultRunRecords, max(s.hint, 1<<10))))
	}
	r.data = nil
	if line != nil && r.lin == nil {
		r.data = s.lines.copy(line)
	}
	s.buf = append(s.buf, r)
	s.n++
	if r.lin == nil && (len(s.buf) >= s.max || s.lines.size >= s.maxBytes) {
		return s.spillAsync()
	}
	return nil
}

// spillAsync starts writing the buffered records as one run file, once the
// run before is written, and gives the other buffer to add.
func (s *planRuns) spillAsync() error {
	dst, err := s.runFile()
	if err != nil {
		return err
	}
	if s.spare == nil {
		s.spare = prefault(make([]planRec, 0, cap(s.buf)))
	}
	full, lines := s.buf, s.lines
	s.buf, s.lines = s.spare, s.spareLines
	s.spare, s.spareLines = nil, lineArena{}
	done := make(chan spilled, 1)
	s.spilling = done
	w := s.writer()
	go func() {
		size, err := s.writeRun(dst, full, w)
		clear(full) // drop the strings for the GC
		lines.reset()
		done <- spilled{buf: full[:0], lines: lines, size: size, err: err}
	}()
	return nil
}

// waitSpill waits for the run being written, if any, and takes its buffers
// back.
func (s *planRuns) waitSpill() error {
	if s.spilling == nil {
		return nil
	}
	r := <-s.spilling
	s.spilling = nil
	s.spare, s.spareLines = r.buf, r.lines
	if r.err != nil {
		return r.err
	}
	s.written(r.size)
	return nil
}

// written records the size of the run written last.
func (s *planRuns) written(size int64) {
	last := &s.runs[len(s.runs)-1]
	last.size = size
	if last.mem != nil {
		s.memBytes += size - last.est
	}
}

// spill sorts the buffered records and writes them as one run file, in line.
func (s *planRuns) spill() error {
	dst, err := s.runFile()
	if err != nil {
		return err
	}
	size, err := s.writeRun(dst, s.buf, s.writer())
	if err != nil {
		return err
	}
	s.written(size)
	clear(s.buf) // drop the strings for the GC
	s.buf = s.buf[:0]
	s.lines.reset()
	return nil
}

// runFile waits for the run being written, if any, and starts the next
// run of buf: in memory while the runs there stay within memRunBudget (its
// size estimated from the runs before, or at 128 bytes a record), else in a
// file (removed by close).
func (s *planRuns) runFile() (io.Writer, error) {
	if err := s.waitSpill(); err != nil {
		return nil, err
	}
	est := int64(len(s.buf))*128 + int64(s.lines.size)
	if k := len(s.runs); k > 0 && s.runs[k-1].recs > 0 {
		last := s.runs[k-1]
		est = max(last.size*int64(len(s.buf))/int64(last.recs), int64(s.lines.size))
	}
	if s.memBytes+est <= s.memBudget {
		m := &memRun{}
		s.runs = append(s.runs, runRef{mem: m, est: est, recs: len(s.buf)})
		s.memBytes += est
		return m, nil
	}
	f, err := os.CreateTemp(s.dir, "batchlake-plan-run-*")
	if err != nil {
		return nil, fmt.Errorf("plan: sort run: %w", err)
	}
	s.runs = append(s.runs, runRef{path: f.Name(), recs: len(s.buf)})
	return f, nil
}

// writer is the buffered writer of every run file in turn: a sort of small
// runs (a tight RunRecords or RunBytes) would otherwise clear a fresh
// megabyte per run. One run is written at a time.
func (s *planRuns) writer() *bufio.Writer {
	if s.w == nil {
		s.w = bufio.NewWriterSize(nil, 1<<20)
	}
	return s.w
}

// writeRun sorts recs and writes them to dst (closing it, if a file), and
// returns the run's size. It reads nothing of s but cmp, so it may run
// beside add.
func (s *planRuns) writeRun(dst io.Writer, recs []planRec, w *bufio.Writer) (int64, error) {
	sort.Sort(recSort{recs, s.cmp})
	// A file is written through w; a run in memory takes the bytes into its
	// blocks as they come.
	out := dst
	f, isFile := dst.(*os.File)
	if isFile {
		w.Reset(f)
		out = w
	}
	var scratch []byte
	var size int64
	for i := range recs {
		var prev *planRec
		if i > 0 {
			prev = &recs[i-1]
		}
		scratch = encodePlanRec(scratch[:0], &recs[i], prev)
		out.Write(scratch)
		out.Write(recs[i].data)
		size += int64(len(scratch) + len(recs[i].data))
	}
	var err error
	if isFile {
		err = w.Flush()
		w.Reset(nil)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return 0, fmt.Errorf("plan: sort run: %w", err)
	}
	return size, nil
}

// sort finishes adding; each may be called any number of times after it.
func (s *planRuns) sort() error {
	if err := s.waitSpill(); err != nil {
		return err
	}
	if len(s.runs) == 0 {
		sort.Sort(recSort{s.buf, s.cmp})
		return nil
	}
	if len(s.buf) > 0 {
		if err := s.spill(); err != nil {
			return err
		}
	}
	s.buf, s.spare = nil, nil
	s.lines, s.spareLines = lineArena{}, lineArena{}
	s.w = nil
	return nil
}

// each calls fn with every record in cmp order, without carried lines
// (r.data may be nil when a record carries one). fn must not keep r.
func (s *planRuns) each(fn func(r *planRec) error) error {
	return s.iterate(false, fn)
}

// eachLine is each with the carried lines in r.data, valid until fn returns.
func (s *planRuns) eachLine(fn func(r *planRec) error) error {
	return s.iterate(true, fn)
}

func (s *planRuns) iterate(lines bool, fn func(r *planRec) error) error {
	if len(s.runs) == 0 {
		for i := range s.buf {
			if err := fn(&s.buf[i]); err != nil {
				return err
			}
		}
		return nil
	}
	h := &runHeap{cmp: s.cmp}
	defer h.close()
	for i, run := range s.runs {
		rr := &runReader{name: fmt.Sprintf("in memory #%d", i), lines: lines}
		var src io.Reader
		if run.mem != nil {
			src = run.mem.reader()
		} else {
			f, err := os.Open(run.path)
			if err != nil {
				return fmt.Errorf("plan: sort run: %w", err)
			}
			src, rr.f, rr.name = f, f, run.path
		}
		rr.r = bufio.NewReaderSize(src, runBuffer(len(s.runs), run.size))
		h.all = append(h.all, rr)
		ok, err := rr.next()
		if err != nil {
			return err
		}
		if ok {
			h.rs = append(h.rs, rr)
		}
	}
	heap.Init(h)
	for len(h.rs) > 0 {
		top := h.rs[0]
		if err := fn(&top.cur); err != nil {
			return err
		}
		ok, err := top.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return nil
}

// runBuffer is the read buffer of each of n run files merged, for a file of
// size bytes: 256 KiB, less when there are many (a shuffled 10M input makes
// ~200 runs), so that the merge's buffers stay near 16 MiB in all, and never
// more than the file (small runs would clear megabytes they do not fill).
func runBuffer(n int, size int64) int {
	return int(min(size+1, int64(max(32<<10, min(256<<10, (16<<20)/max(n, 1))))))
}

// close removes the run files.
func (s *planRuns) close() {
	s.waitSpill()
	for _, r := range s.runs {
		if r.mem == nil {
			os.Remove(r.path)
		}
	}
	s.runs, s.memBytes, s.buf, s.lines, s.w = nil, 0, nil, lineArena{}, nil
	s.spare, s.spareLines = nil, lineArena{}
}

type runReader struct {
	f     *os.File // nil for a run in memory
	name  string   // the file's, for errors
	r     *bufio.Reader
	cur   planRec
	lines bool   // read carried lines (else skip them)
	line  []byte // cur's carried line, reused
}

func (rr *runReader) next() (bool, error) {
	err := decodePlanRec(rr.r, &rr.cur, rr.lines, &rr.line)
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("plan: read sort run %s: %w", rr.name, err)
	}
	return true, nil
}

type runHeap struct {
	cmp func(a, b *planRec) int
	rs  []*runReader
	all []*runReader
}

func (h *runHeap) Len() int           { return len(h.rs) }
func (h *runHeap) Less(i, j int) bool { return h.cmp(&h.rs[i].cur, &h.rs[j].cur) < 0 }
func (h *runHeap) Swap(i, j int)      { h.rs[i], h.rs[j] = h.rs[j], h.rs[i] }
func (h *runHeap) Push(x any)         { h.rs = append(h.rs, x.(*runReader)) }
func (h *runHeap) Pop() any {
	x := h.rs[len(h.rs)-1]
	h.rs = h.rs[:len(h.rs)-1]
	return x
}
func (h *runHeap) close() {
	for _, rr := range h.all {
		if rr.f != nil {
			rr.f.Close()
		}
	}
}

// A run record: key, custom id (empty length-plus-one 0 when equal to the
// key), line, offset, length (shifted left two, over the flags runCarried
// and runSameCfg), output limit plus one, the request and record id digests,
// the model config digest unless runSameCfg, then the carried line if any.
//
// encodePlanRec appends all but the carried line. prev is the record
// written before r in its run, nil for the first: a model config digest
// equal to prev's (the lines of a file almost always share one) is a flag
// instead of its 32 bytes, a quarter of a record.
func encodePlanRec(b []byte, r *planRec, prev *planRec) []byte {
	b = binary.AppendUvarint(b, uint64(len(r.key)))
	b = append(b, r.key...)
	if r.customID == r.key {
		b = binary.AppendUvarint(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(r.customID))+1)
		b = append(b, r.customID...)
	}
	b = binary.AppendUvarint(b, uint64(r.line))
	b = binary.AppendUvarint(b, uint64(r.off))
	flags := uint64(0)
	if r.data != nil {
		flags |= runCarried
	}
	sameCfg := prev != nil && prev.cfg == r.cfg
	if sameCfg {
		flags |= runSameCfg
	}
	b = binary.AppendUvarint(b, uint64(r.n)<<2|flags)
	b = binary.AppendUvarint(b, uint64(int64(r.out)+1))
	b = append(b, r.req[:]...)
	b = append(b, r.rid[:]...)
	if sameCfg {
		return b
	}
	return append(b, r.cfg[:]...)
}

// The flags of an encoded record, with its line's length.
const (
	runCarried = 1 << iota // its input line follows
	runSameCfg             // its model config digest is the record's before
)

// decodePlanRec reads a record into r, which holds the record before it in
// the run (for its model config digest, when the same); its carried line, if
// any, into *line when lines is set (r.data then aliases *line), skipped
// otherwise.
func decodePlanRec(br *bufio.Reader, r *planRec, lines bool, line *[]byte) error {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return err // io.EOF at a record boundary: the run's end
	}
	str := func(n uint64) (string, error) {
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return "", err
		}
		return string(b), nil
	}
	if r.key, err = str(n); err != nil {
		return unexpected(err)
	}
	if n, err = binary.ReadUvarint(br); err != nil {
		return unexpected(err)
	}
	if n == 0 {
		r.customID = r.key
	} else if r.customID, err = str(n - 1); err != nil {
		return unexpected(err)
	}
	var v [4]uint64
	for i := range v {
		if v[i], err = binary.ReadUvarint(br); err != nil {
			return unexpected(err)
		}
	}
	r.line, r.off, r.n, r.out, r.lin, r.data = int64(v[0]), int64(v[1]), int32(v[2]>>2), int32(int64(v[3])-1), nil, nil
	ds := []*lake.Digest{&r.req, &r.rid, &r.cfg}
	if v[2]&runSameCfg != 0 {
		ds = ds[:2]
	}
	for _, d := range ds {
		if _, err := io.ReadFull(br, d[:]); err != nil {
			return unexpected(err)
		}
	}
	if v[2]&runCarried == 0 {
		return nil
	}
	if !lines {
		if _, err := br.Discard(int(r.n)); err != nil {
			return unexpected(err)
		}
		return nil
	}
	if cap(*line) < int(r.n) {
		*line = make([]byte, r.n)
	}
	r.data = (*line)[:r.n]
	if _, err := io.ReadFull(br, r.data); err != nil {
		return unexpected(err)
	}
	return nil
}

// lineArena holds copies of input lines in large blocks, reused after a
// spill, instead of one allocation per line.
type lineArena struct {
	blocks [][]byte
	cur    int // the block being filled
	size   int // bytes held
}

const arenaBlock = 1 << 20

// copy returns a copy of p, never nil, valid until reset.
func (a *lineArena) copy(p []byte) []byte {
	a.size += len(p)
	if len(p) > arenaBlock/4 {
		return append(make([]byte, 0, len(p)), p...) // a long line on its own
	}
	for {
		if a.cur == len(a.blocks) {
			a.blocks = append(a.blocks, make([]byte, 0, arenaBlock))
		}
		b := a.blocks[a.cur]
		if cap(b)-len(b) >= len(p) {
			n := len(b)
			a.blocks[a.cur] = append(b, p...)
			return a.blocks[a.cur][n : n+len(p) : n+len(p)]
		}
		a.cur++
	}
}

func (a *lineArena) reset() {
	for i := range a.blocks {
		a.blocks[i] = a.blocks[i][:0]
	}
	a.cur, a.size = 0, 0
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

type recSort struct {
	r   []planRec
	cmp func(a, b *planRec) int
}

func (s recSort) Len() int           { return len(s.r) }
func (s recSort) Less(i, j int) bool { return s.cmp(&s.r[i], &s.r[j]) < 0 }
func (s recSort) Swap(i, j int)      { s.r[i], s.r[j] = s.r[j], s.r[i] }

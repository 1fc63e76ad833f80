package lake

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"
)

// ExpectedCols holds consecutive rows of an expected table file, a column
// at a time: index i of each slice is the same row. The strings of a page
// share one allocation.
type ExpectedCols struct {
	RecordID, BusinessKey, ShardID, CustomID, ParentJobKey []string
	Attempt                                                []int32
}

// Len is the number of rows held.
func (c *ExpectedCols) Len() int { return len(c.CustomID) }

// ExpectedCursor reads the record columns of one local expected table file
// (those of ExpectedCols) in row order, straight from its pages. Reconcile
// reads every expected row this way to write the outcomes table, which
// copies them: DuckDB's scan of the same columns, handed to Go through
// Arrow a value at a time, took two to three times as long.
type ExpectedCursor struct {
	f       *os.File
	path    string
	rows    int64 // in the file
	read    int64 // handed out so far
	strs    [5]*columnCursor
	attempt *columnCursor
}

// expectedStringCols are the text columns an ExpectedCursor reads, in the
// order of ExpectedCursor.strs.
var expectedStringCols = [5]string{"record_id", "business_key", "shard_id", "custom_id", "parent_job_key"}

// OpenExpectedCursor opens the expected table file at path (a local file)
// for reading from its first row. Close it when done.
func OpenExpectedCursor(path string) (*ExpectedCursor, error) {
	f, pf, err := openExpected(path)
	if err != nil {
		return nil, err
	}
	c := &ExpectedCursor{f: f, path: path, rows: pf.NumRows()}
	for i, name := range expectedStringCols {
		if c.strs[i], err = newColumnCursor(pf, path, name, parquet.ByteArray); err != nil {
			f.Close()
			return nil, err
		}
	}
	if c.attempt, err = newColumnCursor(pf, path, "attempt", parquet.Int32); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// Rows is the number of rows in the file.
func (c *ExpectedCursor) Rows() int64 { return c.rows }

// IDsOnly makes Next read only RecordID, CustomID and Attempt, leaving the
// other columns of ExpectedCols empty: for a reader that takes the rest
// elsewhere, or does without. Call it before the first Next.
func (c *ExpectedCursor) IDsOnly() {
	for i, name := range expectedStringCols {
		if name != "record_id" && name != "custom_id" {
			c.strs[i] = nil
		}
	}
}

// Next replaces dst's rows by the file's next n rows; it fails if the file
// has fewer left.
func (c *ExpectedCursor) Next(n int, dst *ExpectedCols) error {
	if int64(n) > c.rows-c.read {
		return fmt.Errorf("expected file %s: %d rows from row %d wanted, it has %d", c.path, n, c.read, c.rows)
	}
	cols := [5]*[]string{&dst.RecordID, &dst.BusinessKey, &dst.ShardID, &dst.CustomID, &dst.ParentJobKey}
	for i, cc := range c.strs {
		if cc == nil {
			*cols[i] = (*cols[i])[:0]
			continue
		}
		s, err := cc.strings((*cols[i])[:0], n)
		if err != nil {
			return err
		}
		*cols[i] = s
	}
	a, err := c.attempt.int32s(dst.Attempt[:0], n)
	if err != nil {
		return err
	}
	dst.Attempt = a
	c.read += int64(n)
	return nil
}

// Close closes the file.
func (c *ExpectedCursor) Close() error { return c.f.Close() }

// openExpected opens the local expected table file at path for reading its
// columns a page at a time. Close the file when done.
func openExpected(path string) (*os.File, *parquet.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(64<<10))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("expected file %s: %w", path, err)
	}
	return f, pf, nil
}

// ScanCustomIDs calls fn with each custom_id of the local expected table
// file at path, in row order. id is valid only during the call: the values
// are not copied out of parquet-go's page buffers (a dictionary page's values
// once), for a reader that only looks them up.
func ScanCustomIDs(path string, fn func(id []byte)) error {
	f, pf, err := openExpected(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return scanColumn(pf, path, "custom_id", fn)
}

// scanColumn calls fn with each value of the required byte-array column
// name of the expected table file pf (named path in errors), in row order;
// the value is valid only during the call.
func scanColumn(pf *parquet.File, path, name string, fn func(v []byte)) error {
	cc, err := newColumnCursor(pf, path, name, parquet.ByteArray)
	if err != nil {
		return err
	}
	var seen int64
	for _, chunk := range cc.chunks {
		n, err := scanChunk(chunk, fn)
		if err != nil {
			return fmt.Errorf("expected file %s: column %s: %w", path, name, err)
		}
		seen += n
	}
	if seen != pf.NumRows() {
		return fmt.Errorf("expected file %s: %d values of %s in a file of %d rows", path, seen, name, pf.NumRows())
	}
	return nil
}

// expectedKeyRange reads the business keys of the expected table file
// whose bytes are b (named key in errors): their least and greatest, and
// how many rows there are (none: an empty range).
func expectedKeyRange(key string, b []byte) (r KeyRange, rows int64, err error) {
	pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return KeyRange{}, 0, fmt.Errorf("expected file %s: %w", key, err)
	}
	var first, last []byte
	err = scanColumn(pf, key, "business_key", func(v []byte) {
		if rows == 0 || bytes.Compare(v, first) < 0 {
			first = append(first[:0], v...)
		}
		if rows == 0 || bytes.Compare(v, last) > 0 {
			last = append(last[:0], v...)
		}
		rows++
	})
	return KeyRange{First: string(first), Last: string(last)}, rows, err
}

// scanChunk calls fn with each value of a required byte-array column chunk
// and returns how many there were.
func scanChunk(chunk parquet.ColumnChunk, fn func(v []byte)) (n int64, err error) {
	pages := chunk.Pages()
	defer func() {
		if cerr := pages.Close(); err == nil {
			err = cerr
		}
	}()
	var dict [][]byte // the chunk's dictionary, once read
	for {
		pg, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		err = scanPage(pg, &dict, fn)
		n += pg.NumValues()
		parquet.Release(pg)
		if err != nil {
			return n, err
		}
	}
}

// scanPage calls fn with each value of a page of a required byte-array
// column, reading its chunk's dictionary into dict on first use.
func scanPage(pg parquet.Page, dict *[][]byte, fn func(v []byte)) error {
	if pg.NumNulls() != 0 {
		return errors.New("NULLs in a required column")
	}
	data := pg.Data()
	d := pg.Dictionary()
	if d == nil {
		vals, offs := data.ByteArray()
		for i := 0; i+1 < len(offs); i++ {
			fn(vals[offs[i]:offs[i+1]])
		}
		return nil
	}
	if *dict == nil {
		dd := d.Page().Data()
		vals, offs := dd.ByteArray()
		for i := 0; i+1 < len(offs); i++ {
			*dict = append(*dict, vals[offs[i]:offs[i+1]])
		}
	}
	for _, k := range data.Int32() {
		if k < 0 || int(k) >= len(*dict) {
			return fmt.Errorf("index %d past its dictionary of %d", k, len(*dict))
		}
		fn((*dict)[k])
	}
	return nil
}

// columnCursor reads one required column of a Parquet file in row order,
// across its row groups and pages. A page's values are copied out as it is
// read: parquet-go reuses its buffers.
type columnCursor struct {
	path, name string
	chunks     []parquet.ColumnChunk // one a row group, in order
	next       int                   // the chunk to open after pages
	pages      parquet.Pages

	kind     parquet.Kind
	at, n    int      // the next value of the current page, and its values
	text     string   // a page of byte arrays: its values, one after another
	offs     []uint32 // value i is text[offs[i]:offs[i+1]]
	indexed  bool     // the page holds indexes into its chunk's dictionary
	dict     []string // the chunk's dictionary of byte arrays, once read
	dictInts []int32  // the chunk's dictionary of INT32, once read
	idx      []int32  // an indexed page's indexes
	ints     []int32  // a page of INT32
}

func newColumnCursor(pf *parquet.File, path, name string, kind parquet.Kind) (*columnCursor, error) {
	leaf, ok := pf.Schema().Lookup(name)
	if !ok {
		return nil, fmt.Errorf("expected file %s: no column %s", path, name)
	}
	if k := leaf.Node.Type().Kind(); k != kind {
		return nil, fmt.Errorf("expected file %s: column %s is %s, not %s", path, name, k, kind)
	}
	c := &columnCursor{path: path, name: name, kind: kind}
	for _, rg := range pf.RowGroups() {
		c.chunks = append(c.chunks, rg.ColumnChunks()[leaf.ColumnIndex])
	}
	return c, nil
}

// load makes the column's next page current.
func (c *columnCursor) load() error {
	for {
		if c.pages == nil {
			if c.next == len(c.chunks) {
				return fmt.Errorf("expected file %s: column %s ends early", c.path, c.name)
			}
			c.pages, c.dict, c.dictInts = c.chunks[c.next].Pages(), nil, nil
			c.next++
		}
		pg, err := c.pages.ReadPage()
		if errors.Is(err, io.EOF) {
			err = c.pages.Close()
			c.pages = nil
			if err != nil {
				return fmt.Errorf("expected file %s: column %s: %w", c.path, c.name, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("expected file %s: column %s: %w", c.path, c.name, err)
		}
		err = c.copyPage(pg)
		// The page's buffers go back to parquet-go's pool for the next
		// page: its values were copied. Left to the garbage collector, they
		// doubled what reading allocates, and under reconcile's limit on the
		// Go heap that was as many collections again.
		parquet.Release(pg)
		if err != nil || c.n > 0 {
			return err
		}
	}
}

// copyPage makes pg's values the current page's.
func (c *columnCursor) copyPage(pg parquet.Page) error {
	if pg.NumNulls() != 0 {
		return fmt.Errorf("expected file %s: column %s has NULLs", c.path, c.name)
	}
	c.at, c.n = 0, int(pg.NumValues())
	data := pg.Data()
	c.indexed = pg.Dictionary() != nil
	if c.indexed {
		size := c.readDictionary(pg.Dictionary())
		c.idx = append(c.idx[:0], data.Int32()...)
		if len(c.idx) != c.n {
			return fmt.Errorf("expected file %s: column %s: a page of %d values holds %d", c.path, c.name, c.n, len(c.idx))
		}
		for _, k := range c.idx {
			if k < 0 || int(k) >= size {
				return fmt.Errorf("expected file %s: column %s: index %d past its dictionary of %d", c.path, c.name, k, size)
			}
		}
	} else if c.kind == parquet.ByteArray {
		vals, offs := data.ByteArray()
		c.text, c.offs = string(vals), append(c.offs[:0], offs...)
		if len(c.offs) != c.n+1 {
			return fmt.Errorf("expected file %s: column %s: a page of %d values holds %d", c.path, c.name, c.n, len(c.offs)-1)
		}
	} else {
		c.ints = append(c.ints[:0], data.Int32()...)
		if len(c.ints) != c.n {
			return fmt.Errorf("expected file %s: column %s: a page of %d values holds %d", c.path, c.name, c.n, len(c.ints))
		}
	}
	return nil
}

// readDictionary copies the chunk's dictionary once and returns its size.
func (c *columnCursor) readDictionary(d parquet.Dictionary) int {
	if c.kind == parquet.Int32 {
		if c.dictInts == nil {
			dd := d.Page().Data()
			c.dictInts = append([]int32{}, dd.Int32()...)
		}
		return len(c.dictInts)
	}
	if c.dict == nil {
		dd := d.Page().Data()
		vals, offs := dd.ByteArray()
		text := string(vals)
		c.dict = make([]string, 0, max(len(offs)-1, 0))
		for i := 0; i+1 < len(offs); i++ {
			c.dict = append(c.dict, text[offs[i]:offs[i+1]])
		}
	}
	return len(c.dict)
}

// strings appends the column's next n values to dst.
func (c *columnCursor) strings(dst []string, n int) ([]string, error) {
	return take(c, dst, n, func(i int) string {
		if c.indexed {
			return c.dict[c.idx[i]]
		}
		return c.text[c.offs[i]:c.offs[i+1]]
	})
}

// int32s appends the column's next n values to dst.
func (c *columnCursor) int32s(dst []int32, n int) ([]int32, error) {
	return take(c, dst, n, func(i int) int32 {
		if c.indexed {
			return c.dictInts[c.idx[i]]
		}
		return c.ints[i]
	})
}

// take appends the column's next n values to dst, value(i) being value i of
// the current page, loading pages as it goes.
func take[T any](c *columnCursor, dst []T, n int, value func(i int) T) ([]T, error) {
	for n > 0 {
		if c.at == c.n {
			if err := c.load(); err != nil {
				return dst, err
			}
		}
		k := min(n, c.n-c.at)
		for i := c.at; i < c.at+k; i++ {
			dst = append(dst, value(i))
		}
		c.at += k
		n -= k
	}
	return dst, nil
}

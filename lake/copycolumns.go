package lake

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// A table whose rows are, in order, the rows of other table files can take
// the columns it repeats from them instead of encoding those values again:
// reconcile's outcomes carry each expected record's ids and keys, in the
// expected files' order. Such a column's chunks are copied byte for byte
// from the sources' row groups, the table's own row groups cut where
// theirs are; the rows are written with the column empty, and the commit
// assembles the file from the chunks of both (assembleCopied).
//
// A column is copied only where the table's writer would have written the
// same bytes from the same values: the sources were written by a table
// format that writes such columns as today's (copySince), the column has
// the same type, codec and page encodings there, a page index and no bloom
// filter, and every source row group fits in one of the table's. Otherwise
// CopyColumns says no and the values are written as usual.

// copySpec is what a TableWriter's CopyColumns set up.
type copySpec struct {
	cols    []int // the copied columns, by index in the table's schema
	sources []copySource
	groups  []int64 // the rows of each row group to write, the sources' in order
	next    int     // the row group being written
	left    int64   // its rows not written yet
}

// copySource is one source file and where the copied columns are in it.
type copySource struct {
	path string
	md   *format.FileMetaData
	cols []int // cols[i]: index in this file of copySpec.cols[i]
}

// CopyColumns makes the named columns of the table ones taken from sources
// (local table files) at the commit, if they can be (above): the caller then
// writes those columns empty (their zero value), exactly as many rows as the
// sources hold, row i of the table being row i of the sources in order. It
// returns false, changing nothing, when they cannot. Call it before the
// first row is written.
func (t *TableWriter[T]) CopyColumns(columns, sources []string) (bool, error) {
	if t.rows > 0 || t.split > 0 || t.fill != "" || t.copy != nil {
		return false, fmt.Errorf("table %s: internal error: CopyColumns after rows were written, or of a split or filled table", t.table)
	}
	if len(columns) == 0 || len(sources) == 0 {
		return false, nil
	}
	probe, err := probeTable[T]()
	if err != nil {
		return false, fmt.Errorf("table %s: %w", t.table, err)
	}
	c := &copySpec{}
	for _, name := range columns {
		i := leafIndex(probe, name)
		if i < 0 {
			return false, fmt.Errorf("table %s: internal error: no column %s to copy", t.table, name)
		}
		c.cols = append(c.cols, i)
	}
	for _, path := range sources {
		s, ok, err := openCopySource(path, probe, c.cols)
		if err != nil {
			return false, fmt.Errorf("table %s: %w", t.table, err)
		}
		if !ok {
			return false, nil
		}
		for _, rg := range s.md.RowGroups {
			if rg.NumRows <= 0 || rg.NumRows > t.groupRows {
				return false, nil
			}
			c.groups = append(c.groups, rg.NumRows)
		}
		c.sources = append(c.sources, s)
	}
	// The file is assembled at the commit from the one written here, which
	// is hashed only as assembled.
	o, err := NewUnhashedObjectWriter(t.tmpDir, "batchlake-"+t.table+"-*.parquet")
	if err != nil {
		return false, fmt.Errorf("table %s: %w", t.table, err)
	}
	t.o.Abort()
	t.o = o
	t.w.Reset(o)
	c.left = c.groups[0]
	t.copy = c
	return true, nil
}

// writeCopied writes rows of a table with copied columns, ending a row group
// where the sources' row groups end.
func (t *TableWriter[T]) writeCopied(rows []T) error {
	c := t.copy
	for len(rows) > 0 {
		if c.next == len(c.groups) {
			return fmt.Errorf("table %s: internal error: more rows than the %d of the files its columns are copied from", t.table, t.rows)
		}
		k := min(int64(len(rows)), c.left)
		if _, err := t.w.Write(rows[:k]); err != nil {
			return fmt.Errorf("table %s: %w", t.table, err)
		}
		rows = rows[k:]
		t.rows += k
		if c.left -= k; c.left == 0 {
			if err := t.w.Flush(); err != nil {
				return fmt.Errorf("table %s: %w", t.table, err)
			}
			if c.next++; c.next < len(c.groups) {
				c.left = c.groups[c.next]
			}
		}
	}
	return nil
}

// copySince is the first table format whose files' columns are written as
// today's: page headers without min and max (7), integers delta-coded (8),
// pages of hex digests Huffman-coded by the codec (11), every other page
// compressed by libzstd at level 1 (12). A chunk of an older file would
// still be a valid chunk, but not the bytes this writer makes from its
// values.
const copySince = 12

// tableFormatOf is the table format named by a file's created_by
// ("batchlake version 12(build )").
func tableFormatOf(createdByField string) (int, bool) {
	rest, ok := strings.CutPrefix(createdByField, createdBy+" version ")
	if !ok {
		return 0, false
	}
	digits, _, _ := strings.Cut(rest, "(")
	v, err := strconv.Atoi(digits)
	return v, err == nil
}

// createdByOf is the created_by of table format v, given today's.
func createdByOf(today string, v int) string {
	return strings.Replace(today, " version "+createdByVer, " version "+strconv.Itoa(v), 1)
}

// probeTable is the footer of a one-row table file of T as a TableWriter
// writes it: the format version, schema, types, codecs and encodings of its
// columns.
func probeTable[T any]() (*format.FileMetaData, error) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, tableWriterOptions(rowGroupRows)...)
	if _, err := w.Write(make([]T, 1)); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, err
	}
	return pf.Metadata(), nil
}

// leafIndex is the index of the top-level column name among the columns of
// a flat table's metadata, or -1.
func leafIndex(md *format.FileMetaData, name string) int {
	if len(md.RowGroups) == 0 {
		return -1
	}
	for i, c := range md.RowGroups[0].Columns {
		if len(c.MetaData.PathInSchema) == 1 && c.MetaData.PathInSchema[0] == name {
			return i
		}
	}
	return -1
}

// leafElement is the schema element of a flat table's column named name.
func leafElement(md *format.FileMetaData, name string) (format.SchemaElement, bool) {
	for _, e := range md.Schema[1:] {
		if e.Name == name && !e.NumChildren.Valid {
			return e, true
		}
	}
	return format.SchemaElement{}, false
}

// openCopySource reads the footer of the table file at path and says
// whether the columns cols of probe can be copied from it.
func openCopySource(path string, probe *format.FileMetaData, cols []int) (copySource, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return copySource{}, false, err
	}
	defer f.Close()
	md, _, err := readFooter(f)
	if err != nil {
		return copySource{}, false, err
	}
	s := copySource{path: path, md: md}
	if v, ok := tableFormatOf(md.CreatedBy); !ok || v < copySince || md.CreatedBy != createdByOf(probe.CreatedBy, v) || len(md.RowGroups) == 0 {
		return s, false, nil
	}
	for _, pc := range cols {
		want := &probe.RowGroups[0].Columns[pc].MetaData
		name := want.PathInSchema[0]
		i := leafIndex(md, name)
		we, _ := leafElement(probe, name)
		se, ok := leafElement(md, name)
		if i < 0 || !ok || !reflect.DeepEqual(we, se) {
			return s, false, nil
		}
		for _, rg := range md.RowGroups {
			got := &rg.Columns[i]
			m := &got.MetaData
			if got.FilePath != "" || got.CryptoMetadata.Value != nil || got.ColumnIndexOffset <= 0 || got.OffsetIndexOffset <= 0 ||
				m.Type != want.Type || m.Codec != want.Codec || m.BloomFilterOffset != 0 || m.NumValues != rg.NumRows ||
				!sameEncodings(m.EncodingStats, want.EncodingStats) {
				return s, false, nil
			}
		}
		s.cols = append(s.cols, i)
	}
	return s, true, nil
}

// sameEncodings says whether a chunk's pages are of the kinds and encodings
// of another's (a dictionary page or not, data pages of one version and
// encoding), whatever their number.
func sameEncodings(a, b []format.PageEncodingStats) bool {
	kinds := func(s []format.PageEncodingStats) []format.PageEncodingStats {
		var k []format.PageEncodingStats
		for _, p := range s {
			p.Count = 0
			if !slices.Contains(k, p) {
				k = append(k, p)
			}
		}
		slices.SortFunc(k, func(x, y format.PageEncodingStats) int {
			if x.PageType != y.PageType {
				return int(x.PageType) - int(y.PageType)
			}
			return int(x.Encoding) - int(y.Encoding)
		})
		return k
	}
	return len(a) > 0 && slices.Equal(kinds(a), kinds(b))
}

// readFooter reads the metadata of the Parquet file f and where it starts.
func readFooter(f *os.File) (*format.FileMetaData, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := st.Size()
	var tail [8]byte
	if size < 12 {
		return nil, 0, fmt.Errorf("%s is not a Parquet file", f.Name())
	}
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return nil, 0, err
	}
	footerLen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if string(tail[4:]) != "PAR1" || footerLen > size-12 {
		return nil, 0, fmt.Errorf("%s has no Parquet footer", f.Name())
	}
	footerAt := size - 8 - footerLen
	footer := make([]byte, footerLen)
	if _, err := f.ReadAt(footer, footerAt); err != nil {
		return nil, 0, err
	}
	md := new(format.FileMetaData)
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), footer, md); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return md, footerAt, nil
}

// footerBytes is the end of a Parquet file of metadata md: the metadata,
// its length and the magic bytes (what readFooter reads).
func footerBytes(md *format.FileMetaData) ([]byte, error) {
	b, err := thrift.Marshal(new(thrift.CompactProtocol), md)
	if err != nil {
		return nil, err
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(b)))
	return append(b, "PAR1"...), nil
}

// moveChunk moves the offsets of column chunk c and of its pages (offsets,
// its offset index) by shift bytes: its bytes are written shift bytes
// further on in the new file than in the one they come from.
func moveChunk(c *format.ColumnChunk, offsets *format.OffsetIndex, shift int64) {
	m := &c.MetaData
	if c.FileOffset != 0 {
		c.FileOffset += shift
	}
	m.DataPageOffset += shift
	if m.DictionaryPageOffset > 0 {
		m.DictionaryPageOffset += shift
	}
	for i := range offsets.PageLocations {
		offsets.PageLocations[i].Offset += shift
	}
}

// chunkStart is where a column chunk's bytes start: its dictionary page, or
// its first data page.
func chunkStart(c *format.ColumnChunk) int64 {
	start := c.MetaData.DataPageOffset
	if d := c.MetaData.DictionaryPageOffset; d > 0 {
		start = min(start, d)
	}
	return start
}

// assembleCopied writes to out the table file made of shell (the table as
// written, the copied columns empty) with the copied columns' chunks of c's
// sources in their place: each row group's chunks in column order, then
// the page index (every column index, then every offset index, as the
// writer lays them out) and the footer.
func assembleCopied(shell *os.File, c *copySpec, out io.Writer) error {
	md, _, err := readFooter(shell)
	if err != nil {
		return err
	}
	if len(md.RowGroups) != len(c.groups) {
		return fmt.Errorf("%d row groups written, the sources have %d", len(md.RowGroups), len(c.groups))
	}
	files := make([]*os.File, len(c.sources))
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i, s := range c.sources {
		if files[i], err = os.Open(s.path); err != nil {
			return err
		}
	}
	w := &countingWriter{w: out}
	if _, err := io.WriteString(w, "PAR1"); err != nil {
		return err
	}
	// Each chunk's page index entries, read from the file it comes from.
	type index struct {
		column []byte
		offset format.OffsetIndex
	}
	indexes := make([][]index, len(md.RowGroups))
	readIndex := func(f *os.File, c *format.ColumnChunk) (index, error) {
		col := make([]byte, c.ColumnIndexLength)
		off := make([]byte, c.OffsetIndexLength)
		if _, err := f.ReadAt(col, c.ColumnIndexOffset); err != nil {
			return index{}, err
		}
		if _, err := f.ReadAt(off, c.OffsetIndexOffset); err != nil {
			return index{}, err
		}
		x := index{column: col}
		if err := thrift.Unmarshal(new(thrift.CompactProtocol), off, &x.offset); err != nil {
			return index{}, fmt.Errorf("%s: offset index: %w", f.Name(), err)
		}
		return x, nil
	}
	src, srcGroup := 0, 0
	for g := range md.RowGroups {
		for srcGroup == len(c.sources[src].md.RowGroups) {
			src, srcGroup = src+1, 0
		}
		s := c.sources[src]
		rg := &md.RowGroups[g]
		if rg.NumRows != s.md.RowGroups[srcGroup].NumRows {
			return fmt.Errorf("row group %d has %d rows, its source's (%s) %d", g, rg.NumRows, s.path, s.md.RowGroups[srcGroup].NumRows)
		}
		indexes[g] = make([]index, len(rg.Columns))
		rg.TotalByteSize, rg.TotalCompressedSize = 0, 0
		for j := range rg.Columns {
			from, chunk := shell, rg.Columns[j]
			if k := slices.Index(c.cols, j); k >= 0 {
				from, chunk = files[src], s.md.RowGroups[srcGroup].Columns[s.cols[k]]
			}
			start := chunkStart(&chunk)
			shift := w.n - start
			if indexes[g][j], err = readIndex(from, &chunk); err != nil {
				return err
			}
			if _, err := io.Copy(w, io.NewSectionReader(from, start, chunk.MetaData.TotalCompressedSize)); err != nil {
				return err
			}
			moveChunk(&chunk, &indexes[g][j].offset, shift)
			m := &chunk.MetaData
			if j == 0 && rg.FileOffset != 0 {
				rg.FileOffset = start + shift
			}
			rg.TotalByteSize += m.TotalUncompressedSize
			rg.TotalCompressedSize += m.TotalCompressedSize
			rg.Columns[j] = chunk
		}
		srcGroup++
	}
	for _, offsets := range []bool{false, true} {
		for g := range md.RowGroups {
			for j := range md.RowGroups[g].Columns {
				chunk := &md.RowGroups[g].Columns[j]
				b := indexes[g][j].column
				if offsets {
					if b, err = thrift.Marshal(new(thrift.CompactProtocol), &indexes[g][j].offset); err != nil {
						return err
					}
					chunk.OffsetIndexOffset, chunk.OffsetIndexLength = w.n, int32(len(b))
				} else {
					chunk.ColumnIndexOffset, chunk.ColumnIndexLength = w.n, int32(len(b))
				}
				if _, err := w.Write(b); err != nil {
					return err
				}
			}
		}
	}
	b, err := footerBytes(md)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

package lake

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// A table file can be written before the value of one of its columns is
// known, when that column holds one value in every row: plan writes a job's
// expected rows as it reads them, and the job key they all carry is known
// only once the last record is read. The rows are written with the column
// empty; fillColumn then gives each row group a chunk of the column holding
// the value, written after the row groups in place of the page index, which
// follows them again, and a new footer that points to those chunks. The
// empty chunks stay where they were, unreferenced (about 80 bytes a row
// group): a reader finds every column chunk by the footer's offsets, never
// by its place in the file.

// fillColumn fills the column named name of the Parquet file f (complete,
// written by a TableWriter of schema with opts, the column empty in every
// row) with value, as described above. It returns the file's new size.
func fillColumn(f *os.File, schema *parquet.Schema, opts []parquet.WriterOption, name, value string) (int64, error) {
	md, footerAt, err := readFooter(f)
	if err != nil {
		return 0, fmt.Errorf("fill column %s: %w", name, err)
	}
	col := -1
	for i, c := range schema.Columns() {
		if len(c) == 1 && c[0] == name {
			col = i
		}
	}
	if col < 0 || len(md.RowGroups) > 0 && len(md.RowGroups[0].Columns) != len(schema.Columns()) {
		return 0, fmt.Errorf("fill column %s: not a column of the table", name)
	}
	if col == 0 {
		// parquet-java (Spark, Hive) takes where a row group's first column
		// starts for where the row group starts, and gives it to the split
		// that holds its middle: moved after the row groups, that middle
		// would fall past the end of the file, and the rows be read by none.
		return 0, fmt.Errorf("fill column %s: the first column of a table stays in its row groups", name)
	}
	// The page index (every chunk's column and offset index, after the
	// row groups) is read, and written again after the new chunks: readers
	// such as parquet-go read it as one section, in the order of the row
	// groups and their columns.
	indexAt := footerAt
	for _, rg := range md.RowGroups {
		for _, c := range rg.Columns {
			if c.ColumnIndexOffset <= 0 || c.OffsetIndexOffset <= 0 {
				return 0, fmt.Errorf("fill column %s: %s has no page index", name, f.Name())
			}
			indexAt = min(indexAt, c.ColumnIndexOffset, c.OffsetIndexOffset)
		}
	}
	index := make([]byte, footerAt-indexAt)
	if _, err := f.ReadAt(index, indexAt); err != nil {
		return 0, err
	}
	indexOf := func(off int64, n int32) ([]byte, error) {
		if off < indexAt || off+int64(n) > footerAt {
			return nil, fmt.Errorf("fill column %s: %s: a page index entry outside its section", name, f.Name())
		}
		return index[off-indexAt : off-indexAt+int64(n)], nil
	}
	at := indexAt
	w := io.NewOffsetWriter(f, 0)
	put := func(b []byte) error {
		_, err := w.WriteAt(b, at)
		at += int64(len(b))
		return err
	}
	chunks := map[int64]*filledChunk{} // by row count
	filled := make([]filledChunk, len(md.RowGroups))
	for i := range md.RowGroups {
		rg := &md.RowGroups[i]
		c := chunks[rg.NumRows]
		if c == nil {
			if c, err = newFilledChunk(schema, opts, name, value, rg.NumRows); err != nil {
				return 0, fmt.Errorf("fill column %s: %w", name, err)
			}
			chunks[rg.NumRows] = c
		}
		old := &rg.Columns[col]
		if old.MetaData.NumValues != rg.NumRows || len(old.MetaData.Statistics.MaxValue) > 0 {
			return 0, fmt.Errorf("fill column %s: row group %d of %s holds values in it", name, i, f.Name())
		}
		// The chunk moves from where it was written to at.
		filled[i] = c.moved(at)
		if err := put(c.data); err != nil {
			return 0, err
		}
		rg.TotalByteSize += filled[i].chunk.MetaData.TotalUncompressedSize - old.MetaData.TotalUncompressedSize
		rg.TotalCompressedSize += filled[i].chunk.MetaData.TotalCompressedSize - old.MetaData.TotalCompressedSize
	}
	// Column indexes, then offset indexes, as the writer lays them out.
	for _, offsets := range []bool{false, true} {
		for i := range md.RowGroups {
			for j := range md.RowGroups[i].Columns {
				c := &md.RowGroups[i].Columns[j]
				var b []byte
				switch {
				case j == col && !offsets:
					b, err = thrift.Marshal(new(thrift.CompactProtocol), &filled[i].columnIndex)
				case j == col:
					b, err = thrift.Marshal(new(thrift.CompactProtocol), &filled[i].offsetIndex)
				case !offsets:
					b, err = indexOf(c.ColumnIndexOffset, c.ColumnIndexLength)
				default:
					b, err = indexOf(c.OffsetIndexOffset, c.OffsetIndexLength)
				}
				if err != nil {
					return 0, err
				}
				if j == col && !offsets {
					*c = filled[i].chunk
				}
				if offsets {
					c.OffsetIndexOffset, c.OffsetIndexLength = at, int32(len(b))
				} else {
					c.ColumnIndexOffset, c.ColumnIndexLength = at, int32(len(b))
				}
				if err := put(b); err != nil {
					return 0, err
				}
			}
		}
	}
	b, err := footerBytes(md)
	if err != nil {
		return 0, err
	}
	if err := put(b); err != nil {
		return 0, err
	}
	return at, f.Truncate(at)
}

// filledChunk is a column chunk of one value in every row of a row group:
// its pages' bytes as a TableWriter writes them, its column chunk metadata
// and page index entries, the offsets in them relative to base.
type filledChunk struct {
	data        []byte
	base        int64
	chunk       format.ColumnChunk
	columnIndex format.ColumnIndex
	offsetIndex format.OffsetIndex
}

// newFilledChunk writes rows rows of value in the column named name of
// schema alone, with opts, and takes the file's one column chunk.
func newFilledChunk(schema *parquet.Schema, opts []parquet.WriterOption, name, value string, rows int64) (*filledChunk, error) {
	var node parquet.Node
	for _, f := range schema.Fields() {
		if f.Name() == name {
			node = f
		}
	}
	if node == nil {
		return nil, fmt.Errorf("no column %s", name)
	}
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, append(opts[:len(opts):len(opts)], parquet.NewSchema(name, parquet.Group{name: node}))...)
	row := parquet.Row{parquet.ByteArrayValue([]byte(value)).Level(0, 0, 0)}
	batch := make([]parquet.Row, min(rows, 4096))
	for i := range batch {
		batch[i] = row
	}
	for n := rows; n > 0; {
		k := min(n, int64(len(batch)))
		if _, err := w.WriteRows(batch[:k]); err != nil {
			return nil, err
		}
		n -= k
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		return nil, err
	}
	md := pf.Metadata()
	if len(md.RowGroups) != 1 || len(md.RowGroups[0].Columns) != 1 || len(pf.ColumnIndexes()) != 1 || len(pf.OffsetIndexes()) != 1 {
		return nil, fmt.Errorf("%d rows of column %s: %d row groups, want one", rows, name, len(md.RowGroups))
	}
	c := &filledChunk{chunk: md.RowGroups[0].Columns[0], columnIndex: pf.ColumnIndexes()[0], offsetIndex: pf.OffsetIndexes()[0]}
	m := &c.chunk.MetaData
	c.base = chunkStart(&c.chunk)
	c.data = buf.Bytes()[c.base : c.base+m.TotalCompressedSize]
	return c, nil
}

// moved is c with its offsets for its bytes written at offset at.
func (c *filledChunk) moved(at int64) filledChunk {
	d := *c
	d.offsetIndex.PageLocations = append([]format.PageLocation(nil), c.offsetIndex.PageLocations...)
	moveChunk(&d.chunk, &d.offsetIndex, at-c.base)
	return d
}

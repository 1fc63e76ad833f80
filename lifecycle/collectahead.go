package lifecycle

import (
	"context"
	"os"
	"sync"
)

// collectAhead is how many result files collect downloads ahead of the one
// it is ingesting. Each waits in TmpDir until its turn, so the disk holds
// up to this many more files than one at a time did; the memory does not
// grow (a download streams to its file).
const collectAhead = 3

// fetch is a result file of a shard's bound batch that collect downloads.
type fetch struct {
	shard                    int // index among the shards collected
	batchID, fileID, channel string
}

// downloads downloads a list of files in order, up to collectAhead of them
// (downloading or downloaded) ahead of the one taken last.
type downloads struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   []chan struct{} // closed when the file's download ended
	paths  []string
	errs   []error
	taken  []bool
	slots  chan struct{}
}

// startDownloads starts downloading fetches in the background.
func (d *Driver) startDownloads(ctx context.Context, fetches []fetch) *downloads {
	ctx, cancel := context.WithCancel(ctx)
	dl := &downloads{cancel: cancel, done: make([]chan struct{}, len(fetches)), paths: make([]string, len(fetches)),
		errs: make([]error, len(fetches)), taken: make([]bool, len(fetches)), slots: make(chan struct{}, collectAhead+1)}
	for i := range fetches {
		dl.done[i] = make(chan struct{})
	}
	dl.wg.Add(1)
	go func() {
		defer dl.wg.Done()
		for i, f := range fetches {
			// A slot is taken per file from its download until it is taken
			// for ingest: the one being ingested and collectAhead more.
			select {
			case dl.slots <- struct{}{}:
			case <-ctx.Done():
				for ; i < len(fetches); i++ {
					dl.errs[i] = ctx.Err()
					close(dl.done[i])
				}
				return
			}
			dl.wg.Add(1)
			go func() {
				defer dl.wg.Done()
				dl.paths[i], dl.errs[i] = d.download(ctx, f.fileID)
				close(dl.done[i])
			}()
		}
	}()
	return dl
}

// wait returns the path of file i once it is downloaded, and frees the slot
// of the file taken before it (which the caller has ingested). The caller
// owns the file at path.
func (dl *downloads) wait(i int) (string, error) {
	if i > 0 && dl.taken[i-1] {
		<-dl.slots
	}
	<-dl.done[i]
	dl.taken[i] = true
	return dl.paths[i], dl.errs[i]
}

// stop cancels the downloads not yet taken, waits for them to end and
// removes their files.
func (dl *downloads) stop() {
	dl.cancel()
	dl.wg.Wait()
	for i, p := range dl.paths {
		if p != "" && !dl.taken[i] {
			os.Remove(p)
		}
	}
}

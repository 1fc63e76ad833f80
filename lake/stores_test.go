package lake

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestStores: the results come back in the order the stores were started,
// however long each took; once a store has failed, the next Go and Wait
// return that store's error, not the cancellation it caused; on a local lake
// each store runs at once.
func TestStores(t *testing.T) {
	ctx := context.Background()
	for name, l := range map[string]*Lake{"remote": openMem(t), "local": openFile(t)} {
		t.Run(name, func(t *testing.T) {
			s := NewStores[string](ctx, l)
			for i := range 6 {
				if err := s.Go(func(context.Context) (string, error) {
					time.Sleep(time.Duration(5-i) * 5 * time.Millisecond)
					return fmt.Sprint("shard-", i), nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Wait()
			if err != nil || fmt.Sprint(got) != "[shard-0 shard-1 shard-2 shard-3 shard-4 shard-5]" {
				t.Fatalf("Wait = %v, %v; want the six results in order", got, err)
			}

			boom := errors.New("store shard-1: the store refused it")
			s = NewStores[string](ctx, l)
			if err := s.Go(func(context.Context) (string, error) { return "", boom }); err != nil && !errors.Is(err, boom) {
				t.Fatalf("Go of the failing store = %v, want nil or its error", err)
			}
			var goErr error
			for deadline := time.Now().Add(5 * time.Second); goErr == nil && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				goErr = s.Go(func(context.Context) (string, error) { return "later", nil })
			}
			if !errors.Is(goErr, boom) {
				t.Errorf("Go after a store failed = %v, want %v", goErr, boom)
			}
			if _, err := s.Wait(); !errors.Is(err, boom) {
				t.Errorf("Wait = %v, want %v", err, boom)
			}
		})
	}
}

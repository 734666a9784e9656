package broker

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// TestStoreRefresherEmptyIsNothingToDo: a first start with nothing stored
// is "nothing to do" (logged at info), not a failed job.
func TestStoreRefresherEmptyIsNothingToDo(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cat := pricing.NewCatalog(nil, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "x")
	if _, err := StoreRefresher(context.Background(), st, cat); !errors.Is(err, ErrNothingToDo) {
		t.Fatalf("error %v, want ErrNothingToDo", err)
	}
}

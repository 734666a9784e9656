// Package catalog is the one way gpubroker builds its price catalog, for
// every command (`prices`, `plan`, `serve`) and every broker replica: the
// embedded snapshot, overlaid region by region with the offers the store
// holds (saved by `gpubroker catalog refresh` or the broker's refresh job),
// with the per-cloud spot defaults filled in where an offer has no observed
// interruption rate. It neither plans nor serves.
package catalog

import (
	"context"
	"fmt"
	"os"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// Stored is where Load finds refreshed offers; *store.Store implements it.
// Its Catalog returns nil (and no error) when it holds no offers.
type Stored interface {
	Catalog(ctx context.Context) (*pricing.Catalog, error)
}

var _ Stored = (*store.Store)(nil)

// Load returns the catalog: the embedded snapshot, with every (cloud,
// region) that st holds replaced by the stored offers, and the built-in spot
// defaults applied. A nil st gives the snapshot alone. Two callers that load
// from the same store get the same offers, which is what lets every replica
// and command agree on prices.
func Load(ctx context.Context, st Stored) (*pricing.Catalog, error) {
	snap, err := pricing.EmbeddedSnapshot()
	if err != nil {
		return nil, fmt.Errorf("loading the embedded price snapshot: %w", err)
	}
	cat := snap.Catalog()
	if s, ok := st.(*store.Store); ok && s == nil {
		st = nil // a nil *store.Store in the interface: no store
	}
	if st != nil {
		stored, err := st.Catalog(ctx)
		if err != nil {
			return nil, fmt.Errorf("loading the stored prices: %w", err)
		}
		if stored != nil && stored.Len() > 0 {
			source := fmt.Sprintf("%s (%d offers) over the %s", stored.Source, stored.Len(), cat.Source)
			cat = cat.Merge(stored.Offers(), stored.GeneratedAt, source)
		}
	}
	return cat.WithSpotDefaults(pricing.DefaultSpotDefaults()), nil
}

// OpenStore opens the store a command reads prices from: the database dsn
// names, or, when dsn is empty, the default SQLite file if it exists. It
// returns nil (and no error) when dsn is empty and there is no default file,
// so reading prices never creates a database. The caller closes the store.
func OpenStore(ctx context.Context, dsn string, opt store.Options) (*store.Store, error) {
	if dsn == "" {
		p, err := store.DefaultPath()
		if err != nil {
			return nil, nil
		}
		if _, err := os.Stat(p); err != nil {
			return nil, nil // never refreshed: don't create a database just to read
		}
	}
	return store.OpenWith(ctx, dsn, nil, opt)
}

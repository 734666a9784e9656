package fleetsim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/store"
)

// MemStore is fleet.Store in memory: the same Load/Apply/Paused behaviour
// as store.Fleet (tested against it in memstore_test.go), without SQL. The
// simulator runs thousands of passes over thousands of slots; a pass that
// re-read the whole fleet state from SQLite cost ~150 ms, this costs a
// copy of the records.
//
// Load returns the records sorted by id (slots, instances) and by token
// (open and failed intents), as store.Fleet does. Apply checks the fence
// against the lease set with SetLease; the zero Fence skips the check.
type MemStore struct {
	// OnEvent, when set, receives every event Apply writes (the simulator
	// counts moves; store.Fleet writes them to the events table).
	OnEvent func(store.EventRecord)
	// Recycle makes Load and the shared snapshot reuse memory their
	// readers are done with, for one reader of Load whose calls come one
	// after another (a reconciler's passes, without Diff) and View readers
	// that do not read a state across a change of it (a plan stage reads
	// the fleet within its plan; Apply comes after): Load writes its
	// answer over its previous one, and a new snapshot is built over the
	// one before the last. The fleet simulator sets it: a pass copied every
	// record twice into new memory, a good part of its garbage.
	Recycle bool

	mu      sync.Mutex
	slots   map[string]store.SlotRecord
	intents map[string]store.IntentRecord
	slotGen map[slotGen]string
	lastGen map[string]int // slot id → highest intent generation
	replace map[string]store.ReplaceRequest
	// unsettled holds the tokens of the open and failed intents, the ones
	// Load returns: intents are never deleted, so the snapshot must not
	// walk all of them (a month of launches is tens of thousands).
	unsettled map[string]bool
	launched  map[string]map[string]bool // instance id → tokens of its launched intents
	insts     map[string]store.FleetInstanceRecord
	pause     store.FleetPause
	lease     store.Fence // Now is the lease's expiry

	// snap is the sorted state, rebuilt after a change into new slices
	// (never in place: View's readers may still hold the previous one).
	snap  store.FleetState
	dirty bool
	// With Recycle: the snapshot before snap, and Load's last answer,
	// whose memory the next ones reuse.
	spare, loaded store.FleetState
	// The snapshot's keys, kept sorted as records come and go.
	slotIDs, instIDs []string
	// What changed since the snapshot: while no slot or instance came or
	// went, the next snapshot copies the last and patches the records
	// that changed (a pass changes a few of thousands).
	keysChanged  bool
	changedSlots map[string]bool
	changedInsts map[string]bool
}

// insertSorted adds k to the sorted keys if it is not there.
func insertSorted(keys []string, k string) []string {
	i, found := slices.BinarySearch(keys, k)
	if found {
		return keys
	}
	return slices.Insert(keys, i, k)
}

// deleteSorted takes k out of the sorted keys.
func deleteSorted(keys []string, k string) []string {
	if i, found := slices.BinarySearch(keys, k); found {
		return slices.Delete(keys, i, i+1)
	}
	return keys
}

type slotGen struct {
	slot string
	gen  int
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{slots: map[string]store.SlotRecord{}, intents: map[string]store.IntentRecord{},
		slotGen: map[slotGen]string{}, lastGen: map[string]int{}, unsettled: map[string]bool{}, launched: map[string]map[string]bool{}, insts: map[string]store.FleetInstanceRecord{}, dirty: true,
		changedSlots: map[string]bool{}, changedInsts: map[string]bool{}}
}

// DiscardsEvents implements fleet.EventDiscarder: without OnEvent, Apply
// drops every event.
func (m *MemStore) DiscardsEvents() bool { return m.OnEvent == nil }

// SetLease makes holder the holder of lease name at epoch until expires;
// Apply then refuses fences of any other term (store.ErrFenced).
func (m *MemStore) SetLease(name, holder string, epoch int64, expires time.Time) {
	m.mu.Lock()
	m.lease = store.Fence{Lease: name, Holder: holder, Epoch: epoch, Now: expires}
	m.mu.Unlock()
}

// SetPaused pauses or resumes the fleet, as store.Fleet.SetPaused does.
func (m *MemStore) SetPaused(p store.FleetPause) {
	m.mu.Lock()
	m.pause = p
	m.mu.Unlock()
}

// RequestReplace records r, as store.Fleet does (events aside).
func (m *MemStore) RequestReplace(_ context.Context, r store.ReplaceRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.replace == nil {
		m.replace = map[string]store.ReplaceRequest{}
	}
	r.At = r.At.UTC()
	m.replace[r.Instance] = r
	return nil
}

// ReplaceRequests implements fleet.Store: oldest first, as store.Fleet.
func (m *MemStore) ReplaceRequests(context.Context) ([]store.ReplaceRequest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.replace) == 0 {
		return nil, nil
	}
	out := make([]store.ReplaceRequest, 0, len(m.replace))
	for _, r := range m.replace {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b store.ReplaceRequest) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Instance, b.Instance)
	})
	return out, nil
}

// LastGeneration implements fleet.Store.
func (m *MemStore) LastGeneration(_ context.Context, slot string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastGen[slot], nil
}

// Paused implements fleet.Store.
func (m *MemStore) Paused(context.Context) (store.FleetPause, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pause, nil
}

// Load implements fleet.Store: slots, the open and failed intents, and the
// recorded instances, each a copy the caller may change.
func (m *MemStore) Load(context.Context) (store.FleetState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.snapshot()
	var out store.FleetState
	if m.Recycle {
		out = m.loaded
	}
	out = store.FleetState{
		Slots:     append(out.Slots[:0], st.Slots...),
		Intents:   append(out.Intents[:0], st.Intents...),
		Instances: append(out.Instances[:0], st.Instances...),
	}
	if m.Recycle {
		m.loaded = out
	}
	return out, nil
}

// View returns a fleet reader (fleet.FleetReader) whose Load returns the
// store's current state without copying it: the same slices to every
// caller until the next Apply. Its callers must not change what it
// returns. The plan stages that only read the fleet (training, hedging)
// use it, so that a pass copies the records once (for the reconciler,
// which changes its copy) rather than once per reader.
func (m *MemStore) View() View { return View{m} }

// View is MemStore's read-only fleet reader; see MemStore.View.
type View struct{ m *MemStore }

// Load returns the shared, read-only state.
func (v View) Load(context.Context) (store.FleetState, error) {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	return v.m.snapshot(), nil
}

// snapshot rebuilds the sorted state after a change: from the sorted keys,
// or, when no key came or went, by patching a copy of the last snapshot.
// m.mu is held.
func (m *MemStore) snapshot() store.FleetState {
	if !m.dirty {
		return m.snap
	}
	// New slices (readers may hold the last ones), or with Recycle the
	// memory of the snapshot before the last.
	var st, buf store.FleetState
	if m.Recycle {
		buf = m.spare
	}
	if !m.keysChanged && len(m.snap.Slots) == len(m.slotIDs) && len(m.snap.Instances) == len(m.instIDs) {
		// Same keys: the last snapshot with the changed records patched
		// in.
		if m.Recycle {
			st.Slots = append(buf.Slots[:0], m.snap.Slots...)
		} else {
			st.Slots = slices.Clone(m.snap.Slots)
		}
		for id := range m.changedSlots {
			if i, ok := slices.BinarySearch(m.slotIDs, id); ok {
				st.Slots[i] = m.slots[id]
			}
		}
		if m.Recycle {
			st.Instances = append(buf.Instances[:0], m.snap.Instances...)
		} else {
			st.Instances = slices.Clone(m.snap.Instances)
		}
		for id := range m.changedInsts {
			if i, ok := slices.BinarySearch(m.instIDs, id); ok {
				st.Instances[i] = m.insts[id]
			}
		}
	} else {
		if m.Recycle && cap(buf.Slots) >= len(m.slotIDs) {
			st.Slots = buf.Slots[:0]
		} else {
			st.Slots = make([]store.SlotRecord, 0, len(m.slotIDs))
		}
		// A merge with the last snapshot (both in id order): the records
		// that did not change since are copied from it, not looked up.
		st.Slots = mergeSnapshot(st.Slots, m.snap.Slots, m.slotIDs, m.changedSlots, m.slots, func(r *store.SlotRecord) string { return r.ID })
		if m.Recycle && cap(buf.Instances) >= len(m.instIDs) {
			st.Instances = buf.Instances[:0]
		} else {
			st.Instances = make([]store.FleetInstanceRecord, 0, len(m.instIDs))
		}
		st.Instances = mergeSnapshot(st.Instances, m.snap.Instances, m.instIDs, m.changedInsts, m.insts, func(r *store.FleetInstanceRecord) string { return r.ID })
	}
	clear(m.changedSlots)
	clear(m.changedInsts)
	m.keysChanged = false
	toks := slices.Sorted(maps.Keys(m.unsettled))
	if len(toks) > 0 {
		if m.Recycle && cap(buf.Intents) >= len(toks) {
			st.Intents = buf.Intents[:0]
		} else {
			st.Intents = make([]store.IntentRecord, 0, len(toks))
		}
	}
	for _, tok := range toks {
		st.Intents = append(st.Intents, m.intents[tok])
	}
	if m.Recycle {
		m.spare = m.snap
	}
	m.snap, m.dirty = st, false
	return st
}

// Apply implements fleet.Store: all of c or, on a fence or intent
// conflict, nothing.
func (m *MemStore) Apply(_ context.Context, f store.Fence, c store.FleetChanges) error {
	if c.Empty() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.Lease != "" {
		l := m.lease
		if l.Lease != f.Lease || l.Holder != f.Holder || l.Epoch != f.Epoch || !l.Now.After(f.Now) {
			return fmt.Errorf("recording fleet changes: %w (lease %s, epoch %d)", store.ErrFenced, f.Lease, f.Epoch)
		}
	}
	// The unique (slot, generation) of intents, checked before any write
	// so that a conflict writes nothing, as the transaction would.
	for _, in := range c.Intents {
		if tok, ok := m.slotGen[slotGen{in.SlotID, in.Generation}]; ok && tok != in.Token {
			return fmt.Errorf("recording fleet changes: launch intents: %w", store.ErrConflict)
		}
	}
	// Events alone leave the state, and so its snapshot, as they were.
	if len(c.Slots)+len(c.DeleteSlots)+len(c.Intents)+len(c.Instances)+len(c.DeleteInstances) > 0 {
		m.dirty = true
	}
	for _, s := range c.Slots {
		if _, ok := m.slots[s.ID]; !ok {
			m.slotIDs = insertSorted(m.slotIDs, s.ID)
			m.keysChanged = true
		}
		m.slots[s.ID] = s
		m.changedSlots[s.ID] = true
	}
	for _, id := range c.DeleteSlots {
		if _, ok := m.slots[id]; ok {
			m.slotIDs = deleteSorted(m.slotIDs, id)
			m.keysChanged = true
		}
		delete(m.slots, id)
	}
	for _, in := range c.Intents {
		if old, ok := m.intents[in.Token]; ok {
			delete(m.slotGen, slotGen{old.SlotID, old.Generation})
			if old.InstanceID != "" {
				delete(m.launched[old.InstanceID], in.Token)
			}
		}
		m.intents[in.Token] = in
		m.slotGen[slotGen{in.SlotID, in.Generation}] = in.Token
		m.lastGen[in.SlotID] = max(m.lastGen[in.SlotID], in.Generation)
		if in.State == store.IntentOpen || in.State == store.IntentFailed {
			m.unsettled[in.Token] = true
		} else {
			delete(m.unsettled, in.Token)
		}
		if in.State == store.IntentLaunched && in.InstanceID != "" {
			if m.launched[in.InstanceID] == nil {
				m.launched[in.InstanceID] = map[string]bool{}
			}
			m.launched[in.InstanceID][in.Token] = true
		}
		if in.State == store.IntentRetired {
			// Never loaded again: only its (slot, generation) and the
			// slot's last generation matter, and those are kept above.
			delete(m.intents, in.Token)
		}
	}
	for _, x := range c.Instances {
		if _, ok := m.insts[x.ID]; !ok {
			m.instIDs = insertSorted(m.instIDs, x.ID)
			m.keysChanged = true
		}
		m.insts[x.ID] = x
		m.changedInsts[x.ID] = true
	}
	for _, id := range c.DoneReplacements {
		delete(m.replace, id)
	}
	for _, id := range c.DeleteInstances {
		if _, ok := m.insts[id]; ok {
			m.instIDs = deleteSorted(m.instIDs, id)
			m.keysChanged = true
		}
		delete(m.insts, id)
		// Their launched intents retire: nothing needs them any more.
		// A retired intent is never loaded again: the record goes, its
		// (slot, generation) and the slot's last generation stay.
		for tok := range m.launched[id] {
			delete(m.intents, tok)
			delete(m.unsettled, tok)
		}
		delete(m.launched, id)
	}
	if m.OnEvent != nil {
		for _, ev := range c.Events {
			m.OnEvent(ev)
		}
	}
	return nil
}

// mergeSnapshot appends to dst the record of every id (in id order): from
// old, the last snapshot (also in id order), where it did not change
// since, else from cur.
func mergeSnapshot[T any](dst, old []T, ids []string, changed map[string]bool, cur map[string]T, idOf func(*T) string) []T {
	j := 0
	for _, id := range ids {
		for j < len(old) && idOf(&old[j]) < id {
			j++
		}
		if j < len(old) && idOf(&old[j]) == id && !changed[id] {
			dst = append(dst, old[j])
		} else {
			dst = append(dst, cur[id])
		}
	}
	return dst
}

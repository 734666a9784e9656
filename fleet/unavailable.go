package fleet

import (
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// Unavailable is the unavailable-offerings cache: pools that failed a
// launch for capacity, or whose spot instance was just preempted, are
// blocked for a back-off that doubles on each repeat (up to MaxBackoff) and
// starts again from Backoff once the pool launches and holds for a first
// back-off. The optimizer sees blocked pools as
// not sold (optimizer.Input.Unavailable), so the re-plan moves slots to the
// next best pool. Safe for concurrent use.
type Unavailable struct {
	// Backoff is the first block (default 3 minutes, Karpenter's figure);
	// MaxBackoff caps the doubling (default 1 hour).
	Backoff    time.Duration
	MaxBackoff time.Duration

	mu      sync.Mutex
	entries map[providers.PoolKey]*block
	version int
	// gen changes with every change to entries, including a Clear that
	// does not move version (the pool was not blocked at now): blockMemo
	// answers are good while it stands.
	gen int
	// limits are pools seen to hold fewer instances than a job asked for.
	limits map[providers.PoolKey]poolLimit
}

type poolLimit struct {
	n     int
	until time.Time
}

type block struct {
	until   time.Time
	backoff time.Duration
	reason  string
	// launched: the pool launched at until (Clear) since this block.
	launched bool
}

// Block blocks pool k from now for its next back-off.
func (u *Unavailable) Block(k providers.PoolKey, reason string, now time.Time) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.entries == nil {
		u.entries = map[providers.PoolKey]*block{}
	}
	first, maxB := u.Backoff, u.MaxBackoff
	if first <= 0 {
		first = 3 * time.Minute
	}
	if maxB <= 0 {
		maxB = time.Hour
	}
	b := u.entries[k]
	if b == nil {
		b = &block{backoff: first}
		u.entries[k] = b
	} else if b.launched {
		// It launched, then refused again within the first back-off: it
		// holds fewer instances than asked for (a pool of one instance and
		// a four-instance job), so keep backing off; later, a fresh start.
		if now.Before(b.until.Add(first)) {
			b.backoff = min(2*b.backoff, maxB)
		} else {
			b.backoff = first
		}
	} else if now.Before(b.until.Add(b.backoff)) {
		// Blocked again soon after the last block ended: back off longer.
		b.backoff = min(2*b.backoff, maxB)
	} else {
		b.backoff = first
	}
	b.until = now.Add(b.backoff)
	b.reason, b.launched = reason, false
	u.version++
	u.gen++
	return b.until
}

// Clear unblocks pool k (it launched at now). The back-off is remembered
// for one first back-off: a pool that refuses again that soon (one that
// holds one instance of a four-instance job launches the first and refuses
// the rest) is blocked for twice as long, instead of starting again at the
// first back-off and being retried every few minutes for ever.
func (u *Unavailable) Clear(k providers.PoolKey, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	b, ok := u.entries[k]
	if !ok {
		return
	}
	if now.Before(b.until) {
		u.version++
	}
	b.until, b.launched = now, true
	u.gen++
}

// Blocked reports whether pool k is blocked at now.
func (u *Unavailable) Blocked(k providers.PoolKey, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	b := u.entries[k]
	return b != nil && now.Before(b.until)
}

// Reason is why pool k is blocked at now ("capacity", "quota",
// "preempted"), and until when; ok is false when it is not blocked. The
// hedging stage tells a pool that refused one more replica (its capacity)
// from one that lost what it ran.
func (u *Unavailable) Reason(k providers.PoolKey, now time.Time) (reason string, until time.Time, ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	b := u.entries[k]
	if b == nil || !now.Before(b.until) {
		return "", time.Time{}, false
	}
	return b.reason, b.until, true
}

// Gen changes whenever a pool's block entry changes (Version does not move
// for a Clear of a pool that was not blocked). A stage that looks the same
// pools up many times in one plan reads Gen once and answers through
// blockMemo.
func (u *Unavailable) Gen() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.gen
}

// blockMemo is one pool's block entry as last looked up, for the
// generation it was looked up at: the hedging and training stages ask
// about the same few pools for every service and job of a plan, and each
// lookup was a lock and a PoolKey hash.
type blockMemo struct {
	u      *Unavailable
	gen    int // Gen()+1 when looked up; 0: never
	until  time.Time
	reason string
}

// memo returns pool k's entry (until, reason; zero when it has none)
// through m, looking it up only when gen (u.Gen(), read once by the
// caller for the whole plan) moved since m was filled. Blocked at now is
// now.Before(until), as in Blocked and Reason.
func (u *Unavailable) memo(k providers.PoolKey, m *blockMemo, gen int) (until time.Time, reason string) {
	if m.gen != gen+1 || m.u != u {
		u.mu.Lock()
		if b := u.entries[k]; b != nil {
			m.until, m.reason = b.until, b.reason
		} else {
			m.until, m.reason = time.Time{}, ""
		}
		u.mu.Unlock()
		m.u, m.gen = u, gen+1
	}
	return m.until, m.reason
}

// blockedMemo is Reason through m (memo): why pool k is blocked at now and
// until when; ok is false when it is not blocked (or u is nil).
func (u *Unavailable) blockedMemo(k providers.PoolKey, m *blockMemo, gen int, now time.Time) (reason string, until time.Time, ok bool) {
	if u == nil {
		return "", time.Time{}, false
	}
	until, reason = u.memo(k, m, gen)
	if !now.Before(until) {
		return "", time.Time{}, false
	}
	return reason, until, true
}

// offerBlocked is Blocked(PoolOf(*o, ct), now) through m (memo): the pool
// key (and the copy of the offer it was made from) only when m is out of
// date.
func (u *Unavailable) offerBlocked(o *pricing.Offer, ct pricing.CapacityType, m *blockMemo, gen int, now time.Time) bool {
	if u == nil {
		return false
	}
	if m.gen != gen+1 || m.u != u {
		u.memo(providers.PoolKey{Cloud: o.Cloud, Zone: zoneOf(*o), InstanceType: o.InstanceType, Capacity: ct}, m, gen)
	}
	return now.Before(m.until)
}

// Version changes whenever a pool is blocked or cleared; a plan source
// re-plans when it moves.
func (u *Unavailable) Version() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.version
}

// Func is the optimizer's hook: the offer sold as ct is blocked at now.
func (u *Unavailable) Func(now time.Time) func(o *pricing.Offer, ct pricing.CapacityType) bool {
	return func(o *pricing.Offer, ct pricing.CapacityType) bool {
		return u.Blocked(PoolOf(*o, ct), now)
	}
}

// Entry is one blocked pool, for status.
type Entry struct {
	Pool   providers.PoolKey `json:"pool"`
	Until  time.Time         `json:"until"`
	Reason string            `json:"reason"`
}

// Entries lists the pools blocked at now.
func (u *Unavailable) Entries(now time.Time) []Entry {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []Entry
	for k, b := range u.entries {
		if now.Before(b.until) {
			out = append(out, Entry{Pool: k, Until: b.until, Reason: b.reason})
		}
	}
	return out
}

// PoolOf is the pool of an offer sold as ct.
func PoolOf(o pricing.Offer, ct pricing.CapacityType) providers.PoolKey {
	return providers.PoolKey{Cloud: o.Cloud, Zone: zoneOf(o), InstanceType: o.InstanceType, Capacity: ct}
}

// Limit records that pool k held n instances of a job when it refused one
// more of them (a pool of one instance and a four-instance job): for the
// longest back-off from now, the optimizer places no job of more than n
// instances there (optimizer.Input.PoolLimit), so the job takes another
// pool or shape instead of coming back each time the block runs out. A
// pool that holds n for one job may hold as few for another: the smallest
// recent figure stands.
func (u *Unavailable) Limit(k providers.PoolKey, n int, now time.Time) {
	if n <= 0 {
		return
	}
	maxB := u.MaxBackoff
	if maxB <= 0 {
		maxB = time.Hour
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.limits == nil {
		u.limits = map[providers.PoolKey]poolLimit{}
	}
	if l, ok := u.limits[k]; ok && now.Before(l.until) && l.n <= n {
		n = l.n
	}
	u.limits[k] = poolLimit{n: n, until: now.Add(maxB)}
	u.version++
}

// LimitOf is the most instances pool k is known to hold at now (0: no
// known limit).
func (u *Unavailable) LimitOf(k providers.PoolKey, now time.Time) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if l, ok := u.limits[k]; ok && now.Before(l.until) {
		return l.n
	}
	return 0
}

// LimitEntry is one pool with a learned limit, for status.
type LimitEntry struct {
	Pool      providers.PoolKey `json:"pool"`
	Instances int               `json:"instances"`
	Until     time.Time         `json:"until"`
}

// Limits lists the pools with a learned limit at now.
func (u *Unavailable) Limits(now time.Time) []LimitEntry {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []LimitEntry
	for k, l := range u.limits {
		if now.Before(l.until) {
			out = append(out, LimitEntry{Pool: k, Instances: l.n, Until: l.until})
		}
	}
	return out
}

// LimitFunc is the optimizer's PoolLimit hook at now.
func (u *Unavailable) LimitFunc(now time.Time) func(o *pricing.Offer, ct pricing.CapacityType) int {
	return func(o *pricing.Offer, ct pricing.CapacityType) int {
		return u.LimitOf(PoolOf(*o, ct), now)
	}
}

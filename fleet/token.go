package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"
)

// ClientToken is the idempotency token of the generation-th launch of a
// slot in the fleet named fleetName. It is deterministic, so whichever
// leader retries the launch sends the same token, and it is shaped as a
// UUID (32 hex digits, version 5 bits set) because GCP's requestId must be
// one; AWS ClientToken (64 chars) and Azure names accept it too.
func ClientToken(fleetName, slotID string, generation int) string {
	h := sha256.Sum256([]byte("gpubroker-launch\x00" + fleetName + "\x00" + slotID + "\x00" + strconv.Itoa(generation)))
	b := h[:16]
	b[6] = (b[6] & 0x0f) | 0x50
	b[8] = (b[8] & 0x3f) | 0x80
	x := hex.EncodeToString(b)
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// tokenMemo remembers each slot's latest launch token. Every pass needs
// the token of every slot's current generation (to find its open intent
// and to tell owned instances from orphans), a SHA-256 each, while a slot's
// generation changes only when it launches: in the fleet simulator the
// hashing was 3% of the run. Safe for concurrent use (Diff may run beside
// a pass).
type tokenMemo struct {
	mu sync.Mutex
	m  map[string]memoToken // by slot id
}

type memoToken struct {
	fleet string
	gen   int
	token string
}

// token is ClientToken(fleetName, slotID, generation), memoised per slot.
func (t *tokenMemo) token(fleetName, slotID string, generation int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tokenLocked(fleetName, slotID, generation)
}

// tokenLocked is token with t.mu held: a pass looks up every slot's token
// under one lock.
func (t *tokenMemo) tokenLocked(fleetName, slotID string, generation int) string {
	if e, ok := t.m[slotID]; ok && e.gen == generation && e.fleet == fleetName {
		return e.token
	}
	tok := ClientToken(fleetName, slotID, generation)
	if t.m == nil {
		t.m = map[string]memoToken{}
	}
	t.m[slotID] = memoToken{fleet: fleetName, gen: generation, token: tok}
	return tok
}

// forget drops the slots' memoised tokens (slots deleted from the store).
func (t *tokenMemo) forget(slotIDs []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range slotIDs {
		delete(t.m, id)
	}
}

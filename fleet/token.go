package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
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

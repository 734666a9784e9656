package fleet

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The fleet.slot event's data encodes as the map it used to be did: stored
// events and anything reading them see the same bytes.
func TestSlotMoveEncodesAsTheMap(t *testing.T) {
	tests := []slotMove{
		{},
		{Capacity: "spot", Cloud: "aws", From: Pending, Generation: 3, InstanceType: "p3.2xlarge",
			Reason: `launched "x" <&>`, Slot: "svc/0", To: Booting, Zone: "us-east-1a"},
	}
	for _, m := range tests {
		got, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(map[string]any{"slot": m.Slot, "from": m.From, "to": m.To, "reason": m.Reason,
			"generation": m.Generation, "cloud": m.Cloud, "zone": m.Zone, "instance_type": m.InstanceType, "capacity": m.Capacity})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("struct encodes as\n%s\nthe map as\n%s", got, want)
		}
	}
}

package instance

import (
	"errors"
	"testing"
)

func TestTransitions(t *testing.T) {
	tests := []struct {
		from, to State
		ok       bool
	}{
		{Running, Preempting, true}, {Running, Drained, true}, {Preempting, Drained, true}, {Preempting, Draining, true},
		{Draining, Drained, true}, {Drained, Drained, true},
		{Drained, Running, false}, {Drained, Preempting, false}, {Preempting, Running, false}, {Draining, Preempting, false},
	}
	for _, tc := range tests {
		err := Transition(tc.from, tc.to)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrTransition)) {
			t.Errorf("%s → %s: %v, want ok=%v", tc.from, tc.to, err, tc.ok)
		}
	}
}

func TestRules(t *testing.T) {
	for _, k := range NoticeKinds() {
		c := OnNotice(k)
		want := k != NoticeRebalance && k != NoticeMaintenance
		if k.Terminal() != want || (c.State == Preempting) != want || (c.Event == EventPreemptionNotice) != want {
			t.Errorf("%s: terminal=%v change=%+v", k, k.Terminal(), c)
		}
		if got, err := ParseNoticeKind(string(k)); err != nil || got != k {
			t.Errorf("parse %s: %v", k, err)
		}
	}
	if _, err := ParseNoticeKind("evict"); !errors.Is(err, ErrUnknown) {
		t.Fatal("unknown notice kind accepted")
	}
	if Next(Drained, OnNotice(NoticePreempt)) != Drained {
		t.Fatal("a late notice revived a drained instance")
	}
	if Next(Running, OnDrain(false)) != Draining || Next(Preempting, OnDrain(true)) != Drained {
		t.Fatal("drain changes")
	}
	if Next(Running, OnNotice(NoticeRebalance)) != Running {
		t.Fatal("a warning changed the state")
	}
	for _, s := range States() {
		if _, err := ParseState(string(s)); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range EventKinds() {
		if _, err := ParseEventKind(string(k)); err != nil {
			t.Fatal(err)
		}
	}
}

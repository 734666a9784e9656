package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Spool keeps reports the broker has not yet accepted, one JSON file per
// report, written atomically (temp file, fsync, rename) so a crash or the VM
// going away mid-write never leaves half a report. With Dir empty it keeps
// them in memory only. The oldest reports are dropped beyond Max.
type Spool struct {
	Dir string
	Max int // default 256

	mu  sync.Mutex
	mem []Report
	seq int
	now func() time.Time
}

// NewSpool returns a spool in dir (created 0700), or in memory when dir is "".
func NewSpool(dir string, max int) (*Spool, error) {
	if max <= 0 {
		max = 256
	}
	s := &Spool{Dir: dir, Max: max, now: time.Now}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating spool: %w", err)
		}
	}
	return s, nil
}

// Put stores r.
func (s *Spool) Put(r Report) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Dir == "" {
		s.mem = append(s.mem, r)
		if len(s.mem) > s.Max {
			s.mem = s.mem[len(s.mem)-s.Max:]
		}
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding report: %w", err)
	}
	s.seq++
	// Names sort in arrival order: nanoseconds, then a sequence number for
	// reports within the same tick.
	name := fmt.Sprintf("%020d-%06d-%s.json", s.now().UnixNano(), s.seq%1000000, r.Kind)
	tmp, err := os.CreateTemp(s.Dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("spooling report: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("spooling report: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("spooling report: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("spooling report: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(s.Dir, name)); err != nil {
		return fmt.Errorf("spooling report: %w", err)
	}
	s.trimLocked()
	return nil
}

func (s *Spool) namesLocked() []string {
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func (s *Spool) trimLocked() {
	names := s.namesLocked()
	for len(names) > s.Max {
		_ = os.Remove(filepath.Join(s.Dir, names[0]))
		names = names[1:]
	}
}

// Len returns how many reports wait.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Dir == "" {
		return len(s.mem)
	}
	return len(s.namesLocked())
}

// Drain calls send on each stored report, oldest first, removing each one
// send accepts (nil) or rejects for good (keep=false). It stops at the first
// report send wants kept, so order is preserved.
func (s *Spool) Drain(send func(Report) (keep bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Dir == "" {
		for len(s.mem) > 0 {
			if send(s.mem[0]) {
				return
			}
			s.mem = s.mem[1:]
		}
		return
	}
	for _, n := range s.namesLocked() {
		p := filepath.Join(s.Dir, n)
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var r Report
		if err := json.Unmarshal(b, &r); err != nil || r.Kind == "" {
			_ = os.Remove(p) // unreadable: never deliverable
			continue
		}
		if send(r) {
			return
		}
		_ = os.Remove(p)
	}
}

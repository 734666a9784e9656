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
//
// When the directory cannot take a report (read-only, full, removed), the
// report is kept in memory instead (Fallback counts them) and delivered
// like the others: a failing disk never loses a report while the agent
// runs.
type Spool struct {
	Dir string
	Max int // default 256
	// OnFallback, when set, is called with the disk error each time a
	// report goes to memory instead.
	OnFallback func(error)

	mu  sync.Mutex
	mem []Report
	// sent names delivered files that could not be removed (read-only
	// directory), so they are not sent again.
	sent map[string]bool
	seq  int
	now  func() time.Time
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

// Put stores r: on disk, or in memory when there is no directory or the
// disk write fails. It returns an error only when r cannot be encoded.
func (s *Spool) Put(r Report) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Dir == "" {
		s.putMemLocked(r)
		return nil
	}
	if err := s.putDiskLocked(r); err != nil {
		if _, ok := err.(*json.UnsupportedValueError); ok {
			return err
		}
		s.putMemLocked(r)
		if s.OnFallback != nil {
			s.OnFallback(err)
		}
	}
	return nil
}

func (s *Spool) putMemLocked(r Report) {
	s.mem = append(s.mem, r)
	if len(s.mem) > s.Max {
		s.mem = s.mem[len(s.mem)-s.Max:]
	}
}

// InMemory returns how many reports are held in memory.
func (s *Spool) InMemory() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mem)
}

func (s *Spool) putDiskLocked(r Report) error {
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
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") && !s.sent[n] {
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

// Len returns how many reports wait, on disk and in memory.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Dir == "" {
		return len(s.mem)
	}
	return len(s.namesLocked()) + len(s.mem)
}

// Drain calls send on each stored report, oldest first, removing each one
// send accepts (nil) or rejects for good (keep=false). It stops at the first
// report send wants kept, so order is preserved.
func (s *Spool) Drain(send func(Report) (keep bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Dir == "" {
		s.drainMemLocked(send)
		return
	}
	// Disk first: a report falls back to memory only after the disk
	// failed, so the disk holds the older ones.
	if !s.drainDiskLocked(send) {
		return
	}
	s.drainMemLocked(send)
}

func (s *Spool) drainMemLocked(send func(Report) bool) {
	for len(s.mem) > 0 {
		if send(s.mem[0]) {
			return
		}
		s.mem = s.mem[1:]
	}
}

// drainDiskLocked reports whether every disk report was taken.
func (s *Spool) drainDiskLocked(send func(Report) bool) bool {
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
			return false
		}
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			// A read-only directory: the file cannot go, so it would be
			// sent again on every flush. Remember it as sent.
			if s.sent == nil {
				s.sent = map[string]bool{}
			}
			s.sent[n] = true
		}
	}
	return true
}

// Package sim replays real spot availability traces against the policies of
// fleet/spotpolicy: a training job with a deadline over many random start
// points, an inference service keeping a target of ready replicas, the exact
// offline optimum for comparison, and SVG timelines of single runs.
package sim

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Trace is one spot pool's availability: Avail[i] instances can be had
// during tick i, which lasts Gap seconds.
type Trace struct {
	Name  string // pool name, from the file name ("us-west-2a_v100_1")
	Gap   int    // seconds per tick
	Avail []int
	// Measured is the file's own tick when the trace was resampled to Gap
	// (0: Gap is the file's tick).
	Measured int
}

// Available reports whether at least one spot instance can be had at tick i.
func (t *Trace) Available(i int) bool { return t.Avail[i] > 0 }

// Fraction is the share of ticks with capacity.
func (t *Trace) Fraction() float64 {
	n := 0
	for _, a := range t.Avail {
		if a > 0 {
			n++
		}
	}
	if len(t.Avail) == 0 {
		return 0
	}
	return float64(n) / float64(len(t.Avail))
}

// ErrTrace marks a trace file that cannot be used; the message says where
// and why.
var ErrTrace = errors.New("bad trace")

// maxTraceTicks bounds a trace so a hostile file cannot exhaust memory.
const maxTraceTicks = 10_000_000

// LoadTrace reads a trace file: JSON in the format of the spot-traces data
// set ({"metadata": {"gap_seconds": N}, "data": [...]}) or CSV (see
// ReadTrace).
func LoadTrace(path string) (*Trace, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading trace: %w", err)
	}
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return ParseTrace(path, name, b)
}

// TraceFiles lists every trace file (.json as in the spot-traces data set,
// .csv as ParseTrace reads it) under dir, recursively, sorted by path.
func TraceFiles(dir string) ([]string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".json" || ext == ".csv") {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading trace directory: %w", err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("trace directory %s: no .json or .csv trace files in it", dir)
	}
	sort.Strings(paths)
	return paths, nil
}

// LoadTraces reads path: one trace file, or every trace file under a
// directory (TraceFiles), each named by its path under it without the
// extension ("1-node/aws-02-15-2023/us-east-1a_v100_1"), so zones of the
// same name in different folders stay apart.
func LoadTraces(path string) ([]*Trace, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading trace: %w", err)
	}
	if !fi.IsDir() {
		t, err := LoadTrace(path)
		if err != nil {
			return nil, err
		}
		return []*Trace{t}, nil
	}
	files, err := TraceFiles(path)
	if err != nil {
		return nil, err
	}
	out := make([]*Trace, 0, len(files))
	for _, f := range files {
		t, err := LoadTrace(f)
		if err != nil {
			return nil, err
		}
		if rel, err := filepath.Rel(path, f); err == nil {
			t.Name = strings.TrimSuffix(filepath.ToSlash(rel), filepath.Ext(rel))
		}
		out = append(out, t)
	}
	return out, nil
}

// ParseTrace parses a trace from b; file is used in error messages. A trace
// whose first non-blank byte is '{' is JSON, anything else CSV with rows
// "seconds,available" (an optional header row; seconds evenly spaced from 0,
// the spacing being the tick).
func ParseTrace(file, name string, b []byte) (*Trace, error) {
	b = bytes.TrimPrefix(b, []byte("\ufeff")) // a byte-order mark some editors write
	trim := bytes.TrimLeft(b, " \t\r\n")
	var t *Trace
	var err error
	if len(trim) > 0 && (trim[0] == '{' || trim[0] == '[') {
		t, err = parseJSONTrace(file, b)
	} else {
		t, err = parseCSVTrace(file, b)
	}
	if err != nil {
		return nil, err
	}
	t.Name = name
	return t, nil
}

// lineCol turns a byte offset into 1-based line and column.
func lineCol(b []byte, off int64) (int, int) {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	line, col := 1, 1
	for _, c := range b[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// skipSep moves off past blanks and JSON separators to the next token.
func skipSep(b []byte, off int64) int64 {
	for off < int64(len(b)) && strings.IndexByte(" \t\r\n,:", b[off]) >= 0 {
		off++
	}
	return off
}

func traceErr(file string, b []byte, off int64, format string, args ...any) error {
	l, c := lineCol(b, off)
	return fmt.Errorf("%w: %s:%d:%d: %s", ErrTrace, file, l, c, fmt.Sprintf(format, args...))
}

func parseJSONTrace(file string, b []byte) (*Trace, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	t := &Trace{}
	wrap := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return traceErr(file, b, se.Offset, "invalid JSON: %v", se)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return traceErr(file, b, int64(len(b)), "unexpected end of file; want a complete JSON object")
		}
		return traceErr(file, b, dec.InputOffset(), "invalid JSON: %v", err)
	}
	expectDelim := func(want json.Delim, what string) error {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return wrap(err)
		}
		if d, ok := tok.(json.Delim); !ok || d != want {
			return traceErr(file, b, skipSep(b, off), "want %s, found %v", what, tok)
		}
		return nil
	}
	if err := expectDelim('{', `a JSON object {"metadata": {...}, "data": [...]}`); err != nil {
		return nil, err
	}
	haveGap, haveData := false, false
	for dec.More() {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, wrap(err)
		}
		key, _ := tok.(string)
		switch key {
		case "metadata":
			if err := expectDelim('{', `an object {"gap_seconds": N} for "metadata"`); err != nil {
				return nil, err
			}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return nil, wrap(err)
				}
				voff := dec.InputOffset()
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					return nil, wrap(err)
				}
				if k, _ := tok.(string); k == "gap_seconds" {
					g, err := strconv.ParseFloat(string(v), 64)
					if err != nil || g < 1 || g > 86400 || g != math.Trunc(g) {
						return nil, traceErr(file, b, skipSep(b, voff), "gap_seconds %s: want a whole number of seconds from 1 to 86400", v)
					}
					t.Gap, haveGap = int(g), true
				}
			}
			if err := expectDelim('}', "end of metadata"); err != nil {
				return nil, err
			}
		case "data":
			if err := expectDelim('[', `an array of instance counts for "data"`); err != nil {
				return nil, err
			}
			for dec.More() {
				voff := dec.InputOffset()
				tok, err := dec.Token()
				if err != nil {
					return nil, wrap(err)
				}
				n, ok := tok.(json.Number)
				v, perr := strconv.ParseFloat(string(n), 64)
				if !ok || perr != nil || v < 0 || v != math.Trunc(v) || v > 1e6 {
					return nil, traceErr(file, b, skipSep(b, voff), "data[%d] = %v: want a count of available instances (whole number ≥ 0)", len(t.Avail), tok)
				}
				if len(t.Avail) >= maxTraceTicks {
					return nil, traceErr(file, b, skipSep(b, voff), "more than %d ticks", maxTraceTicks)
				}
				t.Avail = append(t.Avail, int(v))
			}
			if err := expectDelim(']', "end of data"); err != nil {
				return nil, err
			}
			haveData = true
		default:
			if key == "" {
				return nil, traceErr(file, b, skipSep(b, off), "want a key, found %v", tok)
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, wrap(err)
			}
		}
	}
	if err := expectDelim('}', "end of the object"); err != nil {
		return nil, err
	}
	if !haveGap {
		return nil, traceErr(file, b, 0, `missing "metadata": {"gap_seconds": N}`)
	}
	if !haveData || len(t.Avail) == 0 {
		return nil, traceErr(file, b, 0, `missing or empty "data": want [count, count, ...]`)
	}
	return t, nil
}

func parseCSVTrace(file string, b []byte) (*Trace, error) {
	r := csv.NewReader(bufio.NewReader(bytes.NewReader(b)))
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	r.Comment = '#'
	t := &Trace{}
	first := true
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%w: %s:%d:%d: %v", ErrTrace, file, pe.Line, pe.Column, pe.Err)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrTrace, file, err)
		}
		line, _ := r.FieldPos(0)
		if len(rec) != 2 {
			return nil, fmt.Errorf("%w: %s:%d:1: %d fields; want 2: seconds,available", ErrTrace, file, line, len(rec))
		}
		sec, err1 := strconv.ParseInt(strings.TrimSpace(rec[0]), 10, 64)
		n, err2 := strconv.Atoi(strings.TrimSpace(rec[1]))
		if first && err1 != nil {
			first = false // a header row
			continue
		}
		first = false
		if err1 != nil || sec < 0 {
			return nil, fmt.Errorf("%w: %s:%d:1: seconds %q: want a whole number ≥ 0", ErrTrace, file, line, rec[0])
		}
		if _, col := r.FieldPos(1); err2 != nil || n < 0 {
			return nil, fmt.Errorf("%w: %s:%d:%d: available %q: want a count of instances (whole number ≥ 0)", ErrTrace, file, line, col, rec[1])
		}
		switch k := len(t.Avail); {
		case k == 0 && sec != 0:
			return nil, fmt.Errorf("%w: %s:%d:1: first row at %d s; want 0", ErrTrace, file, line, sec)
		case k == 1:
			if sec < 1 || sec > 86400 {
				return nil, fmt.Errorf("%w: %s:%d:1: tick of %d s; want 1 to 86400", ErrTrace, file, line, sec)
			}
			t.Gap = int(sec)
		case k > 1 && sec != int64(k)*int64(t.Gap):
			return nil, fmt.Errorf("%w: %s:%d:1: row at %d s; want %d (rows every %d s)", ErrTrace, file, line, sec, int64(k)*int64(t.Gap), t.Gap)
		}
		if len(t.Avail) >= maxTraceTicks {
			return nil, fmt.Errorf("%w: %s:%d:1: more than %d ticks", ErrTrace, file, line, maxTraceTicks)
		}
		t.Avail = append(t.Avail, n)
	}
	if len(t.Avail) < 2 {
		return nil, fmt.Errorf("%w: %s: want at least 2 rows of seconds,available (the tick is their spacing)", ErrTrace, file)
	}
	return t, nil
}

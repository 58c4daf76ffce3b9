package tensorboard

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMaskedCRC: the mask is TFRecord's, checked on a value computed by hand from its definition:
// CRC-32C("") = 0, rotated right by 15 bits (still 0), plus 0xa282ead8; and CRC-32C of "123456789" is
// the Castagnoli check value 0xe3069283.
func TestMaskedCRC(t *testing.T) {
	if got := maskedCRC(nil); got != 0xa282ead8 {
		t.Errorf("masked CRC of nothing 0x%08x, want 0xa282ead8", got)
	}
	c := uint32(0xe3069283)
	if crc32.Checksum([]byte("123456789"), castagnoli) != c {
		t.Fatal("CRC-32C check value")
	}
	if got, want := maskedCRC([]byte("123456789")), (c>>15|c<<17)+0xa282ead8; got != want {
		t.Errorf("masked CRC 0x%08x, want 0x%08x", got, want)
	}
}

// TestWriterRoundTrip: a file written here reads back through the framing (both CRCs checked) to the
// same events: the file version first, scalars with their steps, the text under the text plugin, a
// session start; a flipped byte anywhere is caught.
func TestWriterRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	fixed := time.Unix(1_700_000_000, 500_000_000)
	w.now = func() time.Time { return fixed }
	if err := w.Scalars(20, Scalar{"train/loss", 2.25}, Scalar{"train/lr", 0.1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Scalars(40, Scalar{"eval/top1", 0}, Scalar{"train/loss", math.Inf(1)}); err != nil {
		t.Fatal(err)
	}
	md := "    name: x\n    data:\n      dir: /d\n"
	if err := w.Text(0, "config", md); err != nil {
		t.Fatal(err)
	}
	if err := w.SessionStart(40); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(w.Path()), "events.out.tfevents.") {
		t.Errorf("file name %s", w.Path())
	}
	events, err := ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 5 || events[0].FileVersion != FileVersion {
		t.Fatalf("%d events, first %+v", len(events), events[0])
	}
	s := events[1]
	if s.Step != 20 || s.WallTime != 1_700_000_000.5 || len(s.Values) != 2 || s.Values[0].Tag != "train/loss" ||
		s.Values[0].Simple != 2.25 || s.Values[1].Simple != float32(0.1) || !s.Values[0].IsSimple {
		t.Errorf("scalars event %+v", s)
	}
	if v := events[2].Values; events[2].Step != 40 || !v[0].IsSimple || v[0].Simple != 0 || !math.IsInf(float64(v[1].Simple), 1) {
		t.Errorf("second scalars event %+v", events[2])
	}
	if v := events[3].Values; len(v) != 1 || v[0].Tag != "config" || v[0].Plugin != "text" || v[0].Text != md || v[0].IsSimple {
		t.Errorf("text event %+v", events[3])
	}
	if events[4].SessionStatus != 1 || events[4].Step != 40 {
		t.Errorf("session event %+v", events[4])
	}
	raw, _ := os.ReadFile(w.Path())
	for _, i := range []int{3, 9, 14, len(raw) - 1} {
		bad := append([]byte(nil), raw...)
		bad[i] ^= 0x10
		if _, err := Records(bad); err == nil {
			t.Errorf("a flipped byte %d passed the CRCs", i)
		}
	}
	if _, err := Records(raw[:len(raw)-2]); err == nil {
		t.Error("a truncated file passed")
	}
	// The framing itself: length, its masked CRC, the data, its masked CRC.
	rec := frame([]byte("abc"))
	if binary.LittleEndian.Uint64(rec) != 3 || binary.LittleEndian.Uint32(rec[8:]) != maskedCRC(rec[:8]) ||
		string(rec[12:15]) != "abc" || binary.LittleEndian.Uint32(rec[15:]) != maskedCRC([]byte("abc")) || len(rec) != 19 {
		t.Errorf("frame(abc) = %x", rec)
	}
	// Two writers in one second get two files.
	a, _ := NewWriter(dir)
	b, _ := NewWriter(dir)
	if a == nil || b == nil || a.Path() == b.Path() {
		t.Fatal("two writers share a file name")
	}
	a.Close()
	b.Close()
}

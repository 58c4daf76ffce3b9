package data

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/trainer/trainer/internal/bounded"
)

// The shard format (docs/data.md has it byte by byte): a fixed header, the records back to back, an
// index of (offset, length, label, CRC-32C) per record, then the class names. All integers
// little-endian. Version 1, without the per-record CRC-32C, is still read.
const (
	ShardMagic      = "TRNSHARD"
	ShardVersion    = 2
	ShardHeaderSize = 88
	shardIndexEntry = 20 // version 2; version 1's entries are 16 bytes, without the CRC
	// ShardExt is the file extension OpenShards lists.
	ShardExt = ".shard"
)

// indexEntrySize is the size of one index entry in a shard of version v (1 or 2).
func indexEntrySize(v uint32) int64 {
	if v == 1 {
		return 16
	}
	return shardIndexEntry
}

// ShardKind says what a shard's records hold.
type ShardKind uint32

const (
	// ShardEncoded records are image files' bytes (JPEG or PNG), decoded by the loader.
	ShardEncoded ShardKind = 1
	// ShardPixels records are Height*Width*Channels uint8 pixels, HWC, all of one size.
	ShardPixels ShardKind = 2
)

func (k ShardKind) String() string {
	switch k {
	case ShardEncoded:
		return "encoded"
	case ShardPixels:
		return "pixels"
	}
	return fmt.Sprintf("kind(%d)", uint32(k))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ShardHeader is the decoded header of one shard file.
type ShardHeader struct {
	Version    uint32
	Kind       ShardKind
	Count      int // records
	NumClasses int
	// Height, Width, Channels: the size of every record for ShardPixels; for ShardEncoded, 0 or the
	// bound the packer resized the shorter side to (Height = Width = bound, Channels 0).
	Height, Width, Channels int
	Shard, Shards           int // this file's number in its set and the size of the set
	IndexOffset             int64
	ClassesOffset           int64
	FileSize                int64
	RecordsCRC              uint32 // CRC-32C (Castagnoli) of bytes [ShardHeaderSize, IndexOffset)
	IndexCRC                uint32 // CRC-32C of bytes [IndexOffset, FileSize)
}

// maxShardClasses bounds NumClasses (class names are stored with 16-bit lengths; labels fit 32 bits).
const maxShardClasses = 1 << 20

// ReadShardHeader decodes and checks the first ShardHeaderSize bytes of a shard. It checks the magic,
// the version, the header's own CRC and that every offset is consistent with the others; it cannot
// check FileSize against the file (OpenShard does).
func ReadShardHeader(b []byte) (ShardHeader, error) {
	var h ShardHeader
	if len(b) < ShardHeaderSize {
		return h, fmt.Errorf("truncated header: %d bytes, want %d", len(b), ShardHeaderSize)
	}
	if string(b[:8]) != ShardMagic {
		return h, fmt.Errorf("wrong magic %q, want %q (not a shard file)", b[:8], ShardMagic)
	}
	le := binary.LittleEndian
	if got, want := le.Uint32(b[80:]), crc32.Checksum(b[:80], castagnoli); got != want {
		return h, fmt.Errorf("header CRC-32C 0x%08x, computed 0x%08x: the header is corrupt", got, want)
	}
	h.Version = le.Uint32(b[8:])
	if h.Version != 1 && h.Version != ShardVersion {
		return h, fmt.Errorf("format version %d, this build reads versions 1 and %d", h.Version, ShardVersion)
	}
	h.Kind = ShardKind(le.Uint32(b[12:]))
	u := func(off int) int { return int(le.Uint32(b[off:])) }
	h.Count, h.NumClasses = u(16), u(20)
	h.Height, h.Width, h.Channels = u(24), u(28), u(32)
	h.Shard, h.Shards = u(36), u(40)
	h.IndexOffset, h.ClassesOffset, h.FileSize = int64(le.Uint64(b[48:])), int64(le.Uint64(b[56:])), int64(le.Uint64(b[64:]))
	h.RecordsCRC, h.IndexCRC = le.Uint32(b[72:]), le.Uint32(b[76:])
	if r := le.Uint32(b[44:]) | le.Uint32(b[84:]); r != 0 {
		return h, fmt.Errorf("reserved header fields are not zero")
	}
	switch h.Kind {
	case ShardEncoded:
	case ShardPixels:
		if h.Height < 1 || h.Width < 1 || (h.Channels != 1 && h.Channels != 3) || h.Height > 1<<15 || h.Width > 1<<15 {
			return h, fmt.Errorf("pixel shard of %dx%dx%d images, want sides in [1, 32768] and 1 or 3 channels", h.Height, h.Width, h.Channels)
		}
	default:
		return h, fmt.Errorf("unknown record kind %d, want 1 (encoded) or 2 (pixels)", uint32(h.Kind))
	}
	if h.NumClasses < 1 || h.NumClasses > maxShardClasses {
		return h, fmt.Errorf("%d classes, want [1, %d]", h.NumClasses, maxShardClasses)
	}
	if h.Shards < 1 || h.Shard >= h.Shards {
		return h, fmt.Errorf("shard %d of %d, want 0 <= shard < shards", h.Shard, h.Shards)
	}
	// Offsets: header <= index <= classes <= end, and the index holds exactly Count entries.
	if h.IndexOffset < ShardHeaderSize || h.ClassesOffset < h.IndexOffset || h.FileSize < h.ClassesOffset ||
		h.ClassesOffset-h.IndexOffset != int64(h.Count)*indexEntrySize(h.Version) {
		return h, fmt.Errorf("inconsistent offsets: index at %d, classes at %d, size %d for %d records",
			h.IndexOffset, h.ClassesOffset, h.FileSize, h.Count)
	}
	if h.Kind == ShardPixels && h.IndexOffset-ShardHeaderSize != int64(h.Count)*int64(h.Height*h.Width*h.Channels) {
		return h, fmt.Errorf("%d records of %dx%dx%d pixels need %d bytes, the records take %d",
			h.Count, h.Height, h.Width, h.Channels, int64(h.Count)*int64(h.Height*h.Width*h.Channels), h.IndexOffset-ShardHeaderSize)
	}
	return h, nil
}

// encode writes h as the ShardHeaderSize header bytes, with its CRC.
func (h ShardHeader) encode() []byte {
	b := make([]byte, ShardHeaderSize)
	le := binary.LittleEndian
	copy(b, ShardMagic)
	le.PutUint32(b[8:], h.Version)
	le.PutUint32(b[12:], uint32(h.Kind))
	for i, v := range []int{h.Count, h.NumClasses, h.Height, h.Width, h.Channels, h.Shard, h.Shards} {
		le.PutUint32(b[16+4*i:], uint32(v))
	}
	le.PutUint64(b[48:], uint64(h.IndexOffset))
	le.PutUint64(b[56:], uint64(h.ClassesOffset))
	le.PutUint64(b[64:], uint64(h.FileSize))
	le.PutUint32(b[72:], h.RecordsCRC)
	le.PutUint32(b[76:], h.IndexCRC)
	le.PutUint32(b[80:], crc32.Checksum(b[:80], castagnoli))
	return b
}

// ShardInfo is a parsed shard: its header, index and class names.
type ShardInfo struct {
	ShardHeader
	Offsets []int64 // Count+1 entries: record i is bytes [Offsets[i], Offsets[i+1])
	Labels  []int32
	// CRCs are the records' CRC-32C (Castagnoli), checked on every read; nil in a version 1 shard,
	// whose records only VerifyShard can check (all at once).
	CRCs    []uint32
	Classes []string
}

// Len returns the byte length of record i.
func (s *ShardInfo) Len(i int) int { return int(s.Offsets[i+1] - s.Offsets[i]) }

// ParseShard reads and checks the header, the index and the class names of a shard of size bytes:
// records must be contiguous from the end of the header to the index, labels below NumClasses, and the
// index and names must match their CRC-32C. The records' CRC-32C are checked as they are read
// (Shards.Example) and all at once by VerifyShard. Allocation is bounded by size.
func ParseShard(r io.ReaderAt, size int64) (*ShardInfo, error) {
	hb := make([]byte, ShardHeaderSize)
	if n, err := r.ReadAt(hb, 0); n < ShardHeaderSize {
		return nil, fmt.Errorf("truncated header: %d of %d bytes (%v)", n, ShardHeaderSize, err)
	}
	h, err := ReadShardHeader(hb)
	if err != nil {
		return nil, err
	}
	if h.FileSize != size {
		return nil, fmt.Errorf("header says %d bytes, the file has %d (truncated or appended to)", h.FileSize, size)
	}
	tail := make([]byte, h.FileSize-h.IndexOffset)
	if n, err := r.ReadAt(tail, h.IndexOffset); n < len(tail) {
		return nil, fmt.Errorf("reading the index: %d of %d bytes (%v)", n, len(tail), err)
	}
	if got := crc32.Checksum(tail, castagnoli); got != h.IndexCRC {
		return nil, fmt.Errorf("index CRC-32C 0x%08x, header says 0x%08x: the index or class names are corrupt", got, h.IndexCRC)
	}
	le := binary.LittleEndian
	info := &ShardInfo{ShardHeader: h, Offsets: make([]int64, h.Count+1), Labels: make([]int32, h.Count)}
	entry := int(indexEntrySize(h.Version))
	if h.Version >= 2 {
		info.CRCs = make([]uint32, h.Count)
	}
	pos := int64(ShardHeaderSize)
	for i := range h.Count {
		e := tail[i*entry:]
		off, n, label := int64(le.Uint64(e)), int64(le.Uint32(e[8:])), le.Uint32(e[12:])
		if info.CRCs != nil {
			info.CRCs[i] = le.Uint32(e[16:])
		}
		if off != pos {
			return nil, fmt.Errorf("record %d starts at %d, want %d (records are contiguous)", i, off, pos)
		}
		if label >= uint32(h.NumClasses) {
			return nil, fmt.Errorf("record %d has label %d, want labels in [0, %d)", i, label, h.NumClasses)
		}
		info.Offsets[i], info.Labels[i] = off, int32(label)
		pos += n
		if pos > h.IndexOffset {
			return nil, fmt.Errorf("record %d ends at %d, past the index at %d", i, pos, h.IndexOffset)
		}
	}
	if pos != h.IndexOffset {
		return nil, fmt.Errorf("records end at %d, the index starts at %d", pos, h.IndexOffset)
	}
	info.Offsets[h.Count] = pos
	names := tail[h.ClassesOffset-h.IndexOffset:]
	for c := range h.NumClasses {
		if len(names) < 2 || len(names) < 2+int(le.Uint16(names)) {
			return nil, fmt.Errorf("class name %d runs past the end of the file", c)
		}
		n := int(le.Uint16(names))
		info.Classes = append(info.Classes, string(names[2:2+n]))
		names = names[2+n:]
	}
	if len(names) != 0 {
		return nil, fmt.Errorf("%d bytes after the last class name", len(names))
	}
	return info, nil
}

// ShardWriter writes one shard file. Add records, then Finish.
type ShardWriter struct {
	path    string
	f       *os.File
	w       *bufio.Writer
	crc     uint32
	h       ShardHeader
	classes []string
	offsets []int64
	labels  []int32
	crcs    []uint32 // each record's CRC-32C
}

// CreateShard starts a shard at path of the given kind; height, width and channels are the record size
// for ShardPixels (for ShardEncoded, the resize bound or 0).
func CreateShard(path string, kind ShardKind, classes []string, height, width, channels int) (*ShardWriter, error) {
	if len(classes) < 1 || len(classes) > maxShardClasses {
		return nil, fmt.Errorf("data: shard %s: %d classes, want [1, %d]", path, len(classes), maxShardClasses)
	}
	for _, c := range classes {
		if len(c) > 0xffff {
			return nil, fmt.Errorf("data: shard %s: class name of %d bytes, at most 65535", path, len(c))
		}
	}
	// A fresh file of its own: whatever is at path (a temporary of a killed pack, a link) is removed,
	// not written through.
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("data: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	w := &ShardWriter{path: path, f: f, w: bufio.NewWriterSize(f, 1<<20), classes: classes,
		h: ShardHeader{Version: ShardVersion, Kind: kind, NumClasses: len(classes), Height: height, Width: width,
			Channels: channels, Shards: 1}}
	// The header is written last, once the offsets and CRCs are known.
	if _, err := w.w.Write(make([]byte, ShardHeaderSize)); err != nil {
		f.Close()
		return nil, fmt.Errorf("data: %s: %w", path, err)
	}
	w.offsets = []int64{ShardHeaderSize}
	return w, nil
}

// Size is the number of bytes written so far (header and records).
func (w *ShardWriter) Size() int64 { return w.offsets[len(w.offsets)-1] }

// Count is the number of records added.
func (w *ShardWriter) Count() int { return len(w.labels) }

// Add appends one record.
func (w *ShardWriter) Add(label int32, payload []byte) error {
	if label < 0 || int(label) >= w.h.NumClasses {
		return fmt.Errorf("data: shard %s: label %d, want [0, %d)", w.path, label, w.h.NumClasses)
	}
	if w.h.Kind == ShardPixels && len(payload) != w.h.Height*w.h.Width*w.h.Channels {
		return fmt.Errorf("data: shard %s: %d pixel bytes, want %dx%dx%d", w.path, len(payload), w.h.Height, w.h.Width, w.h.Channels)
	}
	if int64(len(payload)) > 1<<31 {
		return fmt.Errorf("data: shard %s: a %d-byte record is too large", w.path, len(payload))
	}
	if _, err := w.w.Write(payload); err != nil {
		return fmt.Errorf("data: %s: %w", w.path, err)
	}
	w.crc = crc32.Update(w.crc, castagnoli, payload)
	w.crcs = append(w.crcs, crc32.Checksum(payload, castagnoli))
	w.offsets = append(w.offsets, w.Size()+int64(len(payload)))
	w.labels = append(w.labels, label)
	return nil
}

// Finish writes the index, the class names and the header, marking the file as shard of shards, and
// syncs and closes the file.
func (w *ShardWriter) Finish(shard, shards int) error {
	err := w.finish(shard, shards)
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("data: %s: %w", w.path, cerr)
	}
	return err
}

func (w *ShardWriter) finish(shard, shards int) error {
	le := binary.LittleEndian
	h := &w.h
	h.Count, h.Shard, h.Shards = len(w.labels), shard, shards
	h.RecordsCRC = w.crc
	h.IndexOffset = w.Size()
	tail := make([]byte, 0, len(w.labels)*shardIndexEntry)
	for i, l := range w.labels {
		tail = le.AppendUint64(tail, uint64(w.offsets[i]))
		tail = le.AppendUint32(tail, uint32(w.offsets[i+1]-w.offsets[i]))
		tail = le.AppendUint32(tail, uint32(l))
		tail = le.AppendUint32(tail, w.crcs[i])
	}
	h.ClassesOffset = h.IndexOffset + int64(len(tail))
	for _, c := range w.classes {
		tail = le.AppendUint16(tail, uint16(len(c)))
		tail = append(tail, c...)
	}
	h.FileSize = h.IndexOffset + int64(len(tail))
	h.IndexCRC = crc32.Checksum(tail, castagnoli)
	if _, err := w.w.Write(tail); err != nil {
		return fmt.Errorf("data: %s: %w", w.path, err)
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("data: %s: %w", w.path, err)
	}
	if _, err := w.f.WriteAt(h.encode(), 0); err != nil {
		return fmt.Errorf("data: %s: %w", w.path, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("data: %s: %w", w.path, err)
	}
	return nil
}

// setShardNumber rewrites the shard and shards fields of a finished shard's header.
func setShardNumber(path string, shard, shards int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	hb := make([]byte, ShardHeaderSize)
	if _, err := f.ReadAt(hb, 0); err != nil {
		return fmt.Errorf("data: %s: %w", path, err)
	}
	h, err := ReadShardHeader(hb)
	if err != nil {
		return fmt.Errorf("data: %s: %w", path, err)
	}
	h.Shard, h.Shards = shard, shards
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return fmt.Errorf("data: %s: %w", path, err)
	}
	return f.Sync()
}

// Shards is a set of shard files read as one Source: their records in file-name order.
type Shards struct {
	Dir   string
	Paths []string
	Infos []*ShardInfo
	start []int // start[s] is the global index of shard s's first record; start[len] = total
	files openFiles
}

// maxOpenShards bounds how many files of a set are open at once: a set of many small shards (`data
// pack --shard-size 1`) would otherwise need a descriptor per shard and hit the process's limit.
const maxOpenShards = 64

// openFiles opens a set's shard files as records are read, keeping at most maxOpenShards open (the
// least recently used idle one is closed to make room; files in use by a reader are never closed).
type openFiles struct {
	mu    sync.Mutex
	open  map[int]*openShard
	clock uint64
}

type openShard struct {
	f     *os.File
	users int
	used  uint64
}

// acquire returns shard k's open file, opening it if needed; release(k) must follow.
func (s *Shards) acquire(k int) (*os.File, error) {
	o := &s.files
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clock++
	if sh := o.open[k]; sh != nil {
		sh.users++
		sh.used = o.clock
		return sh.f, nil
	}
	if len(o.open) >= maxOpenShards {
		victim, oldest := -1, uint64(0)
		for j, sh := range o.open {
			if sh.users == 0 && (victim < 0 || sh.used < oldest) {
				victim, oldest = j, sh.used
			}
		}
		if victim >= 0 {
			o.open[victim].f.Close()
			delete(o.open, victim)
		}
	}
	f, size, err := bounded.Open(s.Paths[k])
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	if size != s.Infos[k].FileSize {
		f.Close()
		return nil, fmt.Errorf("data: shard %s is %d bytes, %d when the set was opened: it changed while in use", s.Paths[k], size, s.Infos[k].FileSize)
	}
	if o.open == nil {
		o.open = map[int]*openShard{}
	}
	o.open[k] = &openShard{f: f, users: 1, used: o.clock}
	return f, nil
}

func (s *Shards) release(k int) {
	s.files.mu.Lock()
	defer s.files.mu.Unlock()
	if sh := s.files.open[k]; sh != nil {
		sh.users--
	}
}

// openCount is how many shard files are open now.
func (s *Shards) openCount() int {
	s.files.mu.Lock()
	defer s.files.mu.Unlock()
	return len(s.files.open)
}

// OpenShards opens every *.shard file of dir (or the single shard file dir names) and checks they form
// one set: the same kind, image size and classes, and shard numbers 0..n-1 each present once.
func OpenShards(dir string) (*Shards, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("data: shards: %w", err)
	}
	var paths []string
	if st.IsDir() {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("data: shards: %w", err)
		}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ShardExt) {
				paths = append(paths, filepath.Join(dir, e.Name()))
			}
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("data: shards: %s holds no *%s file; pack one with `trainer data pack SRC %s`", dir, ShardExt, dir)
		}
	} else {
		paths = []string{dir}
	}
	sort.Strings(paths)
	s := &Shards{Dir: dir, Paths: paths}
	seen := map[int]string{}
	for _, p := range paths {
		// Each file is open only while its header and index are read: records open it again as
		// they are read (acquire), at most maxOpenShards at a time.
		info, err := parseShardFile(p)
		if err != nil {
			return nil, err
		}
		if len(s.Infos) > 0 {
			a := s.Infos[0]
			if info.Kind != a.Kind || info.Height != a.Height || info.Width != a.Width || info.Channels != a.Channels ||
				!slices.Equal(info.Classes, a.Classes) || info.Shards != a.Shards {
				return nil, fmt.Errorf("data: shards %s and %s are not of one set (kind, image size, classes or shard count differ)", paths[0], p)
			}
		}
		if prev, dup := seen[info.Shard]; dup && st.IsDir() {
			return nil, fmt.Errorf("data: shards %s and %s both claim to be shard %d", prev, p, info.Shard)
		}
		seen[info.Shard] = p
		s.Infos = append(s.Infos, info)
	}
	s.start = make([]int, len(s.Infos)+1)
	for k, info := range s.Infos {
		s.start[k+1] = s.start[k] + info.Count
	}
	if st.IsDir() && len(seen) != s.Infos[0].Shards {
		return nil, fmt.Errorf("data: shards: %s holds %d shards of a set of %d: some are missing", dir, len(seen), s.Infos[0].Shards)
	}
	if s.Len() == 0 {
		return nil, fmt.Errorf("data: shards: %s holds no records", dir)
	}
	return s, nil
}

// parseShardFile reads the header and index of the shard file at p.
func parseShardFile(p string) (*ShardInfo, error) {
	f, size, err := bounded.Open(p)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	info, err := ParseShard(f, size)
	if err != nil {
		return nil, fmt.Errorf("data: shard %s: %w", p, err)
	}
	return info, nil
}

// Close closes the shard files open now.
func (s *Shards) Close() error {
	s.files.mu.Lock()
	defer s.files.mu.Unlock()
	var errs []error
	for _, sh := range s.files.open {
		errs = append(errs, sh.f.Close())
	}
	s.files.open = nil
	return errors.Join(errs...)
}

func (s *Shards) Len() int {
	if len(s.start) == 0 {
		return 0
	}
	return s.start[len(s.start)-1]
}
func (s *Shards) NumClasses() int      { return s.Infos[0].NumClasses }
func (s *Shards) ClassNames() []string { return s.Infos[0].Classes }

// Kind is the record kind of the set.
func (s *Shards) Kind() ShardKind { return s.Infos[0].Kind }

// locate returns the shard and record of global index i.
func (s *Shards) locate(i int) (int, int) {
	k := sort.SearchInts(s.start, i+1) - 1
	return k, i - s.start[k]
}

func (s *Shards) Label(i int) int32 {
	k, j := s.locate(i)
	return s.Infos[k].Labels[j]
}

func (s *Shards) Describe(i int) string {
	k, j := s.locate(i)
	return fmt.Sprintf("%s record %d", s.Paths[k], j)
}

// Shape reports the fixed record size of a pixel set; a Loader uses it when there is no Transform.
func (s *Shards) Shape() (int, int, int) {
	a := s.Infos[0]
	if a.Kind != ShardPixels {
		return 0, 0, 0
	}
	return a.Height, a.Width, a.Channels
}

// Example reads record i into buf and checks it against its CRC-32C (version 2 shards): a record
// whose bytes changed since it was packed is an error naming the file and the record, and a bad
// record (ErrBadRecord).
func (s *Shards) Example(i int, buf []byte) (Example, error) {
	k, j := s.locate(i)
	info := s.Infos[k]
	n := info.Len(j)
	buf = slices.Grow(buf[:0], n)[:n]
	f, err := s.acquire(k)
	if err != nil {
		return Example{}, err
	}
	_, err = f.ReadAt(buf, info.Offsets[j])
	s.release(k)
	if err != nil {
		return Example{}, fmt.Errorf("data: reading %s record %d: %w", s.Paths[k], j, err)
	}
	if info.CRCs != nil {
		if got := crc32.Checksum(buf, castagnoli); got != info.CRCs[j] {
			return Example{}, badRecord(fmt.Errorf("data: %s record %d: CRC-32C 0x%08x, the index says 0x%08x: "+
				"the record's bytes [%d, %d) are corrupt (re-pack the shard; data.on_bad_record: skip trains without it)",
				s.Paths[k], j, got, info.CRCs[j], info.Offsets[j], info.Offsets[j+1]))
		}
	}
	ex := Example{Label: info.Labels[j]}
	if info.Kind == ShardPixels {
		ex.Pixels, ex.Height, ex.Width, ex.Channels = buf, info.Height, info.Width, info.Channels
	} else {
		ex.Encoded = buf
	}
	return ex, nil
}

// VerifyShard checks a shard file completely: header, index, class names and the records' CRC-32C
// (in a version 2 shard, each record's, naming the damaged ones).
func VerifyShard(path string) (*ShardInfo, error) {
	f, _, err := bounded.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	info, err := ParseShard(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("data: shard %s: %w", path, err)
	}
	h := crc32.New(castagnoli)
	records := io.NewSectionReader(f, ShardHeaderSize, info.IndexOffset-ShardHeaderSize)
	if info.CRCs != nil {
		// Record by record, to name the damaged ones.
		var bad []string
		var buf []byte
		for j := range info.Count {
			buf = slices.Grow(buf[:0], info.Len(j))[:info.Len(j)]
			if _, err := io.ReadFull(records, buf); err != nil {
				return nil, fmt.Errorf("data: shard %s: reading record %d: %w", path, j, err)
			}
			h.Write(buf)
			if crc32.Checksum(buf, castagnoli) != info.CRCs[j] {
				bad = append(bad, fmt.Sprint(j))
			}
		}
		if len(bad) > 0 {
			more := ""
			if len(bad) > 10 {
				bad, more = bad[:10], fmt.Sprintf(" and %d more", len(bad)-10)
			}
			return nil, fmt.Errorf("data: shard %s: records CRC-32C: record %s%s does not match its CRC-32C: its bytes are corrupt",
				path, strings.Join(bad, ", "), more)
		}
	} else if n, err := io.Copy(h, records); err != nil || n != info.IndexOffset-ShardHeaderSize {
		return nil, fmt.Errorf("data: shard %s: reading the records: %d bytes (%v)", path, n, err)
	}
	if got := h.Sum32(); got != info.RecordsCRC {
		// One CRC cannot say which record is damaged: name the byte range.
		return nil, fmt.Errorf("data: shard %s: records CRC-32C 0x%08x, header says 0x%08x: bytes [%d, %d) are corrupt",
			path, got, info.RecordsCRC, ShardHeaderSize, info.IndexOffset)
	}
	return info, nil
}

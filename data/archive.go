package data

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/trainer/trainer/internal/bounded"
)

// Tar archives of images read as Sources without unpacking them: Imagenette's .tgz (an ImageFolder
// tree with train/ and val/), ImageNet's ILSVRC2012_img_train.tar (a tar of one tar per class) and
// ILSVRC2012_img_val.tar (flat images, labelled by an ImageLabels file). A plain tar is read in place
// (each image at its offset in the file, in any order); a gzip-compressed one as a stream, so its
// images come in archive order and are meant to be read in that order, as Pack does.

// Bounds on what listing an archive may allocate.
const (
	// DefaultMaxArchiveMembers bounds the regular files an archive may hold, nested ones included
	// (ImageNet's train tar holds 1,281,167 images).
	DefaultMaxArchiveMembers = 1 << 24
	// DefaultMaxMemberSize bounds one image member's bytes: it is read whole into memory.
	DefaultMaxMemberSize = 64 << 20
)

// ArchiveOptions configures OpenArchive.
type ArchiveOptions struct {
	// Labels name the class of each image of an archive of flat images (ILSVRC2012_img_val.tar);
	// nil for archives whose images sit in class folders or per-class tars.
	Labels *ImageLabels
	// MaxMembers and MaxMemberSize bound the listing (0: DefaultMaxArchiveMembers and
	// DefaultMaxMemberSize).
	MaxMembers    int
	MaxMemberSize int64
}

// Archive is an opened tar archive of images and the splits found in it.
type Archive struct {
	Path string
	// Splits are what the archive holds: "train" and "val" for an ImageFolder tree with those folders
	// (validation/ and test/ count as val), else one split named "".
	Splits []ArchiveSplit

	file       *os.File // a plain tar, read at offsets; nil for a compressed one
	compressed bool
	entries    []archiveEntry // every image member, in archive order

	mu     sync.Mutex
	cursor *archiveCursor // the stream of a compressed archive, where the last read left it
}

// ArchiveSplit is one split of an archive as a Source.
type ArchiveSplit struct {
	Name   string
	Source Source
}

// archiveEntry is one image member: its path (a member of a nested tar is "OUTER.tar/NAME"), the
// nested tar it is in ("" at the top), its size and, in a plain tar, where its bytes start.
type archiveEntry struct {
	name, outer  string
	size, offset int64
}

// IsArchive says whether the file at p starts as a tar or a gzip stream (which OpenArchive reads as
// a compressed tar).
func IsArchive(p string) bool {
	f, _, err := bounded.Open(p) // a device or a pipe is no archive
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	if n >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		return true
	}
	return n == 512 && string(head[257:262]) == "ustar"
}

// OpenArchive lists the tar archive at p (compressed with gzip or not) and finds its splits. Member
// names that are absolute or climb out of the archive (a ".." component), links and devices are
// refused, as are more than MaxMembers regular files and an image larger than MaxMemberSize; files
// that are not .jpeg/.jpg/.png images are passed over. The Archive must be closed.
func OpenArchive(p string, opts ArchiveOptions) (*Archive, error) {
	if opts.MaxMembers <= 0 {
		opts.MaxMembers = DefaultMaxArchiveMembers
	}
	if opts.MaxMemberSize <= 0 {
		opts.MaxMemberSize = DefaultMaxMemberSize
	}
	a := &Archive{Path: p, compressed: isGzip(p)}
	if !a.compressed {
		f, _, err := bounded.Open(p)
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		a.file = f
	}
	members := 0
	err := a.walk(func(e archiveEntry, _ io.Reader) error {
		members++
		if members > opts.MaxMembers {
			return fmt.Errorf("more than %d members (raise the bound if the archive is genuine)", opts.MaxMembers)
		}
		if !isImageName(e.name) {
			return nil
		}
		if e.size > opts.MaxMemberSize {
			return fmt.Errorf("member %s is %d bytes, more than the %d an image may have", e.name, e.size, opts.MaxMemberSize)
		}
		a.entries = append(a.entries, e)
		return nil
	})
	if err == nil && a.file != nil {
		err = a.checkBounds()
	}
	if err == nil {
		err = a.findSplits(opts.Labels)
	}
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("data: archive %s: %w", p, err)
	}
	return a, nil
}

// checkBounds refuses a plain tar whose images do not all lie inside the file (a truncated download:
// listing seeks over the bytes without reading them).
func (a *Archive) checkBounds() error {
	st, err := a.file.Stat()
	if err != nil {
		return err
	}
	for _, e := range a.entries {
		if e.offset+e.size > st.Size() {
			return fmt.Errorf("member %s ends at byte %d, the file has %d: truncated", e.name, e.offset+e.size, st.Size())
		}
	}
	return nil
}

// Close releases the archive's file and stream.
func (a *Archive) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cursor != nil {
		a.cursor.stop()
		a.cursor = nil
	}
	if a.file != nil {
		err := a.file.Close()
		a.file = nil
		return err
	}
	return nil
}

func isGzip(p string) bool {
	f, _, err := bounded.Open(p) // a device or a pipe is no archive
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [2]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && magic == [2]byte{0x1f, 0x8b}
}

func isImageName(name string) bool {
	return slices.Contains(imageExts, strings.ToLower(path.Ext(name)))
}

// memberName checks a member's name and returns it cleaned: absolute names and ".." components
// (with either slash) are refused, so no name read here can point outside the archive.
func memberName(raw string) (string, error) {
	if raw == "" || strings.ContainsRune(raw, 0) || path.IsAbs(raw) || strings.HasPrefix(raw, `\`) {
		return "", fmt.Errorf("member name %q is absolute or empty: refused", raw)
	}
	for _, part := range strings.FieldsFunc(raw, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == ".." {
			return "", fmt.Errorf("member name %q climbs out of the archive (..): refused", raw)
		}
	}
	return path.Clean(raw), nil
}

// walk calls visit for every regular member of the archive in order, descending into members named
// *.tar (one level: ImageNet's per-class tars). The reader visit gets holds the member's bytes until
// visit returns; in a plain tar visit need not read it (the entry's offset locates it).
func (a *Archive) walk(visit func(archiveEntry, io.Reader) error) error {
	if !a.compressed {
		if _, err := a.file.Seek(0, io.SeekStart); err != nil {
			return err
		}
		return walkTar(&seekCounter{r: a.file}, a.file, 0, "", visit)
	}
	f, _, err := bounded.Open(a.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	return walkTar(gz, nil, 0, "", visit)
}

// walkTar walks the tar stream r, which starts at byte base of file when file is not nil (a plain
// tar: r then counts its position, nested tars are read through sections of file and offsets are
// recorded); outer is the nested tar r is, "" at the top.
func walkTar(r io.Reader, file io.ReaderAt, base int64, outer string, visit func(archiveEntry, io.Reader) error) error {
	counter, _ := r.(*seekCounter)
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		where := ""
		if outer != "" {
			where = " in " + outer
		}
		if err != nil {
			return fmt.Errorf("reading the tar%s: %w", where, err)
		}
		name, err := memberName(h.Name)
		if err != nil {
			return fmt.Errorf("%v%s", err, where)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg, '\x00': // '\x00': the old regular-file flag (tar.TypeRegA)
		default:
			return fmt.Errorf("member %s%s is not a regular file or directory (type %q): refused", name, where, h.Typeflag)
		}
		if h.Size < 0 {
			return fmt.Errorf("member %s%s has size %d", name, where, h.Size)
		}
		var offset int64 = -1
		if counter != nil {
			offset = base + counter.n
		}
		if outer == "" && strings.EqualFold(path.Ext(name), ".tar") {
			var inner io.Reader = tr
			if file != nil {
				inner = &seekCounter{r: io.NewSectionReader(file, offset, h.Size)}
			}
			if err := walkTar(inner, file, offset, name, visit); err != nil {
				return err
			}
			continue
		}
		e := archiveEntry{name: name, size: h.Size, offset: offset, outer: outer}
		if outer != "" {
			e.name = outer + "/" + name
		}
		if err := visit(e, tr); err != nil {
			return err
		}
	}
}

// seekCounter is a ReadSeeker that knows its position: tar.Reader reads headers block by block and
// seeks over data it is not asked for, so after Next the position is where the member's bytes start.
type seekCounter struct {
	r io.ReadSeeker
	n int64
}

func (c *seekCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *seekCounter) Seek(offset int64, whence int) (int64, error) {
	p, err := c.r.Seek(offset, whence)
	if err == nil {
		c.n = p
	}
	return p, err
}

// archiveItem is one example of a split: its entry's position in Archive.entries and its label.
type archiveItem struct {
	entry int
	label int32
}

// findSplits sorts the listed images into splits: by the nested tar they are in (per-class tars: one
// split), by their folders (.../train/<class>/<image>, .../val/<class>/<image>, or <class>/<image>:
// one split), or, for images with no folder, by labels.
func (a *Archive) findSplits(labels *ImageLabels) error {
	if len(a.entries) == 0 {
		return errors.New("no .jpeg, .jpg or .png member")
	}
	nested := 0
	for _, e := range a.entries {
		if e.outer != "" {
			nested++
		}
	}
	type placed struct{ split, class string }
	place := make([]placed, len(a.entries))
	switch {
	case nested == len(a.entries):
		for i, e := range a.entries {
			place[i] = placed{"", strings.TrimSuffix(path.Base(e.outer), path.Ext(e.outer))}
		}
	case nested > 0:
		return fmt.Errorf("%d images are in nested tars and %d are not: expected one layout", nested, len(a.entries)-nested)
	case !strings.Contains(a.entries[0].name, "/"):
		if labels == nil {
			return fmt.Errorf("its %d images are not in class folders (e.g. %s): give the labels of this split "+
				"(ILSVRC2012_devkit_t12.tar.gz, or LOC_val_solution.csv)", len(a.entries), a.entries[0].name)
		}
		for i, e := range a.entries {
			if strings.Contains(e.name, "/") {
				return fmt.Errorf("member %s is in a folder, %s is not: expected one layout", e.name, a.entries[0].name)
			}
			class, ok := labels.Of(e.name)
			if !ok {
				return fmt.Errorf("image %s has no label in %s", e.name, labels.Source)
			}
			place[i] = placed{"", class}
		}
	default:
		var err error
		if place, err = folderPlaces(a.entries, func(split, class string) placed { return placed{split, class} }); err != nil {
			return err
		}
	}
	var order []string // split names as first seen, then sorted
	bySplit := map[string][]int{}
	for i, p := range place {
		if _, ok := bySplit[p.split]; !ok {
			order = append(order, p.split)
		}
		bySplit[p.split] = append(bySplit[p.split], i)
	}
	slices.Sort(order)
	for _, split := range order {
		idx := bySplit[split]
		var classes []string
		if labels != nil {
			classes = labels.Classes
		} else {
			for _, i := range idx {
				classes = append(classes, place[i].class)
			}
			slices.Sort(classes)
			classes = slices.Compact(classes)
		}
		if len(classes) > 1<<16 {
			return fmt.Errorf("split %q: %d classes, at most 65536 supported", split, len(classes))
		}
		items := make([]archiveItem, len(idx))
		for k, i := range idx {
			label, _ := slices.BinarySearch(classes, place[i].class)
			items[k] = archiveItem{entry: i, label: int32(label)}
		}
		if !a.compressed {
			// Read in place: the ImageFolder order of the unpacked tree (class, then file name).
			slices.SortStableFunc(items, func(x, y archiveItem) int {
				if x.label != y.label {
					return int(x.label - y.label)
				}
				return strings.Compare(path.Base(a.entries[x.entry].name), path.Base(a.entries[y.entry].name))
			})
		}
		a.Splits = append(a.Splits, ArchiveSplit{Name: split, Source: &archiveSource{a: a, split: split, items: items, classes: classes}})
	}
	return nil
}

// splitFolders are the folder names that make a split of an ImageFolder tree, and the split each is.
var splitFolders = map[string]string{"train": "train", "val": "val", "validation": "val", "test": "val"}

// folderPlaces places images laid out as [PREFIX/]SPLIT/CLASS/IMAGE (every image so) or
// [PREFIX/]CLASS/IMAGE, with one PREFIX for all.
func folderPlaces[P any](entries []archiveEntry, mk func(split, class string) P) ([]P, error) {
	parts := func(e archiveEntry) []string { return strings.Split(e.name, "/") }
	splitTree := true
	for _, e := range entries {
		p := parts(e)
		if _, ok := splitFolders[strings.ToLower(valueAt(p, len(p)-3))]; !ok {
			splitTree = false
			break
		}
	}
	depth := 2 // CLASS/IMAGE below the prefix
	if splitTree {
		depth = 3
	}
	out := make([]P, len(entries))
	prefix := ""
	folderOf := map[string]string{} // split -> the folder name that made it
	for i, e := range entries {
		p := parts(e)
		if len(p) < depth {
			return nil, fmt.Errorf("image %s is not in a class folder (expected [PREFIX/]CLASS/IMAGE or [PREFIX/]train|val/CLASS/IMAGE)", e.name)
		}
		pre := strings.Join(p[:len(p)-depth], "/")
		if i == 0 {
			prefix = pre
		} else if pre != prefix {
			return nil, fmt.Errorf("images under two roots, %q and %q (e.g. %s): expected one tree", prefix, pre, e.name)
		}
		split := ""
		if splitTree {
			name := p[len(p)-3]
			split = splitFolders[strings.ToLower(name)]
			// Folders matched without case, or two names of one split, would merge into it.
			if prev, ok := folderOf[split]; ok && prev != name {
				return nil, fmt.Errorf("folders %q and %q both make the %s split (e.g. %s): expected one", prev, name, split, e.name)
			}
			folderOf[split] = name
		}
		out[i] = mk(split, p[len(p)-2])
	}
	return out, nil
}

func valueAt(s []string, i int) string {
	if i < 0 || i >= len(s) {
		return ""
	}
	return s[i]
}

// archiveSource is one split of an Archive.
type archiveSource struct {
	a       *Archive
	split   string
	items   []archiveItem
	classes []string
}

func (s *archiveSource) Len() int             { return len(s.items) }
func (s *archiveSource) NumClasses() int      { return len(s.classes) }
func (s *archiveSource) ClassNames() []string { return s.classes }
func (s *archiveSource) Label(i int) int32    { return s.items[i].label }
func (s *archiveSource) Describe(i int) string {
	return s.a.Path + ": " + s.a.entries[s.items[i].entry].name
}

// Example reads image i: at its offset in a plain tar; from the stream of a compressed one, which is
// read on from where the last call left it (calls in increasing order read the archive once; an
// earlier image restarts the stream).
func (s *archiveSource) Example(i int, buf []byte) (Example, error) {
	k := s.items[i].entry
	e := s.a.entries[k]
	buf = slices.Grow(buf[:0], int(e.size))[:e.size]
	var err error
	if !s.a.compressed {
		s.a.mu.Lock()
		f := s.a.file
		s.a.mu.Unlock()
		if f == nil {
			return Example{}, fmt.Errorf("data: %s: the archive is closed", s.Describe(i))
		}
		_, err = f.ReadAt(buf, e.offset)
	} else {
		err = s.a.readStreamed(k, buf)
	}
	if err != nil {
		return Example{}, fmt.Errorf("data: reading %s: %w", s.Describe(i), err)
	}
	return Example{Label: s.items[i].label, Encoded: buf}, nil
}

// archiveCursor is a compressed archive's stream, paused after the entry at position at.
type archiveCursor struct {
	next func() (archiveEntry, io.Reader, bool)
	stop func()
	err  *error // the walk's error, once it has ended
	at   int
}

// readStreamed reads entry k of a compressed archive into buf.
func (a *Archive) readStreamed(k int, buf []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cursor != nil && a.cursor.at >= k {
		a.cursor.stop()
		a.cursor = nil
	}
	if a.cursor == nil {
		a.cursor = a.openCursor()
	}
	c := a.cursor
	for {
		e, r, ok := c.next()
		if !ok {
			if *c.err != nil {
				return *c.err
			}
			return fmt.Errorf("the archive ended before this member: it changed since it was listed")
		}
		if !isImageName(e.name) {
			continue
		}
		c.at++
		if c.at < k {
			continue
		}
		if e.name != a.entries[k].name || e.size != a.entries[k].size {
			return fmt.Errorf("found %s (%d bytes) where the listing had %s: the archive changed since it was listed",
				e.name, e.size, a.entries[k].name)
		}
		_, err := io.ReadFull(r, buf)
		return err
	}
}

// openCursor starts the stream of a compressed archive's members.
func (a *Archive) openCursor() *archiveCursor {
	var walkErr error
	stopped := errors.New("stopped")
	seq := func(yield func(archiveEntry, io.Reader) bool) {
		err := a.walk(func(e archiveEntry, r io.Reader) error {
			if !yield(e, r) {
				return stopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, stopped) {
			walkErr = err
		}
	}
	next, stop := iter.Pull2(iter.Seq2[archiveEntry, io.Reader](seq))
	return &archiveCursor{next: next, stop: stop, err: &walkErr, at: -1}
}

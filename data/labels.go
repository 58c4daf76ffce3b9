package data

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/trainer/trainer/internal/bounded"
)

// ImageLabels name the class of each image of a split whose images are not in class folders:
// ImageNet's validation tar, labelled by the devkit (ILSVRC2012_devkit_t12.tar.gz) or by Kaggle's
// LOC_val_solution.csv.
type ImageLabels struct {
	Source  string   // the file they were read from
	Classes []string // every class (WordNet IDs), sorted: the label of a class is its position
	byImage map[string]string
}

// Of returns the class of the image member name (matched by its base name without extension).
func (l *ImageLabels) Of(name string) (string, bool) {
	base := path.Base(name)
	c, ok := l.byImage[strings.TrimSuffix(base, path.Ext(base))]
	return c, ok
}

// Len is the number of labelled images.
func (l *ImageLabels) Len() int { return len(l.byImage) }

// The devkit's members this reads, below its top folder.
const (
	devkitGroundTruth = "data/ILSVRC2012_validation_ground_truth.txt"
	devkitMeta        = "data/meta.mat"
	maxLabelsFile     = 64 << 20 // bounds each file read whole
)

// ReadImageLabels reads the labels of ImageNet's validation images from the devkit archive
// (ILSVRC2012_devkit_t12.tar.gz: the ground truth gives each image's ILSVRC2012_ID, meta.mat maps
// the IDs of the 1000 leaf synsets to WordNet IDs) or from LOC_val_solution.csv (ImageId, then
// boxes whose first word is the WordNet ID).
func ReadImageLabels(p string) (*ImageLabels, error) {
	var l *ImageLabels
	var err error
	if strings.EqualFold(path.Ext(p), ".csv") {
		l, err = readLOCSolution(p)
	} else {
		l, err = readDevkit(p)
	}
	if err != nil {
		return nil, fmt.Errorf("data: labels %s: %w", p, err)
	}
	l.Source = p
	return l, nil
}

// readLOCSolution reads Kaggle's LOC_val_solution.csv.
func readLOCSolution(p string) (*ImageLabels, error) {
	f, _, err := bounded.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReader(io.LimitReader(f, maxLabelsFile)))
	r.FieldsPerRecord = 2
	header, err := r.Read()
	if err != nil {
		return nil, err
	}
	if header[0] != "ImageId" {
		return nil, fmt.Errorf("header %q, want ImageId,PredictionString", strings.Join(header, ","))
	}
	l := &ImageLabels{byImage: map[string]string{}}
	classes := map[string]bool{}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		words := strings.Fields(rec[1])
		if len(words) == 0 {
			return nil, fmt.Errorf("image %s has no box", rec[0])
		}
		l.byImage[rec[0]] = words[0]
		classes[words[0]] = true
	}
	if len(l.byImage) == 0 {
		return nil, errors.New("no image")
	}
	for c := range classes {
		l.Classes = append(l.Classes, c)
	}
	slices.Sort(l.Classes)
	return l, nil
}

// readDevkit reads the ground truth and meta.mat out of the devkit archive.
func readDevkit(p string) (*ImageLabels, error) {
	f, _, err := bounded.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = bufio.NewReader(f)
	if isGzip(p) {
		if r, err = gzip.NewReader(r); err != nil {
			return nil, err
		}
	}
	tr := tar.NewReader(r)
	var truth, meta []byte
	for truth == nil || meta == nil {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		name, err := memberName(h.Name)
		if err != nil {
			return nil, err
		}
		var dst *[]byte
		switch {
		case name == devkitGroundTruth || strings.HasSuffix(name, "/"+devkitGroundTruth):
			dst = &truth
		case name == devkitMeta || strings.HasSuffix(name, "/"+devkitMeta):
			dst = &meta
		default:
			continue
		}
		if h.Size > maxLabelsFile {
			return nil, fmt.Errorf("%s is %d bytes, more than %d", name, h.Size, maxLabelsFile)
		}
		b := make([]byte, h.Size)
		if _, err := io.ReadFull(tr, b); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		*dst = b
	}
	if truth == nil || meta == nil {
		return nil, fmt.Errorf("want the devkit ILSVRC2012_devkit_t12.tar.gz, holding %s and %s", devkitGroundTruth, devkitMeta)
	}
	wnids, err := leafSynsets(meta)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", devkitMeta, err)
	}
	l := &ImageLabels{byImage: map[string]string{}}
	l.Classes = slices.Sorted(maps.Values(wnids))
	for i, line := range strings.Fields(string(truth)) {
		id, err := strconv.Atoi(line)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %q is not an ILSVRC2012_ID", devkitGroundTruth, i+1, line)
		}
		w, ok := wnids[id]
		if !ok {
			return nil, fmt.Errorf("%s line %d: ILSVRC2012_ID %d is not a leaf synset of %s", devkitGroundTruth, i+1, id, devkitMeta)
		}
		l.byImage[fmt.Sprintf("ILSVRC2012_val_%08d", i+1)] = w
	}
	return l, nil
}

// leafSynsets maps the ILSVRC2012_ID of every synset without children (the classes) to its WordNet
// ID, from meta.mat's struct array "synsets" (fields ILSVRC2012_ID, WNID, num_children, ...).
func leafSynsets(meta []byte) (map[int]string, error) {
	vars, err := readMAT(meta)
	if err != nil {
		return nil, err
	}
	s := vars["synsets"]
	if s == nil || s.class != mxSTRUCT {
		return nil, errors.New(`no struct array "synsets"`)
	}
	scalar := func(m *matArray) (float64, bool) {
		if m == nil || len(m.num) != 1 {
			return 0, false
		}
		return m.num[0], true
	}
	out := map[int]string{}
	for i := range s.elems {
		id, ok1 := scalar(s.field(i, "ILSVRC2012_ID"))
		children, ok2 := scalar(s.field(i, "num_children"))
		wnid := s.field(i, "WNID")
		if !ok1 || !ok2 || wnid == nil || wnid.text == "" {
			return nil, fmt.Errorf("synset %d lacks ILSVRC2012_ID, num_children or WNID", i+1)
		}
		if children == 0 {
			out[int(id)] = strings.TrimSpace(wnid.text)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no leaf synset")
	}
	return out, nil
}

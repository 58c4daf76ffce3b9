package main

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/internal/atomicfile"
	"github.com/trainer/trainer/internal/echo"
)

// newDataCommand declares `trainer data pack|inspect|verify|bench` and their flags.
func newDataCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "data",
		Short: "Pack images into shards, read them back, time the input pipeline",
		Long:  "Packs image datasets into checksummed shards, reads them back and times the input pipeline (docs/data.md).",
		RunE:  requireSubcommand,
	}
	pack := &cobra.Command{
		Use:   "pack SRC OUT",
		Short: "Pack a dataset into shards",
		Long: `Reads SRC and writes shards (docs/data.md): an ImageFolder root with train/ and val/ (each packed
to OUT/train, OUT/val), a single split's folder of class folders, CIFAR-10's binary batches, the
book's prepared Imagenette train.bin/val.bin (a folder holding them, or one file), or an archive as
downloaded, read without unpacking it: Imagenette's .tgz (to OUT/train, OUT/val), ImageNet's
ILSVRC2012_img_train.tar (per-class tars) or ILSVRC2012_img_val.tar (with --labels), or a folder
holding those two tars and the devkit (ILSVRC2012_devkit_t12.tar.gz) or LOC_val_solution.csv.`,
		Args: cobra.ExactArgs(2),
	}
	var pf packFlags
	pack.Flags().IntVar(&pf.Resize, "resize", 0, "resize encoded images whose shorter side is larger to this side `N`, re-encoded as JPEG (0: keep the files)")
	pack.Flags().StringVar(&pf.ShardSize, "shard-size", "1GiB", "start a new shard past this `SIZE`")
	pack.Flags().IntVar(&pf.Quality, "quality", 90, "JPEG quality `Q` of resized images")
	pack.Flags().IntVar(&pf.RestartMCUs, "restart-mcus", 1, "recode JPEGs losslessly with restart markers every `N` or more MCUs of a row, so a random crop decodes only its part (0: store them as they are)")
	pack.Flags().Int64Var(&pf.MaxImagePixels, "max-image-pixels", data.DefaultMaxImagePixels, "refuse, from its header, an image of more than `N` pixels (width × height)")
	pack.Flags().BoolVar(&pf.Overwrite, "overwrite", false, "pack into a non-empty OUT, replacing the shards there once the new ones are complete")
	pack.Flags().StringVar(&pf.Labels, "labels", "", "the labels of ImageNet's validation tar: `FILE` ILSVRC2012_devkit_t12.tar.gz or LOC_val_solution.csv (default: found beside the tar)")
	pack.RunE = func(cmd *cobra.Command, positional []string) error {
		return dataPackMain(pf, positional, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	inspect := &cobra.Command{
		Use:   "inspect FILE|DIR",
		Short: "Describe a shard or a folder of shards",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, positional []string) error {
			return dataInspectMain(positional, cmd.OutOrStdout())
		},
	}
	verify := &cobra.Command{
		Use:   "verify DIR",
		Short: "Check every shard's header, index and CRC-32C",
		Args:  cobra.ExactArgs(1),
	}
	var vf dataVerifyFlags
	verify.Flags().BoolVar(&vf.Decode, "decode", false, "also decode every encoded record")
	verify.Flags().Int64Var(&vf.MaxImagePixels, "max-image-pixels", data.DefaultMaxImagePixels, "with --decode, refuse an image of more than `N` pixels (width × height)")
	verify.RunE = func(cmd *cobra.Command, positional []string) error {
		return dataVerifyMain(vf, positional, cmd.OutOrStdout())
	}
	cmd.AddCommand(pack, newDataFetchCommand(), inspect, verify, newDataBenchCommand())
	return cmd
}

// parseByteSize reads 1GiB, 512MiB, 100MB, 64KiB or a plain number of bytes.
func parseByteSize(s string) (int64, error) {
	v, err := humanize.ParseBytes(s)
	if err != nil || v == 0 || v > math.MaxInt64 {
		return 0, fmt.Errorf("size %q: want a positive number with an optional unit (GiB, MiB, KiB, GB, MB, KB)", s)
	}
	return int64(v), nil
}

// packJob is one split to pack.
type packJob struct {
	name string
	src  func() (data.Source, error)
	out  string
}

// packJobs recognises what SRC is; closeAll releases the archives the jobs read.
func packJobs(src, out, labels string) (jobs []packJob, closeAll func(), err error) {
	var archives []*data.Archive
	closeAll = func() {
		for _, a := range archives {
			a.Close()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	st, err := os.Stat(src)
	if err != nil {
		return nil, closeAll, fmt.Errorf("data pack: %w", err)
	}
	// A folder is listed once, for sameClasses and for the packer.
	folder := func(dir string) func() (data.Source, error) {
		var once sync.Once
		var src data.Source
		var err error
		return func() (data.Source, error) {
			once.Do(func() { src, err = data.OpenImageFolder(dir) })
			return src, err
		}
	}
	bin := func(path string) func() (data.Source, error) {
		return func() (data.Source, error) { return data.OpenSource("imagenette-bin", path, "", data.SourceOptions{}) }
	}
	// archive lists the archive at path, its splits going to OUT/<split> (or dest for a single split).
	archive := func(path, dest, labelsPath string) error {
		var opts data.ArchiveOptions
		if labelsPath != "" {
			l, err := data.ReadImageLabels(labelsPath)
			if err != nil {
				return err
			}
			opts.Labels = l
		}
		a, err := data.OpenArchive(path, opts)
		if err != nil {
			return err
		}
		archives = append(archives, a)
		for _, split := range a.Splits {
			name, to := split.Name, filepath.Join(out, split.Name)
			if name == "" {
				name, to = archiveStem(path), dest
			}
			source := split.Source
			jobs = append(jobs, packJob{name, func() (data.Source, error) { return source, nil }, to})
		}
		return nil
	}
	isDir := func(p string) bool { s, err := os.Stat(p); return err == nil && s.IsDir() }
	isFile := func(p string) bool { s, err := os.Stat(p); return err == nil && !s.IsDir() }
	var ilsvrc data.ILSVRCFiles
	var isILSVRC bool
	var ilsvrcErr error
	if st.IsDir() {
		ilsvrc, isILSVRC, ilsvrcErr = data.FindILSVRC(src, labels)
	}
	switch {
	case !st.IsDir() && data.IsArchive(src):
		if err := archive(src, out, data.ILSVRCValLabels(src, labels)); err != nil {
			return nil, closeAll, err
		}
		return jobs, closeAll, sameClasses(jobs)
	case !st.IsDir():
		return []packJob{{filepath.Base(src), bin(src), out}}, closeAll, nil
	case isILSVRC:
		if ilsvrcErr != nil {
			return nil, closeAll, fmt.Errorf("data pack: %w, or pass --labels FILE", ilsvrcErr)
		}
		if ilsvrc.TrainTar != "" {
			if err := archive(ilsvrc.TrainTar, filepath.Join(out, "train"), ""); err != nil {
				return nil, closeAll, err
			}
			jobs[len(jobs)-1].name = "train"
		}
		if ilsvrc.ValTar != "" {
			if err := archive(ilsvrc.ValTar, filepath.Join(out, "val"), ilsvrc.ValLabels); err != nil {
				return nil, closeAll, err
			}
			jobs[len(jobs)-1].name = "val"
		}
		return jobs, closeAll, sameClasses(jobs)
	case isFile(filepath.Join(src, "data_batch_1.bin")) || isDir(filepath.Join(src, "cifar-10-batches-bin")):
		for _, split := range []string{"train", "test"} {
			jobs = append(jobs, packJob{split, func() (data.Source, error) { return data.OpenSource("cifar10", src, split, data.SourceOptions{}) },
				filepath.Join(out, map[string]string{"train": "train", "test": "val"}[split])})
		}
		return jobs, closeAll, nil
	case isFile(filepath.Join(src, "train.bin")):
		jobs := []packJob{{"train", bin(filepath.Join(src, "train.bin")), filepath.Join(out, "train")}}
		if isFile(filepath.Join(src, "val.bin")) {
			jobs = append(jobs, packJob{"val", bin(filepath.Join(src, "val.bin")), filepath.Join(out, "val")})
		}
		return jobs, closeAll, nil
	case isDir(filepath.Join(src, "train")):
		jobs := []packJob{{"train", folder(filepath.Join(src, "train")), filepath.Join(out, "train")}}
		for _, v := range []string{"val", "validation", "test"} {
			if isDir(filepath.Join(src, v)) {
				jobs = append(jobs, packJob{"val", folder(filepath.Join(src, v)), filepath.Join(out, "val")})
				break
			}
		}
		return jobs, closeAll, sameClasses(jobs)
	}
	return []packJob{{filepath.Base(src), folder(src), out}}, closeAll, nil
}

// archiveStem is an archive's file name without its extensions: the prefix of its shards.
func archiveStem(path string) string {
	name := filepath.Base(path)
	for _, ext := range []string{".tgz", ".gz", ".tar"} {
		name = strings.TrimSuffix(name, ext)
	}
	return name
}

// sameClasses refuses splits whose classes differ (of an archive, or an ImageFolder's train and val):
// a label is a class's position in its split's list, so a val split with other classes would be
// scored against the wrong ones.
func sameClasses(jobs []packJob) error {
	var first []string
	for k, job := range jobs {
		src, err := job.src()
		if err != nil {
			return err
		}
		if k == 0 {
			first = src.ClassNames()
			continue
		}
		if names := src.ClassNames(); !slices.Equal(first, names) {
			i := 0
			for i < min(len(first), len(names)) && first[i] == names[i] {
				i++
			}
			at := func(list []string) string {
				if i < len(list) {
					return echo.Quote(list[i])
				}
				return "none"
			}
			return fmt.Errorf("data pack: split %s has %d classes, split %s %d; class %d is %s in %s and %s in %s: the splits must have the same classes",
				job.name, len(names), jobs[0].name, len(first), i, at(names), job.name, at(first), jobs[0].name)
		}
	}
	return nil
}

// packFlags are `trainer data pack`'s flags, one field per flag.
type packFlags struct {
	Resize         int    // --resize
	RestartMCUs    int    // --restart-mcus
	ShardSize      string // --shard-size
	Quality        int    // --quality
	MaxImagePixels int64  // --max-image-pixels
	Overwrite      bool   // --overwrite
	Labels         string // --labels
}

// dataPackMain is `trainer data pack` with its parsed flags.
func dataPackMain(f packFlags, positional []string, stdout, stderr io.Writer) error {
	size, err := parseByteSize(f.ShardSize)
	if err != nil {
		return fmt.Errorf("data pack: --shard-size: %w", err)
	}
	if f.MaxImagePixels < 1 {
		return fmt.Errorf("data pack: --max-image-pixels %d, expected >= 1", f.MaxImagePixels)
	}
	out := positional[1]
	entries, err := os.ReadDir(out)
	if err == nil && len(entries) > 0 && !f.Overwrite {
		// Before any work: packing a large split first and then refusing would waste it.
		return fmt.Errorf("data pack: %s is not empty (%d entries, e.g. %s): pack into a new folder, or pass --overwrite "+
			"to replace the shards there", out, len(entries), entries[0].Name())
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("data pack: %w", err)
	}
	jobs, closeAll, err := packJobs(positional[0], out, f.Labels)
	if err != nil {
		return err
	}
	defer closeAll()
	if len(entries) > 0 {
		return packReplacing(out, jobs, stdout, stderr, f, size)
	}
	return runPackJobs(jobs, stdout, stderr, f, size, nil)
}

// packReplacing packs jobs over the non-empty dataset out (--overwrite) so that out holds the old
// dataset or the whole new one, never a mix: the new one is packed into a folder beside out, the old
// files that are not replaced (shards of folders no job writes, any other file) are linked into it,
// and it then takes out's name at once (atomicfile.ReplaceDir). A failure part-way (a corrupt image
// in val, a full disk) removes the new folder and leaves out as it was.
func packReplacing(out string, jobs []packJob, stdout, stderr io.Writer, f packFlags, size int64) (err error) {
	out = filepath.Clean(out)
	st, err := os.Lstat(out)
	if err != nil {
		return fmt.Errorf("data pack: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("data pack: %s is not a folder (a link?): --overwrite replaces the folder itself; name the folder", out)
	}
	staged, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".pack-*")
	if err != nil {
		return fmt.Errorf("data pack: %w", err)
	}
	if err := os.Chmod(staged, st.Mode().Perm()); err != nil { // MkdirTemp's 0700 is not the folder's
		os.RemoveAll(staged)
		return fmt.Errorf("data pack: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(staged)
		}
	}()
	replaced := map[string]bool{} // the folders whose shards the new ones replace, relative to out
	for i, job := range jobs {
		rel, err := filepath.Rel(out, filepath.Clean(job.out))
		if err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("data pack: %s is not inside %s", job.out, out)
		}
		replaced[rel] = true
		jobs[i].out = filepath.Join(staged, rel)
	}
	shown := func(p string) string { return filepath.Join(out, strings.TrimPrefix(p, staged)) }
	if err := runPackJobs(jobs, stdout, stderr, f, size, shown); err != nil {
		return fmt.Errorf("%w (%s is unchanged)", err, out)
	}
	err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		if strings.HasSuffix(d.Name(), data.ShardExt) && replaced[filepath.Dir(rel)] {
			return nil
		}
		dest := filepath.Join(staged, rel)
		if _, err := os.Lstat(dest); err == nil {
			return nil // the new dataset has its own
		}
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return err
		}
		return os.Link(p, dest)
	})
	if err != nil {
		return fmt.Errorf("data pack: keeping the files of %s the new shards do not replace: %w (%s is unchanged)", out, err, out)
	}
	if err := atomicfile.ReplaceDir(staged, out); err != nil {
		return fmt.Errorf("data pack: %w", err)
	}
	return nil
}

// runPackJobs packs each job's source into its folder, showing progress on stderr.
// shown, when set, is the folder a job's output will have (it is packed elsewhere first).
func runPackJobs(jobs []packJob, stdout, stderr io.Writer, f packFlags, size int64, shown func(string) string) error {
	progress := isTerminal(stderr)
	for _, job := range jobs {
		src, err := job.src()
		if err != nil {
			return err
		}
		start, last := time.Now(), time.Time{}
		report := func(done, total int, bytes int64, final bool) {
			if !final && time.Since(last) < 200*time.Millisecond {
				return
			}
			last = time.Now()
			line := fmt.Sprintf("pack %s: %d/%d images, %s, %.0f images/s", job.name, done, total,
				humanize.IBytes(uint64(bytes)), float64(done)/time.Since(start).Seconds())
			switch {
			case progress:
				fmt.Fprintf(stderr, "\r%s\x1b[K", line)
				if final {
					fmt.Fprintln(stderr)
				}
			case final:
				fmt.Fprintln(stderr, line)
			}
		}
		var written int64
		paths, err := data.Pack(src, job.out, job.name, data.PackOptions{Resize: f.Resize, Quality: f.Quality, RestartMCUs: f.RestartMCUs, ShardSize: size,
			MaxImagePixels: f.MaxImagePixels, Overwrite: f.Overwrite,
			Progress: func(done, total int, bytes int64) { written = bytes; report(done, total, bytes, false) }})
		if err != nil {
			if progress {
				fmt.Fprintln(stderr)
			}
			return err
		}
		report(src.Len(), src.Len(), written, true)
		where := job.out
		if shown != nil {
			where = shown(where)
		}
		fmt.Fprintf(stdout, "%s: %d images of %d classes in %d shards under %s\n", job.name, src.Len(), src.NumClasses(), len(paths), where)
	}
	return nil
}

// dataInspectMain is `trainer data inspect`.
func dataInspectMain(positional []string, stdout io.Writer) error {
	sh, err := data.OpenShards(positional[0])
	if err != nil {
		return err
	}
	defer sh.Close()
	for k, info := range sh.Infos {
		fmt.Fprintf(stdout, "%s: format v%d, shard %d of %d, %d %s records, %d bytes",
			echo.Terminal(sh.Paths[k]), info.Version, info.Shard, info.Shards, info.Count, info.Kind, info.FileSize)
		if info.Kind == data.ShardPixels {
			fmt.Fprintf(stdout, ", %dx%dx%d pixels", info.Height, info.Width, info.Channels)
		} else if info.Height > 0 {
			fmt.Fprintf(stdout, ", shorter side <= %d", info.Height)
		}
		fmt.Fprintf(stdout, ", records CRC-32C 0x%08x", info.RecordsCRC)
		if info.CRCs == nil {
			fmt.Fprint(stdout, ", no per-record CRC-32C (re-pack to have each record checked as it is read)")
		}
		fmt.Fprintln(stdout)
	}
	counts := make([]int, sh.NumClasses())
	for i := range sh.Len() {
		counts[sh.Label(i)]++
	}
	fmt.Fprintf(stdout, "%d records, %d classes:\n", sh.Len(), sh.NumClasses())
	for c, name := range sh.ClassNames() {
		if c == 20 && len(counts) > 21 {
			fmt.Fprintf(stdout, "  ... %d more classes\n", len(counts)-20)
			break
		}
		fmt.Fprintf(stdout, "  %4d %-24s %d\n", c, echo.Terminal(name), counts[c]) // class names come from the file
	}
	for i := range min(3, sh.Len()) {
		ex, err := sh.Example(i, nil)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("%d pixel bytes", len(ex.Pixels))
		if ex.Encoded != nil {
			what = fmt.Sprintf("%d bytes", len(ex.Encoded))
			if cfg, format, err := image.DecodeConfig(bytes.NewReader(ex.Encoded)); err == nil {
				what += fmt.Sprintf(" of %s, %dx%d", format, cfg.Width, cfg.Height)
			}
			if mcus, ok := data.JPEGRestartInterval(ex.Encoded); ok && mcus > 0 {
				what += fmt.Sprintf(", restart markers every %d MCUs (a crop decodes only its pieces)", mcus)
			} else if ok {
				what += ", no restart markers (`trainer data pack` adds them)"
			}
		}
		fmt.Fprintf(stdout, "record %d: label %d, %s\n", i, ex.Label, what)
	}
	return nil
}

// dataVerifyFlags are `trainer data verify`'s flags, one field per flag.
type dataVerifyFlags struct {
	Decode         bool  // --decode
	MaxImagePixels int64 // --max-image-pixels
}

// dataVerifyMain is `trainer data verify` with its parsed flags.
func dataVerifyMain(f dataVerifyFlags, positional []string, stdout io.Writer) error {
	sh, err := data.OpenShards(positional[0]) // the set is whole and every header and index is sound
	if err != nil {
		return err
	}
	defer sh.Close()
	var errs []error
	for _, p := range sh.Paths {
		if _, err := data.VerifyShard(p); err != nil {
			errs = append(errs, err)
		}
	}
	if f.Decode && sh.Kind() == data.ShardEncoded {
		var buf []byte
		for i := range sh.Len() {
			ex, err := sh.Example(i, buf)
			if err == nil {
				buf = ex.Encoded
				_, _, err = data.DecodeImage(ex.Encoded, f.MaxImagePixels)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", sh.Describe(i), err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("data verify %s: %d problems:\n%w", positional[0], len(errs), errors.Join(errs...))
	}
	fmt.Fprintf(stdout, "ok: %d shards, %d records, %d classes, CRC-32C checked", len(sh.Paths), sh.Len(), sh.NumClasses())
	if f.Decode {
		fmt.Fprintf(stdout, ", every record decoded")
	}
	fmt.Fprintln(stdout)
	return nil
}

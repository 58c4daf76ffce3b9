package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/internal/download"
)

// mirrorEnv names a base URL that replaces the official one of every fetched archive (a local mirror,
// or a test server).
const mirrorEnv = "TRAINER_DATA_MIRROR"

// newDataFetchCommand declares `trainer data fetch`.
func newDataFetchCommand() *cobra.Command {
	fetch := &cobra.Command{
		Use:   "fetch DATASET OUT",
		Short: "Download a dataset's archive and pack it into shards",
		Long: `Downloads DATASET's official archive into OUT (resuming a partial download, checking its size and
SHA-256), then packs it into OUT/train and OUT/val, which a recipe reads with data.source: shards and
data.dir: OUT. The archive stays in OUT for a later re-pack; delete it once done. A split already packed
in OUT is left as it is. Datasets: imagenette (fast.ai's Imagenette 2: 9,469 train, 3,925 val images).`,
		Args: cobra.ExactArgs(2),
	}
	var f fetchFlags
	fetch.Flags().StringVar(&f.Size, "size", "320", "the archive `PX` to fetch: Imagenette's 320 or 160 (the shorter side of its images)")
	fetch.Flags().StringVar(&f.Mirror, "mirror", "", "download from this base `URL` instead of the official host (default $"+mirrorEnv+")")
	fetch.Flags().StringVar(&f.SHA256, "sha256", "", "expected SHA-256 `HEX` of the archive, for a mirror that serves another file (default: the published digest)")
	fetch.Flags().IntVar(&f.Resize, "resize", 0, "resize images whose shorter side is larger to this side `N` when packing (0: keep the files)")
	fetch.Flags().StringVar(&f.ShardSize, "shard-size", "1GiB", "start a new shard past this `SIZE`")
	fetch.RunE = func(cmd *cobra.Command, positional []string) error {
		return dataFetchMain(f, positional, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return fetch
}

// fetchFlags are `trainer data fetch`'s flags, one field per flag.
type fetchFlags struct {
	Size      string // --size
	Mirror    string // --mirror
	SHA256    string // --sha256
	Resize    int    // --resize
	ShardSize string // --shard-size
}

// dataFetchMain is `trainer data fetch DATASET OUT` with its parsed flags.
func dataFetchMain(f fetchFlags, positional []string, stdout, stderr io.Writer) error {
	name, out := positional[0], positional[1]
	ds, ok := data.LookupDataset(name)
	if !ok || len(ds.Archives) == 0 {
		var fetchable []string
		for _, d := range data.KnownDatasets {
			if len(d.Archives) > 0 {
				fetchable = append(fetchable, d.Name)
			}
		}
		hint := ""
		if ok {
			hint = "; to get " + ds.Name + ": " + ds.HowToGet(out)
		}
		return fmt.Errorf("data fetch: %q has no archive to fetch (fetchable: %s)%s", name, strings.Join(fetchable, ", "), hint)
	}
	i := slices.IndexFunc(ds.Archives, func(a data.DatasetArchive) bool { return a.Variant == f.Size })
	if i < 0 {
		var variants []string
		for _, a := range ds.Archives {
			variants = append(variants, a.Variant)
		}
		return fmt.Errorf("data fetch %s: --size %s, expected one of %s", name, f.Size, strings.Join(variants, ", "))
	}
	arc := ds.Archives[i]
	size, err := parseByteSize(f.ShardSize)
	if err != nil {
		return fmt.Errorf("data fetch: --shard-size: %w", err)
	}
	// The splits already packed are kept; the others are packed from the archive.
	var todo []string
	for _, split := range []string{"train", "val"} {
		if sh, err := data.OpenShards(filepath.Join(out, split)); err == nil {
			sh.Close()
			fmt.Fprintf(stdout, "%s: already packed in %s\n", split, filepath.Join(out, split))
			continue
		}
		todo = append(todo, split)
	}
	if len(todo) == 0 {
		fmt.Fprintf(stdout, "%s is ready: data.source: shards, data.dir: %s\n", name, out)
		return nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("data fetch: %w", err)
	}
	url := arc.URL
	base := f.Mirror
	if base == "" {
		base = os.Getenv(mirrorEnv)
	}
	if base != "" {
		url = strings.TrimSuffix(base, "/") + "/" + arc.File()
	}
	want, wantSize := arc.SHA256, arc.Size
	if f.SHA256 != "" {
		want, wantSize = f.SHA256, 0 // another file: its size is not known here
	}
	dest := filepath.Join(out, arc.File())
	fmt.Fprintf(stdout, "fetching %s into %s\n", download.Redact(url), dest)
	bar := newDownloadBar(stderr, arc.File())
	downloaded, err := download.File(url, dest, download.Options{SHA256: want, Size: wantSize, Progress: bar.update})
	bar.done()
	if err != nil {
		return fmt.Errorf("data fetch: %w", err)
	}
	if downloaded {
		fmt.Fprintf(stdout, "%s: SHA-256 %s checked\n", dest, strings.TrimPrefix(want, "sha256:"))
	} else {
		fmt.Fprintf(stdout, "%s: already downloaded and checked\n", dest)
	}
	a, err := data.OpenArchive(dest, data.ArchiveOptions{})
	if err != nil {
		return fmt.Errorf("data fetch: %w", err)
	}
	defer a.Close()
	var jobs []packJob
	for _, split := range a.Splits {
		if !slices.Contains(todo, split.Name) {
			continue
		}
		src := split.Source
		jobs = append(jobs, packJob{split.Name, func() (data.Source, error) { return src, nil }, filepath.Join(out, split.Name)})
	}
	if len(jobs) != len(todo) {
		return fmt.Errorf("data fetch: %s holds splits %v, expected train and val", dest, splitNames(a.Splits))
	}
	if err := sameClasses(jobs); err != nil {
		return err
	}
	if err := runPackJobs(jobs, stdout, stderr, packFlags{Resize: f.Resize, RestartMCUs: 1, ShardSize: f.ShardSize, Quality: 90,
		MaxImagePixels: data.DefaultMaxImagePixels}, size, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s is ready: data.source: shards, data.dir: %s (the archive %s stays; delete it if you will not re-pack)\n",
		name, out, dest)
	return nil
}

func splitNames(splits []data.ArchiveSplit) []string {
	var names []string
	for _, s := range splits {
		names = append(names, s.Name)
	}
	return names
}

// downloadBar shows a download's progress: a bar on a terminal, else a line per tenth of the file.
type downloadBar struct {
	out     io.Writer
	name    string
	term    bool
	bar     *progressbar.ProgressBar
	shown   int64 // the tenths already printed (plain output)
	started time.Time
}

func newDownloadBar(out io.Writer, name string) *downloadBar {
	return &downloadBar{out: out, name: name, term: isTerminal(out), shown: -1, started: time.Now()}
}

func (b *downloadBar) update(done, total int64) {
	if b.term {
		if b.bar == nil {
			b.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(b.out), progressbar.OptionSetDescription(b.name),
				progressbar.OptionShowBytes(true), progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionSetWidth(30), progressbar.OptionUseANSICodes(true), progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.out) }))
		}
		b.bar.Set64(done)
		return
	}
	if total <= 0 {
		return
	}
	if tenth := done * 10 / total; tenth > b.shown {
		b.shown = tenth
		fmt.Fprintf(b.out, "%s: %s of %s (%d%%)\n", b.name, humanize.IBytes(uint64(done)), humanize.IBytes(uint64(total)), tenth*10)
	}
}

func (b *downloadBar) done() {
	if b.bar != nil {
		b.bar.Exit()
	}
}

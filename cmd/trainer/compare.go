package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/trainer/trainer/stats"
)

// newCompareCommand declares `trainer compare`.
func newCompareCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "compare A B",
		Short: "Pair two evals image by image: McNemar's exact test",
		Long: `Reads two per-image result files written by trainer eval --per-image (the same test split, in the
same order; anything else is refused) and prints each eval's top-1 with its 95% Wilson interval, the
paired counts (both right, only A right, only B right, both wrong) and the exact two-sided McNemar
p-value: the chance of a split of the discordant images at least this uneven if A and B were equally
accurate. A small p (below 0.05, say) says the gap is real; a large one says it is within noise.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return compareMain(cmd.OutOrStdout(), args[0], args[1])
		},
	}
}

// compareMain is `trainer compare A B`.
func compareMain(stdout io.Writer, a, b string) error {
	p, err := stats.ComparePerImage(a, b)
	if err != nil {
		return err
	}
	gap := 100 * float64(p.RightA()-p.RightB()) / float64(p.Images)
	fmt.Fprintf(stdout, "A %s: top-1 %s\n", a, stats.Interval(p.RightA(), p.Images))
	fmt.Fprintf(stdout, "B %s: top-1 %s\n", b, stats.Interval(p.RightB(), p.Images))
	fmt.Fprintf(stdout, "%d images: both right %d, only A %d, only B %d, both wrong %d\n",
		p.Images, p.BothRight, p.OnlyA, p.OnlyB, p.BothWrong)
	fmt.Fprintf(stdout, "A − B = %+.2f points; McNemar exact p = %.4g (two-sided)\n", gap, p.PValue())
	return nil
}

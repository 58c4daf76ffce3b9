package trainer

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/trainer/trainer/weights"
)

// loadPretrained starts a fresh run from net.pretrained (docs/weights.md#fine-tuning): it fetches the
// weights when they are named by URL, reads the state_dict (safetensors or .pth) and creates the net's
// variables from it before the step is built. When net.num_classes differs from the weights', the
// classifier's tensors are skipped, and a line says so: the net initialises them as a fresh run would.
// Any other mismatch is refused with every missing, unexpected and misshapen key.
func (s *session) loadPretrained(out io.Writer) error {
	src := s.cfg.Net.Pretrained
	if src == "" {
		return nil
	}
	path, err := weights.Resolve(context.Background(), src, weights.FetchOptions{SHA256: s.cfg.Net.PretrainedSHA256, Progress: out})
	if err != nil {
		return fmt.Errorf("net.pretrained: %w", err)
	}
	f, err := weights.ReadStateDict(path)
	if err != nil {
		return fmt.Errorf("net.pretrained: %w", err)
	}
	spec, opts := s.net.Spec, s.net.Options
	template, err := weights.Template(s.backend, spec, opts)
	if err != nil {
		return err
	}
	head, err := weights.HeadVariables(s.backend, spec, opts)
	if err != nil {
		return err
	}
	values, skipped, err := weights.FromStateDictReinit(spec, template, f, head)
	if err != nil {
		return fmt.Errorf("net.pretrained: %w", err)
	}
	if err := weights.SetVariables(s.ctx, template, values); err != nil {
		return fmt.Errorf("net.pretrained %s: %w", path, err)
	}
	s.pretrained = true
	fmt.Fprintf(out, "pretrained weights: %d of the net's %d tensors from %s\n", len(values), len(template), path)
	if len(skipped) > 0 {
		fmt.Fprintf(out, "classifier re-initialised for %d classes; skipped: %s\n", s.numClasses(), strings.Join(skipped, ", "))
	}
	return nil
}

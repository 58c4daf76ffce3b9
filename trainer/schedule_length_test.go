package trainer

import (
	"strings"
	"testing"

	"github.com/trainer/trainer/config"
)

// TestScheduleLengthOpensNoBackend: planning a schedule from a present split counts it from its files,
// so a recipe for a backend this machine cannot open (xla:cuda, no PJRT plugin) still gets its length.
func TestScheduleLengthOpensNoBackend(t *testing.T) {
	cfg := config.Defaults()
	cfg.Name, cfg.Backend = "plan", "xla:cuda"
	total, perEpoch, from, err := ScheduleLength(cfg, 0)
	if err != nil || total != 60000/128 || perEpoch != 60000/128 || !strings.Contains(from, "the training split, mnist") {
		t.Errorf("ScheduleLength: %d steps, %g per epoch, from %q, %v; want %d from the mnist split", total, perEpoch, from, err, 60000/128)
	}
}

package trainstep

import (
	"strings"
	"testing"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
)

// A backend with fewer devices than replicas is refused before anything is built.
func TestReplicasRefusedOnOneDevice(t *testing.T) {
	b, err := backend.Open("go")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	cfg := config.Defaults()
	cfg.Replicas = 2
	net, err := NetOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(b, NewContext(cfg), cfg, net)
	if err == nil || !strings.Contains(err.Error(), "replicas 2: backend go has 1 device(s)") {
		t.Fatalf("a step for 2 replicas on the go backend: %v", err)
	}
	cfg.Replicas = 1
	step, err := New(b, NewContext(cfg), cfg, net)
	if err != nil {
		t.Fatalf("one replica: %v", err)
	}
	step.Finalize()
}

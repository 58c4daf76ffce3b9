package graphs

import (
	"fmt"
	"strings"
	"testing"
)

func TestSmallNetsSummaries(t *testing.T) {
	// Parameter counts of the same nets in PyTorch (nn.Linear/nn.Conv2d with biases); the CNN is
	// PyTorch's MNIST example without dropout, 1,199,882 parameters.
	want := map[string]struct {
		params int
		macs   int64
	}{
		"linear":    {7850, 7840},
		"mlp":       {784*512 + 512 + 512*256 + 256 + 256*10 + 10, 784*512 + 512*256 + 256*10},
		"mnist_cnn": {1199882, 26*26*32*9 + 24*24*64*288 + 9216*128 + 128*10},
	}
	for name, w := range want {
		spec, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := Summarize(testBackend(), spec, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Parameters != w.params {
			t.Errorf("%s: %d parameters, want %d", name, sum.Parameters, w.params)
		}
		if sum.ForwardFLOPs != 2*w.macs {
			t.Errorf("%s: %d forward FLOPs, want %d", name, sum.ForwardFLOPs, 2*w.macs)
		}
		if sum.InputShape != [3]int{28, 28, 1} || sum.NumClasses != 10 {
			t.Errorf("%s: input %v classes %d", name, sum.InputShape, sum.NumClasses)
		}
	}
}

func TestWidthAndClassesOptions(t *testing.T) {
	spec, _ := Get("mlp")
	sum, err := Summarize(testBackend(), spec, Options{Width: 0.5, NumClasses: 7})
	if err != nil {
		t.Fatal(err)
	}
	if want := 784*256 + 256 + 256*128 + 128 + 128*7 + 7; sum.Parameters != want || sum.NumClasses != 7 {
		t.Errorf("half-width mlp with 7 classes: %d parameters (want %d), %d classes", sum.Parameters, want, sum.NumClasses)
	}
}

func TestUnknownNetListsRegistered(t *testing.T) {
	_, err := Get("resnet999")
	if err == nil || !strings.Contains(err.Error(), "mnist_cnn") || !strings.Contains(err.Error(), "linear") {
		t.Fatalf("error %v should list the registered nets", err)
	}
}

func TestNoWeightDecayDefaultsToBiases(t *testing.T) {
	spec, _ := Get("linear")
	if !spec.ExcludedFromWeightDecay("/model/fc2", "bias") || spec.ExcludedFromWeightDecay("/model/fc2", "weight") {
		t.Error("default no-decay group should hold biases and only biases")
	}
}

func TestCheckRevision(t *testing.T) {
	spec := Spec{Name: "n", Revision: 2, RevisionNote: "revision 2: a new order"}
	if err := spec.CheckRevision("a.tckpt", 2); err != nil {
		t.Errorf("same revision refused: %v", err)
	}
	for _, rev := range []int{0, 1, 3} {
		err := spec.CheckRevision("a.tckpt", rev)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("revision %d of net n", rev)) || !strings.Contains(err.Error(), "a new order") {
			t.Errorf("revision %d: %v", rev, err)
		}
	}
}

package recipe

import (
	"strings"
	"testing"
)

func TestLoadConfigErrorsNameFileKeyAndExpectation(t *testing.T) {
	cases := []struct {
		name, body string
		sets       []string
		want       []string // substrings of the error
	}{
		{"unknown key", "optimizer:\n  lrr: 0.1\n", nil, []string{"recipe.yaml", "optimizer.lrr", "unknown key", "optimizer.lr"}},
		{"unknown section", "optimiser:\n  lr: 0.1\n", nil, []string{"recipe.yaml", "optimiser", "unknown key"}},
		{"wrong type", "optimizer:\n  lr: fast\n", nil, []string{"recipe.yaml", "optimizer.lr", "expected a number", "fast"}},
		{"fraction for an int", "epochs: 2.5\n", nil, []string{"recipe.yaml", "epochs", "expected an integer"}},
		{"section as scalar", "data: mnist\n", nil, []string{"recipe.yaml", "data", "mapping"}},
		{"out of range", "optimizer:\n  momentum: 1.5\n", nil, []string{"recipe.yaml", "optimizer.momentum", "[0, 1)"}},
		{"negative batch", "data:\n  batch_size: 0\n", nil, []string{"data.batch_size", "[1, 65536]"}},
		{"unknown net", "net:\n  name: resnet999\n", nil, []string{"net.name", "resnet999", "mnist_cnn"}},
		{"unknown source", "data:\n  source: imagenet21k\n", nil, []string{"data.source", "mnist, fashion-mnist"}},
		{"bad --set key", "seed: 1\n", []string{"optimizer.lrr=0.1"}, []string{"--set optimizer.lrr", "unknown key"}},
		{"bad --set type", "seed: 1\n", []string{"epochs=two"}, []string{"--set epochs", "expected an integer"}},
		{"bad --set form", "seed: 1\n", []string{"epochs"}, []string{"--set", "key=value"}},
		{"unknown padding", "net:\n  padding: diagonal\n", nil, []string{"net.padding", "diagonal", "symmetric or same"}},
		{"unknown gelu", "seed: 1\n", []string{"net.gelu=relu"}, []string{"net.gelu", "erf or tanh"}},
		{"dropout out of range", "net:\n  dropout: 1.5\n", nil, []string{"net.dropout", "[0, 1) or -1"}},
		{"unknown precision", "net:\n  precision: float8\n", nil, []string{"net.precision", "float32, bfloat16"}},
		{"nothing to train", "epochs: 0\nsteps: 0\n", nil, []string{"epochs", "nothing to train"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, c.body), c.sets)
			if err == nil {
				t.Fatal("accepted a bad config")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestLoadConfigErrorsQuoteValuesBriefly: a 900 KB value in a recipe or a 10 MB one by --set (the run name, any string, a list, a key) is
// refused in an error of a few hundred bytes that quotes its start and gives its length.
func TestLoadConfigErrorsQuoteValuesBriefly(t *testing.T) {
	// A value in a file stays under MaxRecipeBytes (a larger file is refused by its size alone).
	big := strings.Repeat("n", 10<<20)
	inFile := big[:900<<10]
	list := "[" + strings.Repeat("0.5, ", 150<<10) + "0.5]"
	cases := []struct {
		name, body string
		sets       []string
		want       []string
	}{
		{"run name", "name: " + inFile + "\n", nil, []string{"recipe.yaml: name", `"nnnn`, "(921600 bytes)"}},
		{"run name by --set", "seed: 1\n", []string{"name=" + big}, []string{"--set name", "(10485760 bytes)"}},
		{"run name past NAME_MAX", "name: " + big[:300] + "\n", nil, []string{"name", "at most 255 bytes", "(300 bytes)"}},
		{"net name", "net:\n  name: " + inFile + "\n", nil, []string{"net.name", "(921600 bytes)"}},
		{"source", "data:\n  source: " + big[:4000] + "\n", nil, []string{"data.source", "(4000 bytes)", "expected one of"}},
		{"rand augment", "data:\n  source: imagefolder\n  augment:\n    rand_augment: " + big[:4000] + "\n", nil,
			[]string{"data.augment.rand_augment", "(4000 bytes)"}},
		{"list", "data:\n  source: imagefolder\n  augment:\n    random_resized_crop_scale: " + list + "\n", nil,
			[]string{"data.augment.random_resized_crop_scale", "got [0.5 0.5", "bytes), expected"}},
		{"unknown key", "seed: 1\n", []string{big + "=1"}, []string{"--set nnnn", "(10485760 bytes): unknown key"}},
		{"wrong type", "epochs: " + inFile + "\n", nil, []string{"epochs", "expected an integer", "(921600 bytes)"}},
		{"unparsable --set", "seed: 1\n", []string{"epochs=[" + big}, []string{"--set epochs", "cannot parse", "(10485761 bytes)"}},
		{"--set without =", "seed: 1\n", []string{big}, []string{"--set", "key=value", "(10485760 bytes)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, c.body), c.sets)
			if err == nil {
				t.Fatal("accepted")
			}
			if len(err.Error()) > 2000 {
				t.Errorf("a %d-byte error", len(err.Error()))
			}
			msg := err.Error()[:min(len(err.Error()), 2000)]
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

// A batch's pixel values at the net's input are bounded (config.MaxBatchValues) when each key is within
// its own bounds: at the net's default size, at net.image_size, and for evaluation at data.eval_image_size.
func TestBatchValuesBounded(t *testing.T) {
	path := writeConfig(t, "seed: 1\n")
	for _, c := range []struct {
		set  []string
		want []string
	}{
		{[]string{"net.name=resnet50", "data.source=imagefolder", "data.batch_size=65536"},
			[]string{"data.batch_size: got 65536 at resnet50's input of 224×224×3", "9865003008 pixel values", "at most 2147483648"}},
		{[]string{"net.name=resnet50", "data.source=imagefolder", "net.image_size=512", "data.batch_size=4096"},
			[]string{"data.batch_size: got 4096 at resnet50's input of 512×512×3", "3221225472 pixel values"}},
		{[]string{"net.name=resnet50", "data.source=imagefolder", "data.eval_image_size=4096", "data.eval_batch_size=64"},
			[]string{"data.eval_batch_size: got 64 at resnet50's input of 4096×4096×3", "3221225472 pixel values"}},
	} {
		_, err := Load(path, c.set)
		if err == nil {
			t.Errorf("--set %v accepted", c.set)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("--set %v: %v, want %q", c.set, err, w)
			}
		}
	}
	// ImageNet's batch of 1024 at 224 px passes, and so does a batch at the bound's edge: 10922 at
	// 256 px is 2147352576 values.
	for _, set := range [][]string{
		{"net.name=resnet50", "data.source=imagefolder", "data.batch_size=1024", "data.eval_batch_size=1024"},
		{"net.name=resnet50", "data.source=imagefolder", "net.image_size=256", "data.batch_size=10922", "data.eval_batch_size=10922"},
	} {
		if _, err := Load(path, set); err != nil {
			t.Errorf("--set %v: %v", set, err)
		}
	}
}

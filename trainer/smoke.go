package trainer

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/internal/atomicfile"
)

// smokeImageH and smokeImageW are the size of the smoke images: non-square, so crops and resizes do
// real work.
const (
	smokeImageH = 40
	smokeImageW = 48
)

// WriteSmokeData writes the smoke ImageFolder that recipe.SmokeOverrides runs a recipe on, at dir
// (dir/train/<class>/*.png and dir/val/...: config.SmokeClasses classes of config.SmokeTrainPerClass
// and config.SmokeEvalPerClass seeded-noise PNGs), unless dir/train already exists. The pixels are a
// pure function of the class and index.
func WriteSmokeData(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "train")); err == nil {
		return nil
	}
	for _, split := range []struct {
		name string
		n    int
	}{{"val", config.SmokeEvalPerClass}, {"train", config.SmokeTrainPerClass}} { // train last: its presence means done
		for c := range config.SmokeClasses {
			classDir := filepath.Join(dir, split.name, fmt.Sprintf("class%d", c))
			if err := os.MkdirAll(classDir, 0o755); err != nil {
				return fmt.Errorf("smoke data: %w", err)
			}
			for i := range split.n {
				rng := rand.New(rand.NewPCG(uint64(c), uint64(i)+uint64(len(split.name))<<32))
				img := image.NewRGBA(image.Rect(0, 0, smokeImageW, smokeImageH))
				for y := range smokeImageH {
					for x := range smokeImageW {
						// A class-dependent tint over noise: learnable, not constant.
						v := uint8(rng.IntN(128))
						img.Set(x, y, color.RGBA{v + uint8(100*c), v, v + uint8(100*(1-c)), 255})
					}
				}
				path := filepath.Join(classDir, fmt.Sprintf("%s_%d.png", split.name, i))
				var buf bytes.Buffer
				if err := png.Encode(&buf, img); err != nil {
					return fmt.Errorf("smoke data %s: %w", path, err)
				}
				if err := atomicfile.Write(path, buf.Bytes()); err != nil {
					return fmt.Errorf("smoke data %s: %w", path, err)
				}
			}
		}
	}
	return nil
}

package config

import "testing"

// TestEveryKeyHasOneMeaning: each key of Config has a meaning in keyMeanings and each meaning a key,
// so the generated docs list every key.
func TestEveryKeyHasOneMeaning(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Keys() {
		seen[k.Name] = true
		if k.Meaning == "" {
			t.Errorf("key %s has no meaning in keyMeanings", k.Name)
		}
		if k.Default == "" {
			t.Errorf("key %s has no default text", k.Name)
		}
	}
	for name := range keyMeanings {
		if !seen[name] {
			t.Errorf("keyMeanings has %s, which is not a key of Config", name)
		}
	}
}

func TestDefaultText(t *testing.T) {
	byName := map[string]string{}
	for _, k := range Keys() {
		byName[k.Name] = k.Default
	}
	for key, want := range map[string]string{
		"name":                                   "`\"\"`",
		"data.eval_crop_pct":                     "`0.875`",
		"data.augment.random_resized_crop_ratio": "`[0.75, 1.333]`",
		"data.device_normalize":                  "`auto`",
		"ema.warmup":                             "`true`",
		"optimizer.eps":                          "`-1` (adamw 1e-8, lamb 1e-6, rmsprop_tf 0.001)",
	} {
		if byName[key] != want {
			t.Errorf("%s: default %s, want %s", key, byName[key], want)
		}
	}
}

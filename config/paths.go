package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trainer/trainer/internal/echo"
)

// Where datasets live: recipes name their data as ${TRAINER_DATA}/<dataset>, so that one variable
// moves every recipe's data, and a checkout never holds datasets.
const (
	// DataEnv is the environment variable that path keys may name.
	DataEnv = "TRAINER_DATA"
	// DefaultDataRoot is DataEnv's value when it is unset or empty.
	DefaultDataRoot = "~/datasets"
)

// expandPaths resolves ${TRAINER_DATA} and a leading ~/ in the data path keys, once, when the recipe
// loads: the resolved config (and the run's config.yaml) holds the path that was used, so a resume or
// an eval reads the same data whatever the environment says later. source names what set a key.
func (d *DataConfig) expandPaths(source func(string) string) error {
	for _, k := range []struct {
		key string
		p   *string
	}{{"data.dir", &d.Dir}, {"data.train", &d.Train}, {"data.eval", &d.Eval}} {
		v, err := ExpandPath(*k.p)
		if err != nil {
			return fmt.Errorf("%s: %w", source(k.key), err)
		}
		*k.p = v
	}
	return nil
}

// ExpandPath replaces ${TRAINER_DATA} or $TRAINER_DATA in p with the variable's value (DefaultDataRoot
// when unset), then a leading ~/ (or a lone ~) with the home directory. Any other $ is refused: a
// recipe names no other variable, and a path that silently kept "$HOME" would be a folder of that name.
func ExpandPath(p string) (string, error) {
	if strings.Contains(p, "$") {
		root := os.Getenv(DataEnv)
		if root == "" {
			root = DefaultDataRoot
		}
		var b strings.Builder
		for rest := p; rest != ""; {
			i := strings.IndexByte(rest, '$')
			if i < 0 {
				b.WriteString(rest)
				break
			}
			b.WriteString(rest[:i])
			rest = rest[i:]
			name, ok := strings.CutPrefix(rest, "${"+DataEnv+"}")
			if !ok {
				name, ok = strings.CutPrefix(rest, "$"+DataEnv)
				ok = ok && (name == "" || !isNameByte(name[0]))
			}
			if !ok {
				return "", fmt.Errorf("path %s names a variable other than ${%s}, the only one expanded", echo.Quote(p), DataEnv)
			}
			b.WriteString(root)
			rest = name
		}
		p = b.String()
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("path %s: no home directory to expand ~ (%v); set %s or give an absolute path", echo.Quote(p), err, DataEnv)
		}
		p = filepath.Join(home, p[1:])
	}
	return p, nil
}

// isNameByte says whether c may continue a shell variable's name.
func isNameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

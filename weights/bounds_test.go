package weights

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// selfHoldingPickles are dicts that hold themselves under the keys stateDictOf looks into, as
// pickle.dumps writes them (protocol 2): d = {}; d["model"] = d (21 bytes), the same under
// "state_dict", and a cycle through two dicts.
var selfHoldingPickles = map[string]string{
	"model":      "\x80\x02}q\x00X\x05\x00\x00\x00modelq\x01h\x00s.",
	"state_dict": "\x80\x02}q\x00X\n\x00\x00\x00state_dictq\x01h\x00s.",
	"two levels": "\x80\x02}q\x00X\x05\x00\x00\x00modelq\x01}q\x02X\n\x00\x00\x00state_dictq\x03h\x00ss.",
}

// TestSelfHoldingDictIsAnError: a .pth whose dict holds itself is refused with an error, in the zip
// and the legacy (bare pickle) format, not a fatal stack overflow.
func TestSelfHoldingDictIsAnError(t *testing.T) {
	for name, pkl := range selfHoldingPickles {
		_, err := ReadTorch(torchZip(t, []byte(pkl), nil))
		if err == nil || !strings.Contains(err.Error(), "nested more than 4 dicts deep") {
			t.Errorf("%s (zip): %v; want the nesting refused", name, err)
		}
		bare := filepath.Join(t.TempDir(), "self.pth")
		if err := os.WriteFile(bare, []byte(pkl), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadStateDict(bare); err == nil {
			t.Errorf("%s (bare pickle): accepted", name)
		}
	}
}

// TestWeightFilesAreBounded: weights named by a device (net.pretrained: /dev/zero, --weights) are
// refused as no regular file, by every reader and by Resolve's hash check, without reading them.
func TestWeightFilesAreBounded(t *testing.T) {
	link := filepath.Join(t.TempDir(), "w.safetensors")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", link} {
		for name, read := range map[string]func(string) (*File, error){"ReadStateDict": ReadStateDict, "Read": Read, "ReadTorch": ReadTorch} {
			if _, err := read(p); err == nil || !strings.Contains(err.Error(), "is a device") {
				t.Errorf("%s(%s): %v; want it refused as a device", name, p, err)
			}
		}
		sum := strings.Repeat("0", 64)
		if _, err := Resolve(t.Context(), p, FetchOptions{SHA256: sum}); err == nil || !strings.Contains(err.Error(), "is a device") {
			t.Errorf("Resolve(%s) with a SHA-256: %v", p, err)
		}
	}
}

// FuzzTorchPickle: no pickle makes the state_dict reader panic or overflow its stack; whatever it
// accepts is a non-empty state_dict.
func FuzzTorchPickle(f *testing.F) {
	for _, pkl := range selfHoldingPickles {
		f.Add([]byte(pkl))
	}
	f.Add([]byte(oneTensor(3, 1, 2, 1)))
	f.Add([]byte("\x80\x02" + global("os", "system") + binunicode("id") + "\x85R."))
	f.Add([]byte("\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02h\x02au."))
	f.Fuzz(func(t *testing.T, pkl []byte) {
		u := &unpickler{maxBytes: 1 << 20, storages: map[string]*storage{}}
		obj, _, err := u.unpickle(pkl)
		if err != nil {
			return
		}
		if sd, err := stateDictOf(obj, 0); err == nil && len(sd) == 0 {
			t.Error("an empty state_dict accepted")
		}
	})
}

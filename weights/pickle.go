package weights

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// A pickle is a program for Python's unpickler: opcodes that push values, build containers, look up
// globals (module.name) and call them. A PyTorch state_dict needs only a few of them, so before the
// unpickler (github.com/nlpodyssey/gopickle, which executes nothing: a global is whatever FindClass
// returns) sees a pickle, scanPickle walks it once and refuses
//   - any global but the tensor rebuilds, the storage types and OrderedDict, by name;
//   - opcodes a state_dict never uses that instantiate classes (INST, OBJ, NEWOBJ...), extensions
//     and out-of-band buffers, and unknown opcodes;
//   - any length argument past the end of the pickle, so no allocation exceeds the pickle's size;
//   - more container-making opcodes than maxPickleObjects, which bounds the unpickler's memory.

// maxPickle bounds a state_dict's pickle (data.pkl): ResNet-50's is 40 kB, about 130 bytes a tensor.
const maxPickle = 2 << 20

// maxPickleObjects bounds the opcodes that make containers (MARK, empty list/dict/tuple, REDUCE):
// a state_dict makes about 7 per tensor.
const maxPickleObjects = 1 << 17

// acceptedGlobals are the only globals a state_dict pickle may name: the tensor rebuilds, the typed
// storages, and OrderedDict (the state_dict itself and each tensor's empty backward hooks).
var acceptedGlobals = map[string]bool{
	"collections.OrderedDict":         true,
	"torch._utils._rebuild_tensor_v2": true,
	"torch._utils._rebuild_tensor":    true,
	"torch._utils._rebuild_parameter": true,
	"torch.FloatStorage":              true,
	"torch.DoubleStorage":             true,
	"torch.HalfStorage":               true,
	"torch.BFloat16Storage":           true,
	"torch.LongStorage":               true,
	"torch.IntStorage":                true,
	"torch.ShortStorage":              true,
	"torch.CharStorage":               true,
	"torch.ByteStorage":               true,
	"torch.BoolStorage":               true,
}

// RefusedGlobalError is a pickle naming a global outside acceptedGlobals: loading it in Python could
// run arbitrary code, and a state_dict never needs it.
type RefusedGlobalError struct{ Module, Name string }

func (e *RefusedGlobalError) Error() string {
	return fmt.Sprintf("pickle global %s.%s refused: a state_dict needs only collections.OrderedDict, "+
		"torch._utils._rebuild_tensor_v2 (or _rebuild_tensor, _rebuild_parameter) and the torch.*Storage types; "+
		"this file holds more than a state_dict, or is malicious", e.Module, e.Name)
}

func checkGlobal(module, name string) error {
	if !acceptedGlobals[module+"."+name] {
		return &RefusedGlobalError{Module: module, Name: name}
	}
	return nil
}

// opcode argument kinds.
const (
	argNone   = iota
	argFixed  // n bytes
	argLen1   // a 1-byte length, then that many bytes
	argLen4   // a 4-byte little-endian length (signed), then that many bytes
	argLen8   // an 8-byte little-endian length, then that many bytes
	argLine   // bytes up to '\n'
	argLines2 // two such lines (GLOBAL: module, name)
)

type opcodeInfo struct {
	name string
	arg  int
	n    int  // argFixed's size
	obj  bool // makes a container (counted against maxPickleObjects)
}

// opcodes are the opcodes a state_dict pickle may hold (protocols 0 to 5); any other is refused.
var opcodes = map[byte]opcodeInfo{
	0x80: {"PROTO", argFixed, 1, false}, 0x95: {"FRAME", argFixed, 8, false}, '.': {"STOP", argNone, 0, false},
	'(': {"MARK", argNone, 0, true}, '0': {"POP", argNone, 0, false}, '1': {"POP_MARK", argNone, 0, false},
	'2': {"DUP", argNone, 0, false}, 'N': {"NONE", argNone, 0, false}, 0x88: {"NEWTRUE", argNone, 0, false},
	0x89: {"NEWFALSE", argNone, 0, false},
	'I':  {"INT", argLine, 0, false}, 'J': {"BININT", argFixed, 4, false}, 'K': {"BININT1", argFixed, 1, false},
	'M': {"BININT2", argFixed, 2, false}, 'L': {"LONG", argLine, 0, false}, 0x8a: {"LONG1", argLen1, 0, false},
	0x8b: {"LONG4", argLen4, 0, false}, 'F': {"FLOAT", argLine, 0, false}, 'G': {"BINFLOAT", argFixed, 8, false},
	'S': {"STRING", argLine, 0, false}, 'T': {"BINSTRING", argLen4, 0, false}, 'U': {"SHORT_BINSTRING", argLen1, 0, false},
	'V': {"UNICODE", argLine, 0, false}, 'X': {"BINUNICODE", argLen4, 0, false},
	0x8c: {"SHORT_BINUNICODE", argLen1, 0, false}, 0x8d: {"BINUNICODE8", argLen8, 0, false},
	'B': {"BINBYTES", argLen4, 0, false}, 'C': {"SHORT_BINBYTES", argLen1, 0, false}, 0x8e: {"BINBYTES8", argLen8, 0, false},
	')': {"EMPTY_TUPLE", argNone, 0, true}, 't': {"TUPLE", argNone, 0, false}, 0x85: {"TUPLE1", argNone, 0, false},
	0x86: {"TUPLE2", argNone, 0, false}, 0x87: {"TUPLE3", argNone, 0, false},
	']': {"EMPTY_LIST", argNone, 0, true}, 'l': {"LIST", argNone, 0, false}, 'a': {"APPEND", argNone, 0, false},
	'e': {"APPENDS", argNone, 0, false}, '}': {"EMPTY_DICT", argNone, 0, true}, 'd': {"DICT", argNone, 0, false},
	's': {"SETITEM", argNone, 0, false}, 'u': {"SETITEMS", argNone, 0, false},
	'c': {"GLOBAL", argLines2, 0, false}, 0x93: {"STACK_GLOBAL", argNone, 0, false},
	'R': {"REDUCE", argNone, 0, true}, 'b': {"BUILD", argNone, 0, false}, 'Q': {"BINPERSID", argNone, 0, false},
	'p': {"PUT", argLine, 0, false}, 'q': {"BINPUT", argFixed, 1, false}, 'r': {"LONG_BINPUT", argFixed, 4, false},
	0x94: {"MEMOIZE", argNone, 0, false}, 'g': {"GET", argLine, 0, false}, 'h': {"BINGET", argFixed, 1, false},
	'j': {"LONG_BINGET", argFixed, 4, false},
}

// refusedOpcodes name the opcodes a state_dict never uses, for the error.
var refusedOpcodes = map[byte]string{
	'i': "INST", 'o': "OBJ", 0x81: "NEWOBJ", 0x92: "NEWOBJ_EX", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4",
	'P': "PERSID", 0x8f: "EMPTY_SET", 0x90: "ADDITEMS", 0x91: "FROZENSET", 0x96: "BYTEARRAY8",
	0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER",
}

// scanPickle checks the pickle that starts data (see above) and returns its length, up to and
// including its STOP.
func scanPickle(data []byte) (int, error) {
	objects := 0
	for at := 0; at < len(data); {
		op := data[at]
		info, ok := opcodes[op]
		if !ok {
			if name, known := refusedOpcodes[op]; known {
				return 0, fmt.Errorf("pickle opcode %s at byte %d refused: a state_dict never uses it", name, at)
			}
			return 0, fmt.Errorf("pickle: unknown opcode 0x%02x at byte %d", op, at)
		}
		if info.obj {
			if objects++; objects > maxPickleObjects {
				return 0, fmt.Errorf("pickle: more than %d containers (at byte %d): too many for a state_dict", maxPickleObjects, at)
			}
		}
		start := at
		at++
		rest := len(data) - at
		need := func(n uint64) error {
			if n > uint64(rest) {
				return fmt.Errorf("pickle opcode %s at byte %d: argument of %d bytes past the end of the %d-byte pickle",
					info.name, start, n, len(data))
			}
			return nil
		}
		var n uint64
		switch info.arg {
		case argFixed:
			n = uint64(info.n)
		case argLen1, argLen4, argLen8:
			width := map[int]int{argLen1: 1, argLen4: 4, argLen8: 8}[info.arg]
			if err := need(uint64(width)); err != nil {
				return 0, err
			}
			switch width {
			case 1:
				n = uint64(data[at])
			case 4:
				n = uint64(binary.LittleEndian.Uint32(data[at:])) // the signed ones are refused below if negative
				if (info.name == "LONG4" || info.name == "BINSTRING") && n >= 1<<31 {
					return 0, fmt.Errorf("pickle opcode %s at byte %d: negative length", info.name, start)
				}
			case 8:
				n = binary.LittleEndian.Uint64(data[at:])
			}
			at += width
			rest -= width
		case argLine, argLines2:
			lines := 1
			if info.arg == argLines2 {
				lines = 2
			}
			var parts []string
			for range lines {
				i := bytes.IndexByte(data[at:], '\n')
				if i < 0 {
					return 0, fmt.Errorf("pickle opcode %s at byte %d: unterminated argument", info.name, start)
				}
				parts = append(parts, string(data[at:at+i]))
				at += i + 1
			}
			if info.name == "GLOBAL" {
				if err := checkGlobal(parts[0], parts[1]); err != nil {
					return 0, err
				}
			}
			continue
		}
		if err := need(n); err != nil {
			return 0, err
		}
		if info.name == "FRAME" {
			// A frame announces the length of the opcodes that follow; they are scanned as any others.
			if frame := binary.LittleEndian.Uint64(data[at:]); frame > uint64(rest-8) {
				return 0, fmt.Errorf("pickle FRAME at byte %d: %d bytes announced, %d left", start, frame, rest-8)
			}
		}
		at += int(n)
		if info.name == "STOP" {
			return at, nil
		}
	}
	return 0, fmt.Errorf("pickle: no STOP opcode in %d bytes", len(data))
}

package tensorboard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/trainer/trainer/internal/bounded"
)

// Event is a decoded event: what this package writes, read back (tests, tools).
type Event struct {
	WallTime    float64
	Step        int64
	FileVersion string
	Values      []Value
	// SessionStatus is the SessionLog status (1: START), 0 when the event holds none.
	SessionStatus int
}

// Value is one summary value: a scalar (Simple) or a string tensor (Text) of a plugin.
type Value struct {
	Tag    string
	Simple float32
	Text   string
	Plugin string
	// IsSimple says Simple was set (a scalar), since 0 is a value.
	IsSimple bool
}

// ReadFile reads every record of an event file, checking both masked CRC-32Cs of each, and decodes
// the events.
func ReadFile(path string) ([]Event, error) {
	b, err := bounded.ReadFile(path, 0)
	if err != nil {
		return nil, err
	}
	records, err := Records(b)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %s: %w", path, err)
	}
	events := make([]Event, len(records))
	for i, r := range records {
		if events[i], err = ParseEvent(r); err != nil {
			return nil, fmt.Errorf("tensorboard: %s record %d: %w", path, i, err)
		}
	}
	return events, nil
}

// Records splits TFRecord framing into the records' data, checking the length's and the data's masked
// CRC-32C.
func Records(b []byte) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(b); {
		if len(b)-off < 12 {
			return nil, fmt.Errorf("record %d: %d bytes left, a header needs 12", len(out), len(b)-off)
		}
		n := binary.LittleEndian.Uint64(b[off:])
		if got, want := binary.LittleEndian.Uint32(b[off+8:]), maskedCRC(b[off:off+8]); got != want {
			return nil, fmt.Errorf("record %d: length CRC 0x%08x, computed 0x%08x", len(out), got, want)
		}
		if n > uint64(len(b)-off-16) {
			return nil, fmt.Errorf("record %d: %d bytes of data, %d left", len(out), n, len(b)-off-16)
		}
		data := b[off+12 : off+12+int(n)]
		if got, want := binary.LittleEndian.Uint32(b[off+12+int(n):]), maskedCRC(data); got != want {
			return nil, fmt.Errorf("record %d: data CRC 0x%08x, computed 0x%08x", len(out), got, want)
		}
		out = append(out, data)
		off += 16 + int(n)
	}
	return out, nil
}

// fields calls visit for each field of a message; visit gets the raw value bytes for BytesType, the
// number for the others.
func fields(b []byte, visit func(num protowire.Number, typ protowire.Type, raw []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, tagLen := protowire.ConsumeTag(b)
		if tagLen < 0 {
			return protowire.ParseError(tagLen)
		}
		b = b[tagLen:]
		var raw []byte
		var v uint64
		var size int
		switch typ {
		case protowire.VarintType:
			v, size = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x uint32
			x, size = protowire.ConsumeFixed32(b)
			v = uint64(x)
		case protowire.Fixed64Type:
			v, size = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			raw, size = protowire.ConsumeBytes(b)
		default:
			size = protowire.ConsumeFieldValue(num, typ, b)
		}
		if size < 0 {
			return protowire.ParseError(size)
		}
		if err := visit(num, typ, raw, v); err != nil {
			return err
		}
		b = b[size:]
	}
	return nil
}

// ParseEvent decodes the fields of an Event this package writes; others are skipped.
func ParseEvent(b []byte) (Event, error) {
	var e Event
	err := fields(b, func(num protowire.Number, typ protowire.Type, raw []byte, n uint64) error {
		switch {
		case num == eventWallTime && typ == protowire.Fixed64Type:
			e.WallTime = math.Float64frombits(n)
		case num == eventStep && typ == protowire.VarintType:
			e.Step = int64(n)
		case num == eventFileVersion && typ == protowire.BytesType:
			e.FileVersion = string(raw)
		case num == eventSessionLog && typ == protowire.BytesType:
			return fields(raw, func(num protowire.Number, typ protowire.Type, _ []byte, n uint64) error {
				if num == sessionLogStatus && typ == protowire.VarintType {
					e.SessionStatus = int(n)
				}
				return nil
			})
		case num == eventSummary && typ == protowire.BytesType:
			return fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
				if num != summaryValue || typ != protowire.BytesType {
					return nil
				}
				v, err := parseValue(raw)
				e.Values = append(e.Values, v)
				return err
			})
		}
		return nil
	})
	return e, err
}

func parseValue(b []byte) (Value, error) {
	var v Value
	err := fields(b, func(num protowire.Number, typ protowire.Type, raw []byte, n uint64) error {
		switch {
		case num == valueTag && typ == protowire.BytesType:
			v.Tag = string(raw)
		case num == valueSimpleValue && typ == protowire.Fixed32Type:
			v.Simple, v.IsSimple = math.Float32frombits(uint32(n)), true
		case num == valueMetadata && typ == protowire.BytesType:
			return fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
				if num != metadataPluginData || typ != protowire.BytesType {
					return nil
				}
				return fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
					if num == pluginName && typ == protowire.BytesType {
						v.Plugin = string(raw)
					}
					return nil
				})
			})
		case num == valueTensor && typ == protowire.BytesType:
			dtype := uint64(0)
			err := fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, n uint64) error {
				switch {
				case num == tensorDtype && typ == protowire.VarintType:
					dtype = n
				case num == tensorStringVal && typ == protowire.BytesType:
					v.Text = string(raw)
				}
				return nil
			})
			if err == nil && dtype != dtString {
				err = errors.New("a tensor that is not DT_STRING")
			}
			return err
		}
		return nil
	})
	return v, err
}

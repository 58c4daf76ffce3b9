package tensorboard

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// An event file is a sequence of TFRecords, each: the data's length (uint64, little-endian), the
// masked CRC-32C of those 8 bytes (uint32), the data, the masked CRC-32C of the data. Each record's
// data is one serialized tensorboard.Event (tensorboard/compat/proto/event.proto); the first says
// the file version. TensorBoard reads every file whose name holds "tfevents".

// FileVersion is the first event's file_version, as TensorFlow writes it.
const FileVersion = "brain.Event:2"

// Field numbers of the messages written (event.proto, summary.proto, tensor.proto, tensor_shape.proto).
const (
	eventWallTime    = 1
	eventStep        = 2
	eventFileVersion = 3
	eventSummary     = 5
	eventSessionLog  = 7

	sessionLogStatus = 1 // SessionStatus: START = 1
	sessionStart     = 1

	summaryValue = 1

	valueTag         = 1
	valueSimpleValue = 2 // float
	valueTensor      = 8
	valueMetadata    = 9

	metadataPluginData = 1
	pluginName         = 1

	tensorDtype     = 1 // DataType: DT_STRING = 7
	tensorShape     = 2
	tensorStringVal = 8
	dtString        = 7
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C: rotated right by 15 bits plus a constant, so that a CRC
// stored inside data does not checksum to a fixed value.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// frame wraps data as one TFRecord.
func frame(data []byte) []byte {
	out := make([]byte, 12, 16+len(data))
	binary.LittleEndian.PutUint64(out, uint64(len(data)))
	binary.LittleEndian.PutUint32(out[8:], maskedCRC(out[:8]))
	out = append(out, data...)
	return binary.LittleEndian.AppendUint32(out, maskedCRC(data))
}

// Writer appends events to one event file.
type Writer struct {
	f    *os.File
	path string
	now  func() time.Time
}

// fileCounter keeps two writers of one process in one second on distinct names.
var fileCounter atomic.Int64

// NewWriter creates a new event file in dir (events.out.tfevents.TIME.HOST.PID.N) and writes its
// file-version event. Each run process writes its own file; TensorBoard reads all of a directory's.
func NewWriter(dir string) (*Writer, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	host = strings.NewReplacer("/", "_", string(filepath.Separator), "_").Replace(host)
	now := time.Now()
	name := fmt.Sprintf("events.out.tfevents.%010d.%s.%d.%d", now.Unix(), host, os.Getpid(), fileCounter.Add(1))
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	w := &Writer{f: f, path: path, now: time.Now}
	if err := w.write(w.event(0, protowire.AppendString(protowire.AppendTag(nil, eventFileVersion, protowire.BytesType), FileVersion))); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return w, nil
}

// Path is the event file's path.
func (w *Writer) Path() string { return w.path }

// Scalar is one named value of a Scalars event.
type Scalar struct {
	Tag   string
	Value float64
}

// Scalars writes one event at step holding each value as a scalar (TensorBoard's Scalars tab; stored
// as float32, as TensorBoard does). Non-finite values are written as they are: TensorBoard shows them.
func (w *Writer) Scalars(step int64, values ...Scalar) error {
	var summary []byte
	for _, v := range values {
		var value []byte
		value = protowire.AppendTag(value, valueTag, protowire.BytesType)
		value = protowire.AppendString(value, v.Tag)
		value = protowire.AppendTag(value, valueSimpleValue, protowire.Fixed32Type)
		value = protowire.AppendFixed32(value, math.Float32bits(float32(v.Value)))
		summary = protowire.AppendTag(summary, summaryValue, protowire.BytesType)
		summary = protowire.AppendBytes(summary, value)
	}
	return w.write(w.event(step, appendMessage(nil, eventSummary, summary)))
}

// Text writes markdown under tag at step (TensorBoard's Text tab): a scalar string tensor of the text
// plugin.
func (w *Writer) Text(step int64, tag, markdown string) error {
	var tensor []byte
	tensor = protowire.AppendTag(tensor, tensorDtype, protowire.VarintType)
	tensor = protowire.AppendVarint(tensor, dtString)
	tensor = appendMessage(tensor, tensorShape, nil) // rank 0
	tensor = protowire.AppendTag(tensor, tensorStringVal, protowire.BytesType)
	tensor = protowire.AppendString(tensor, markdown)
	plugin := protowire.AppendString(protowire.AppendTag(nil, pluginName, protowire.BytesType), "text")
	var value []byte
	value = protowire.AppendTag(value, valueTag, protowire.BytesType)
	value = protowire.AppendString(value, tag)
	value = appendMessage(value, valueMetadata, appendMessage(nil, metadataPluginData, plugin))
	value = appendMessage(value, valueTensor, tensor)
	return w.write(w.event(step, appendMessage(nil, eventSummary, appendMessage(nil, summaryValue, value))))
}

// SessionStart writes a SessionLog START at step: TensorBoard then drops the events of the directory's
// earlier files at step and after, which a resumed run writes again.
func (w *Writer) SessionStart(step int64) error {
	status := protowire.AppendVarint(protowire.AppendTag(nil, sessionLogStatus, protowire.VarintType), sessionStart)
	return w.write(w.event(step, appendMessage(nil, eventSessionLog, status)))
}

// Close closes the file.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// event is an Event's bytes: wall time, step, then what (already encoded).
func (w *Writer) event(step int64, what []byte) []byte {
	var b []byte
	b = protowire.AppendTag(b, eventWallTime, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(float64(w.now().UnixNano())/1e9))
	if step != 0 {
		b = protowire.AppendTag(b, eventStep, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(step))
	}
	return append(b, what...)
}

// write appends one record in a single write call.
func (w *Writer) write(event []byte) error {
	if w.f == nil {
		return fmt.Errorf("tensorboard: %s is closed", w.path)
	}
	if _, err := w.f.Write(frame(event)); err != nil {
		return fmt.Errorf("tensorboard: %w", err)
	}
	return nil
}

func appendMessage(b []byte, field protowire.Number, msg []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, field, protowire.BytesType), msg)
}

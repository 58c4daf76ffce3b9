// Package tensorboard writes TensorBoard event files (and reads them back, for tests and tools): the
// TFRecord framing and the few Event and Summary protobuf messages that scalars and text need.
package tensorboard

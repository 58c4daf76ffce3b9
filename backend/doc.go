// Package backend opens the compute backend named by a string ("go", "go:devices=4", "xla:cpu",
// "xla:cuda", "xla:tpu" or a PJRT plugin path), describes it and its devices, lays out devices for data
// parallelism (DataParallel, CheckDevices), and counts host-device transfers (TransferCounter). The
// xla forms are opened through package pjrtplugin, which finds and loads PJRT plugins.
package backend

// Package pjrtplugin is everything about PJRT plugins: it finds and checks them (the plugin directories
// and the Python wheels), loads one into GoMLX's xla backend (never letting GoMLX search or download),
// says how to install one, and emits StableHLO through the xla backend with no plugin at all
// (EmitBackend), for inspecting the programs a device would run. Package backend opens the "xla:*"
// backend configurations with it; the train step itself never imports it.
package pjrtplugin

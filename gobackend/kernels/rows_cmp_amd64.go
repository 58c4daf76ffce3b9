package kernels

//go:noescape
func rowGreaterEqVV(n int, dst *bool, a, b *float32)

//go:noescape
func rowGreaterEqVS(n int, dst *bool, a, b *float32)

//go:noescape
func rowGreaterEqSV(n int, dst *bool, a, b *float32)

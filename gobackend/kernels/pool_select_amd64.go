package kernels

// selectMaxWindow and selectMinWindow are SelectWindow's AVX2 kernels (pool_select_amd64.s) for the
// first n values (n a multiple of 8): each group of 8 j keeps its choice in registers over the cells.
//
//go:noescape
func selectMaxWindow(n int, x *float32, offs *int32, cells int, arg *int32)

//go:noescape
func selectMinWindow(n int, x *float32, offs *int32, cells int, arg *int32)

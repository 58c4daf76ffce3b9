// Package trainstep builds the one compiled train step every command uses: forward, loss, backward,
// accumulation, clipping, the optimizer law, EMA and the non-finite guard, from a config.
package trainstep

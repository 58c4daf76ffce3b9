// Package reference computes the bestiary's layers (package bestiary) as float64 plain loops over
// verify/reference's tensors: obviously correct and slow, what the layers' `trainer verify` rows
// (bestiary/checks) compare against. Every BatchNorm here normalises with the batch's statistics.
package reference

// Package bestiary holds the book's bundled layers that no registered net builds (Darknet, CSP and
// ShuffleNet v1 blocks, U-Net, ASPP, FPN, NeRF, WaveNet, MobileViT, a DETR decoder and heads, Mamba,
// AlphaFold's Evoformer and structure module), as GoMLX model functions over package graphs' layers.
// Its sub-packages add their NetSpec kinds (spec), their float64 plain-loop references (reference) and
// their `trainer verify` rows (checks); docs/bestiary.md defines each layer and how it is checked.
package bestiary

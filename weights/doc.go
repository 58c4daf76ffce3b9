// Package weights moves a net's weights between GoMLX contexts and PyTorch state_dicts, read from
// safetensors files or PyTorch's own .pth checkpoints, and fetches pretrained weights into a checked cache.
//
// Read and Write handle the safetensors format (own code, validated on read); ReadTorch reads
// torch.save's zip and legacy formats without executing their pickles (torch.go, pickle.go); Fetch
// downloads by URL (download.go); Template, FromStateDict and ToStateDict map a graphs.Spec's
// variables to state_dict keys with Spec.StateDictKey.
package weights

// Package weights moves a net's weights between GoMLX contexts and PyTorch state_dicts stored as
// safetensors files, converting layouts (HWIO <-> OIHW kernels, [in,out] <-> [out,in] matrices).
//
// Read and Write handle the safetensors format (own code, validated on read); Template, FromStateDict
// and ToStateDict map a graphs.Spec's variables to state_dict keys with Spec.StateDictKey.
package weights

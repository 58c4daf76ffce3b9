#!/usr/bin/python3
"""Fixture for bestiary/TestTransformerDecoderMatchesTorch: nn.TransformerDecoder (post-norm, ReLU,
batch_first, eval mode) with seeded float64 weights, run on learned queries over random memory.

Writes bestiary/testdata/transformer_decoder_torch.json: the sizes, the state_dict (PyTorch layouts),
the queries (the bestiary's query_embed.weight), the memory and the decoder's output.
Run: /usr/bin/python3 scripts/torch_bestiary_attention.py (PyTorch 1.13).
"""
import json
import os

import torch

DIM, HEADS, MLP, BLOCKS, QUERIES, BATCH, TOKENS = 8, 2, 12, 2, 3, 2, 5


def main():
    torch.manual_seed(20)
    layer = torch.nn.TransformerDecoderLayer(DIM, HEADS, MLP, dropout=0.0, batch_first=True)
    decoder = torch.nn.TransformerDecoder(layer, BLOCKS).double().eval()
    with torch.no_grad():
        # Non-trivial biases and norms, so every parameter shows in the output.
        for name, p in decoder.named_parameters():
            if p.dim() == 1:
                p.copy_(0.3 * torch.randn_like(p) + (1.0 if "norm" in name and name.endswith("weight") else 0.0))
        queries = torch.randn(QUERIES, DIM, dtype=torch.float64)
        memory = torch.randn(BATCH, TOKENS, DIM, dtype=torch.float64)
        out = decoder(queries.unsqueeze(0).expand(BATCH, -1, -1), memory)
    fixture = {
        "dim": DIM, "heads": HEADS, "mlp_dim": MLP, "blocks": BLOCKS, "queries": QUERIES,
        "query_embed": queries.flatten().tolist(),
        "memory": {"dims": list(memory.shape), "data": memory.flatten().tolist()},
        "output": {"dims": list(out.shape), "data": out.flatten().tolist()},
        "state_dict": {k: {"dims": list(v.shape), "data": v.flatten().tolist()} for k, v in decoder.state_dict().items()},
    }
    path = os.path.join(os.path.dirname(__file__), "..", "bestiary", "testdata", "transformer_decoder_torch.json")
    with open(path, "w") as f:
        json.dump(fixture, f)
    print("wrote", path, "output", list(out.shape), "torch", torch.__version__)


if __name__ == "__main__":
    main()

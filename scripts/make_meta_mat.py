#!/usr/bin/python3
"""Writes data/testdata/devkit/meta_{plain,compressed}.mat: small stand-ins for the ImageNet devkit's
data/meta.mat, written by SciPy (Debian's python3-scipy), the writer torchvision's reader pairs with,
so data's MAT-file reader is checked against an independent writer.

The real file holds the struct array `synsets` (1860x1) with the fields below; the 1000 classes are the
synsets with num_children 0, whose ILSVRC2012_ID (1..1000) the validation ground truth names. Here:
three leaves whose ID order differs from their WordNet ID order (as in the real file) and two parents.

    /usr/bin/python3 scripts/make_meta_mat.py
"""
import numpy as np
import scipy.io

fields = ["ILSVRC2012_ID", "WNID", "words", "gloss", "num_children", "children", "wordnet_height",
          "num_train_images"]
rows = [
    (1, "n03000003", "third class", "a leaf", 0, [], 0, 3),
    (2, "n01000001", "first class", "a leaf", 0, [], 0, 2),
    (3, "n02000002", "second class", "a leaf, named in UTF-16: caf\u00e9", 0, [], 0, 2),
    (4, "n09000009", "parent", "a parent of two", 2, [1, 2], 1, 0),
    (5, "n09999999", "root", "the root", 1, [4], 2, 0),
]
synsets = np.zeros((len(rows), 1), dtype=[(f, "O") for f in fields])
for i, (sid, wnid, words, gloss, n, children, height, count) in enumerate(rows):
    synsets[i, 0] = (np.array([[float(sid)]]), np.array([wnid]), np.array([words]), np.array([gloss]),
                     np.array([[float(n)]]), np.array([children], dtype=np.float64).reshape(1, -1),
                     np.array([[float(height)]]), np.array([[float(count)]]))
for name, compress in [("plain", False), ("compressed", True)]:
    scipy.io.savemat(f"data/testdata/devkit/meta_{name}.mat", {"synsets": synsets}, do_compression=compress,
                     format="5")
print("wrote data/testdata/devkit/meta_plain.mat, meta_compressed.mat")

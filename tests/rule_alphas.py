"""One alpha per rule for the exactness tests on the tiny pairs (engine == cascade_core/reference.py): each inside its
rule's range and where the rule both defers (or rejects) and keeps on those pairs' near-uniform distributions."""
ALPHA = {"chow": 0.5, "diff": 0.05, "opt": 0.1, "v1": 0.3, "v2": 0.25, "v3": 0.6, "lossless": 0.0, "lossy": 0.9,
         "bild": 3.7, "fuzzy": 0.3, "judge": 2.5, "ensemble": 0.6, "sglang": 0.5, "relaxed": 0.02, "typical": 0.9,
         "target": 0.0, "draft": 0.0}

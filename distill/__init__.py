"""Distil a small draft for the bundled target: a few of the target's own layers, trained to match it.

    python -m distill --out assets/draft-smollm2 [--layers 0,1,2,3] [--minutes 60]

The student shares the target's embeddings, final norm and tied head (frozen, never stored again); only
its own layers are trained and shipped, in float16. Training runs in rounds of fresh data: the target
answers new instructions (sampled at T = 1), then the student learns those answers' positions against the
target's full distributions, computed on the spot (loss KL(p || q) + w TV(p, q)). The held-out set,
checkpoints and the learning curve live under --work (resumable: rerun the same command to continue).
Runs on CUDA when present (bfloat16 autocast), else the CPU; the same command serves both, with larger
rounds and batches on a GPU.
"""

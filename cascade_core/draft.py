"""The shipped-draft format: a few of a target's layers, trained apart from it (see the distill tool).

A draft built here shares the target's embeddings, final norm and tied head (the same tensors, never stored
again); only its own layers are saved, in float16, with a JSON description of how it was made."""
import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

DRAFT_FILE = "draft.safetensors"
OWN = "model.layers."  # the parameters a draft stores: its own layers


def build_draft(target, layers):
    """A model of the target's family with len(layers) layers copied from the target's; the rest is shared."""
    config = type(target.config)(**{**target.config.to_dict(), "num_hidden_layers": len(layers)})
    draft = type(target)(config).to(dtype=torch.float32, device=target.device)
    draft.model.embed_tokens = target.model.embed_tokens
    draft.model.norm = target.model.norm
    draft.lm_head = target.lm_head
    for new, old in enumerate(layers):
        draft.model.layers[new].load_state_dict(target.model.layers[old].state_dict())
    for name, param in draft.named_parameters():
        param.requires_grad = name.startswith(OWN)
    return draft


def own_state(draft):
    return {k: v for k, v in draft.state_dict().items() if k.startswith(OWN)}


def save_draft(draft, folder, meta):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().to(torch.float16).contiguous().cpu() for k, v in own_state(draft).items()},
              folder / DRAFT_FILE, metadata={"meta": json.dumps(meta)})


def draft_meta(folder):
    """What the shipped file says about itself: init layers, step, training positions, held-out scores."""
    with safe_open(Path(folder) / DRAFT_FILE, "pt") as f:
        return json.loads(f.metadata()["meta"])


def load_draft(target, folder):
    """The shipped draft: its own layers from the file, everything else shared with the target."""
    meta = draft_meta(folder)
    draft = build_draft(target, meta["init_layers"])
    draft.load_state_dict({k: v.to(target.dtype) for k, v in load_file(Path(folder) / DRAFT_FILE).items()},
                          strict=False)
    for param in draft.parameters():
        param.requires_grad = False
    return draft.to(target.dtype).eval(), meta

"""Whether a hub pair can load now: its models on this machine, or the Hugging Face Hub in reach.

Without this check a model that is not downloaded, with no network, costs about 70 s before transformers says so:
huggingface_hub retries each missing file with backoff (1, 2, 4, 8, 8 s) and transformers asks for several files.
One short request to the Hub, made only when a model is missing, says in a few seconds whether waiting can help.
"""
from pathlib import Path

import huggingface_hub

from cascade_core.messages import shown

# Seconds the Hub has to answer before a model that is not downloaded is refused (a blocked network may swallow
# the request rather than refuse it).
HUB_TIMEOUT = 3


def downloaded(model_id):
    """Whether ``model_id`` is a folder here or a Hub id whose config is in this machine's Hugging Face cache."""
    if Path(model_id).is_dir():
        return True
    try:
        return isinstance(huggingface_hub.try_to_load_from_cache(model_id, "config.json"), str)
    except ValueError:  # not a valid Hub id: nothing of it can be cached
        return False


def hub_out_of_reach():
    """Why nothing can be downloaded now (HF_HUB_OFFLINE set, or no answer from the Hub within HUB_TIMEOUT
    seconds, made once without huggingface_hub's retries), or None where the Hub answers."""
    if huggingface_hub.constants.HF_HUB_OFFLINE:
        return "downloads are off (HF_HUB_OFFLINE=1)"
    try:
        huggingface_hub.get_session().head(huggingface_hub.constants.ENDPOINT, timeout=HUB_TIMEOUT)
    except Exception:  # any failure to get an answer (no name, refused, timed out, a proxy's error) is "out of reach"
        return "the Hugging Face Hub cannot be reached"
    return None


def check_downloadable(models):
    """``models``: what each model of a pair is called (e.g. "target model", "EAGLE-3 head") -> its folder or Hub
    id. A ValueError in one sentence names each model that is neither here nor downloadable now, before anything
    loads; the Hub is asked only when a model is missing, so a downloaded pair loads as before."""
    missing = [f"the {role} {shown(model_id)}" for role, model_id in models.items() if not downloaded(model_id)]
    why = hub_out_of_reach() if missing else None
    if why is None:
        return
    one = len(missing) == 1
    raise ValueError(f"{' and '.join(missing)} {'is' if one else 'are'} not downloaded to this machine and {why}: "
                     f"download {'it' if one else 'them'} where the network is, or choose the bundled or tiny pair")

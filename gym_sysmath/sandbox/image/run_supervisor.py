"""The supervisor's entry point: ``python3 -s -P run_supervisor.py [flags]``, the image's
ENTRYPOINT, and the process backend's command (``workers.supervisor_path``).

``-P`` keeps this folder off ``sys.path``: jobs fork from the supervisor and inherit its path,
and must not import its modules by name. So the folder is loaded here from its own path, as the
package ``sandbox_image``: the supervisor's modules and ``toolchains`` then import each other
as they do on the host, where this folder is ``gym_sysmath.sandbox.image``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

PACKAGE = "sandbox_image"


def load_image_package() -> None:
    spec = importlib.util.spec_from_loader(PACKAGE, loader=None, is_package=True)
    assert spec is not None
    package = importlib.util.module_from_spec(spec)
    package.__path__ = [os.path.dirname(os.path.abspath(__file__))]
    sys.modules[PACKAGE] = package


if __name__ == "__main__":
    load_image_package()
    sys.exit(importlib.import_module(f"{PACKAGE}.supervisor.service").main(sys.argv[1:]))

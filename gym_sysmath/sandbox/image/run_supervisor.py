"""The supervisor's entry point: ``python3 -s -P run_supervisor.py [flags]``, the image's
ENTRYPOINT, and the process backend's command (``workers.supervisor_path``).

``-P`` keeps this folder off ``sys.path``: jobs fork from the supervisor and inherit its path,
and must not import its modules by name. So the folder, a package (its ``__init__.py``), is
loaded here from its own path as ``sandbox_image``: the supervisor's modules and ``toolchains``
then import each other as they do on the host, where it is ``gym_sysmath.sandbox.image``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

PACKAGE = "sandbox_image"


def load_image_package() -> None:
    folder = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(PACKAGE, os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)


if __name__ == "__main__":
    load_image_package()
    sys.exit(importlib.import_module(f"{PACKAGE}.supervisor.service").main(sys.argv[1:]))

# SPDX-License-Identifier: Apache-2.0
"""Bundles libdppclient.so into the package when it is built.

`pip install ./python` (or `python3 -m pip wheel ./python`) copies the
library into dpp/ so that the installed package finds it without DPP_LIB:
the one DPP_LIB names at build time, else <source>/build/libdppclient.so
(build it first: `make build`). Without either the package is built without
it and looks for an installed library at run time (python/dpp/_lib.py).
The metadata is in pyproject.toml.
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
# The name the library is loaded by (its soname), so no symlink is needed.
BUNDLED = "libdppclient.so.0"


def _library():
    env = os.environ.get("DPP_LIB")
    if env:
        return env
    built = os.path.join(os.path.dirname(HERE), "build", "libdppclient.so")
    return built if os.path.exists(built) else None


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        lib = _library()
        if lib is None:
            print("dpp: no libdppclient.so to bundle (set DPP_LIB or build <source>/build first); "
                  "the package will look for an installed one")
            return
        dest = os.path.join(self.build_lib, "dpp", BUNDLED)
        shutil.copyfile(os.path.realpath(lib), dest)
        os.chmod(dest, 0o755)
        print("dpp: bundled %s as dpp/%s" % (os.path.realpath(lib), BUNDLED))


setup(cmdclass={"build_py": BuildWithLibrary})

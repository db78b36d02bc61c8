"""The one Python environment of Trellis' tools (tools/install-deps.sh makes it): a venv at
$TRELLIS_VENV (default /opt/trellis-venv) over Debian's packages (numpy, h5py, matplotlib,
Pillow) with TensorBoard. A tool calls reexec() first, so it runs there whichever python3
started it (a pyenv or conda python3 first on PATH lacks those packages); without the venv it
goes on where it is.
"""
import os
import sys


def venv_python():
    return os.path.join(os.environ.get("TRELLIS_VENV", "/opt/trellis-venv"), "bin", "python")


def reexec():
    python = venv_python()
    if os.environ.get("TRELLIS_TOOLS_PYTHON") or not os.access(python, os.X_OK):
        return
    if os.path.realpath(sys.prefix) == os.path.realpath(os.path.dirname(os.path.dirname(python))):
        return
    os.environ["TRELLIS_TOOLS_PYTHON"] = python
    os.execv(python, [python] + sys.argv)

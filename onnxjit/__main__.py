"""`python -m onnxjit ...`: the command line, onnxjit/tools/cli.py (imported as onnxjit.__main__,
this module is that one: old imports such as `from onnxjit.__main__ import main` keep working)."""
import sys

from onnxjit.tools import cli as _cli

if __name__ == "__main__":
    sys.exit(_cli.main())
elif __name__ == "onnxjit.__main__":     # not as multiprocessing's __mp_main__
    sys.modules[__name__] = _cli

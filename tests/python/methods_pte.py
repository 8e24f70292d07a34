"""Lists and loads every method of hfexport `.pte` programs in the upstream ExecuTorch Python
runtime, for the Rust test suite.

usage: methods_pte.py PROGRAM.pte [PROGRAM.pte ...]

Prints one line per program: its method names (`Program.method_names`), sorted and joined by
commas, after `load_method` succeeded on each of them.
"""
import sys
import warnings

warnings.filterwarnings("ignore")
from executorch.runtime import Runtime  # noqa: E402


def main():
    for path in sys.argv[1:]:
        program = Runtime.get().load_program(path)
        names = sorted(program.method_names)
        for name in names:
            program.load_method(name)
        print(",".join(names))


if __name__ == "__main__":
    main()

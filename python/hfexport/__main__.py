"""The ``hfexport`` console script (and ``python -m hfexport``): the Rust command line, run in
this process with the interpreter released."""

import signal
import sys

from . import _native


def main() -> None:
    # Ctrl-C stops the command as it stops the standalone binary (an interrupted export leaves
    # only its staging folder, which the next export removes)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(_native.main(sys.argv))


if __name__ == "__main__":
    main()

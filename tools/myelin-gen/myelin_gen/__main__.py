# Entry point for `python -m myelin_gen ...`; forwards to the command-line
# interface in myelin_gen.cli.

import sys

from .cli import main

sys.exit(main())

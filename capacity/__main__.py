"""`python -m capacity ...` runs the command line."""

import sys

from capacity.cli import main

sys.exit(main())

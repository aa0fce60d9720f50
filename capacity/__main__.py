"""`python -m capacity ...` runs the command line."""

import sys

from capacity.cli.main import main

sys.exit(main())

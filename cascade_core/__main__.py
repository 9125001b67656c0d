import sys

from cascade_core.tools.cli import main

sys.exit(main())

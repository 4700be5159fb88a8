import sys

from elmo.cli import main

sys.exit(main())

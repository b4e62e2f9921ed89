import sys

from trtsweep.lane.runner import main

sys.exit(main())

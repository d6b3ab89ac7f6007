"""``python -m trainlaunch.agent``."""

import sys

from trainlaunch.agent.main import main

sys.exit(main())

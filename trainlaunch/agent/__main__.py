"""``python -m trainlaunch.agent``."""

import sys

from trainlaunch.agent.main import main
from trainlaunch.node.processes import exit_at_once

exit_at_once(main(sys.argv[1:]))

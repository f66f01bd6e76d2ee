"""Shared pytest setup: make the tests' helper modules (optable) importable,
and let Ctrl-C reach the tests that press it."""

import os
import signal
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

# A command started in the background by a non-interactive shell (`cmd &`)
# inherits SIGINT ignored, and Python then installs no KeyboardInterrupt
# handler, here or in the children the Ctrl-C tests start (an ignored signal
# stays ignored across exec). Those tests press Ctrl-C on purpose: restore
# Python's handler, which the children then get back as the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

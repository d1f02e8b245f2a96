"""``python -m specpolicy.cli``."""

from specpolicy.cli import main

main()

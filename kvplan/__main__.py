"""`python -m kvplan` runs the command line."""

from kvplan.cli import main

main()

"""`python -m pddplan` runs the command line."""

from pddplan.cli import main

main()

"""`python -m aka` is the `aka` command."""

from aka.cli import main

main()

"""`python -m dmocli ARGS` runs the dmo CLI, as `torchrun ... -m dmocli train ...` does."""

from dmocli.cli.entry import main

main()

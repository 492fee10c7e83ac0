"""`python -m dmocli ARGS` runs the dmo CLI, as `torchrun ... -m dmocli train ...` does."""
from .entry import main

main()

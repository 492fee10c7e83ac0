"""The one scored pass over a table (scored_pass.py) and what the commands keep of it (accumulators.py): below the
training pipelines, whose streaming solvers score their validation rows with it, and the after-training commands."""

"""One module per `dmo` command: a shim that takes its declared options (dmocli/cli/declared.py), calls one
pipeline function and prints what it returns through dmocli/cli/output.py. dmocli/cli/app.py registers them."""

"""ERO, the exact penalty solver (docs/ero.md): `solver` (the `ero` solver: warm start, outer updates, the best
iterate), `settings` (its `--param`s and presets), `penalty` (the penalty function and its inner Adam steps) and
`penalty_boosting` (the same penalty with boosting rounds, for `--model gbdt`).

Nothing is imported here: the registry (`dmocli/solvers/__init__.py`) imports a solver's module on first use.
"""
